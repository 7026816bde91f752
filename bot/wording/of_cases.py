"""The wording of a case: not run or not finished, its correctness, stability, latency and plausibility."""

from __future__ import annotations

# Message id -> (label id or None, English text): a case's run, correctness, stability, latency and plausibility.
MESSAGES: dict[str, tuple[str | None, str]] = {
    # the case was not run, or a side did not finish
    "run.not_run": (None, "not run"),
    "run.skipped": (None, "{reason}"),
    "run.held_out": (None, "held out of the tuning search (its re-verification runs it)"),
    "run.no_gpu": (None, "needs a CUDA GPU; this machine has none"),
    "run.wrong_gpu": (None, "runs on {arch}; this runner's GPU is {gpu_arch} ({gpu})"),
    "run.no_build": (None, "kernel.toml has no {device} build"),
    "run.fail_alike": (None, "base and head fail to build alike"),
    "run.head_fails": (None, "head does not build"),
    "run.artifact_refused": (None, "artifact refused: {detail}"),
    "run.side_failed": (None, "{who} {status}: {detail}"),
    "run.no_result": (None, "head produced no result"),
    # why the judge's case did not finish: where it was, how the side ended (the worker's output verbatim)
    "run.timed_out": (None, "timed out after {seconds} s during {where}"),
    "run.gone": (None, "{how} during {where}"),
    "run.raised": (None, "raised during {where}: {error}"),
    "run.judge_stuck": (None, "the judge could not go on ({error}) during {where}"),
    "run.with_output": (None, "{detail}: {worker_output}"),
    "exit.signal": (None, "killed by signal {signal} ({name})"),
    "exit.signal_plain": (None, "killed by signal {signal}"),
    "exit.status": (None, "exited with status {status}"),
    "where.setup": (None, "setup"),
    "where.side": (None, "{side} {phase}"),
    "phase.start": (None, "start"),
    "phase.check": (None, "check"),
    "phase.exit": (None, "exit"),
    "phase.timing": (None, "timing"),
    "phase.loading": (None, "timing (loading inputs)"),
    "phase.spot_check": (None, "spot check"),
    "phase.probe": (None, "probe {probe}"),
    "run.verdict_status": (None, "{verdict}: {status}"),
    "measurement.rejected": ("measurement_rejected", "{detail}"),
    "measurement.gpu_busy": (
        None,
        "{side}: the GPU was still busy {ms} ms after the worker reported its calls done "
        "(work left running outside the timed region)",
    ),
    "measurement.untimed_cpu": (
        None,
        "{side}: the sandbox used {used} s of CPU outside its timed calls (allowed {allowed} s): work done outside "
        "the timed region",
    ),
    # correctness and stability of head (random inputs, boundary probes, timed calls)
    "correctness.bad_output": (None, "{side} raised or returned a bad output: {error}"),
    "correctness.bad_output_probe": (None, "{side} raised or returned a bad output on boundary probe {probe}: {error}"),
    "correctness.unwritten": ("correctness", "output {output} has elements the kernel never wrote, first at {element}"),
    "correctness.max_abs_err": (
        "correctness",
        "max_abs_err {value} > tolerance {limit} on {output}, first bad element {element}",
    ),
    "correctness.max_rel_err": (
        "correctness",
        "max_rel_err {value} > limit {limit} on {output}, first bad element {element}",
    ),
    "correctness.cos_diff": (
        "correctness",
        "cos_diff (1 - cos-sim) {value} > limit {limit} on {output}, first bad row {element}",
    ),
    "correctness.max_abs_err_total": ("correctness", "max_abs_err {value} > tolerance {limit}"),
    "correctness.spot_checks": (
        "correctness",
        "{failed} of {checked} checked timed calls differ from the reference ({first}): "
        "every call must compute its result",
    ),
    "correctness.scratch_left": (
        "correctness",
        "left scratch non-zero after {left} of {checked} timed calls, first at {first}: every call gets zeroed "
        "scratch and must leave it zeroed, as in production, where nothing zeroes it between calls",
    ),
    "correctness.scratch_left_base": (
        None,
        "in base too: scratch left non-zero after {left} of {checked} timed calls, first at {first}; base leaves it "
        "so alike, so it fails no pull request",
    ),
    "correctness.base_incorrect": (None, "base is itself incorrect on this case; latency not compared"),
    "correctness.base_incorrect_probe": (
        None,
        "base is itself incorrect on this case (boundary probe {probe}); latency not compared",
    ),
    "stability.nan_inf": ("stability", "output has NaN/Inf where the reference has none (or misses them)"),
    "stability.nan_inf_at": (
        "stability",
        "output has NaN/Inf where the reference has none (or misses them), first at {element}",
    ),
    "stability.violation": ("stability", "NaN/Inf where the reference has none (or misses them), first at {element}"),
    # the first bad element of an output (a phrase of the messages above)
    "element.at": (None, "{where}"),
    "element.value": (None, "{where}: got {got}, reference {expected}"),
    "element.unwritten": (None, "{where}: got {got} (never written), reference {expected}"),
    # latency, CPU time and the simulated cost against base
    "performance.few_samples": ("performance_not_judged", "fewer than two valid timing samples (throttled GPU?)"),
    "performance.not_paired": ("performance_not_judged", "head and base were not timed in the same blocks"),
    "performance.regression": ("performance", "p50 {delta} (95% CI {low}..{high}) > {limit}% limit"),
    "performance.inconclusive": (
        "performance_inconclusive",
        "p50 {delta} (95% CI {low}..{high}) straddles the {limit}% limit",
    ),
    "performance.inconclusive_noisy": (
        "performance_inconclusive",
        "p50 {delta} (95% CI {low}..{high}) straddles the {limit}% limit ({noisy}; measured {pairs} process pairs)",
    ),
    "performance.latency_undecided": (None, "latency undecided"),
    "noisy.cores": (None, "noisy runner: other processes kept {busy} of {cores} cores busy"),
    "noisy.throttled": (None, "throttled GPU: {reasons}"),
    "noisy.gpu_busy": (None, "busy GPU: {processes} other compute process(es) on the device"),
    "performance.p50_undecided": (None, "p50 undecided"),
    "performance.cpu_time": (
        "performance",
        "CPU time per call {delta} (95% CI {low}..{high}, every thread of the sandbox) > {limit}% limit",
    ),
    "performance.cpu_time_leans": (
        "performance_inconclusive",
        "CPU time per call {delta} (95% CI {low}..{high}, every thread of the sandbox) straddles the {limit}% limit, "
        "above it at its estimate: the wall time's pass is not taken",
    ),
    "performance.small_only": (
        None,
        "faster only on the smaller cases: {faster} (base p50 up to {faster_max} ms), while the larger ones are not: "
        "{rest} (from {rest_min} ms) — is it only faster on small batches?",
    ),
    "performance.case_delta": (None, "{case} {delta}"),
    "performance.base_drift": (
        None,
        "base measured {drift} against its first measurement on this device (same binary): the runner is noisier or "
        "slower than it was; head and base were interleaved, so the verdict stands",
    ),
    # above the hardware, or an implausible speed-up
    "plausibility.over_peak": (
        "implausible",
        "above the hardware limit — verify: head {over} ({peak_of}); "
        "check the case's declared flops/bytes and the timing",
    ),
    "plausibility.base_over_peak": (None, "base measured above the hardware limit: {over}; verify the declared work"),
    "plausibility.rate": (None, "{rate} {unit} is {pct}% of the peak {peak} {unit}"),
    "plausibility.speedup": (
        "implausible_speedup",
        "head p50 {head} ms vs base {base} ms ({speedup}x faster, above max_speedup {limit}x)",
    ),
}
