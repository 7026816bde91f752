"""The wording of builds and failed compiles, of what was not run, and of the tunables' static checks."""

from __future__ import annotations

# Message id -> (label id or None, English text): builds, compile failures, coverage and tunables.
MESSAGES: dict[str, tuple[str | None, str]] = {
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
}
