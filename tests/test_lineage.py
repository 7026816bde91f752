"""Nothing passes on a reference it brought itself: renames and copies found by git, new kernels and implausible
speedups sent to a person. Pure functions, and git's detection on a real scratch repository."""

from __future__ import annotations

from typing import Any

from bot.config.manifest_tables import Constraints
from bot.config.repo import RepoConfig
from bot.models.report import CaseReport, KernelReport
from bot.review.lineage import Origin, origins, renamed_to
from bot.verdict.gate import Policy, kernel_verdict
from bot.verdict.written import written_kernel

SIZES = {
    "kernels/a/kernel.toml": 1000,
    "kernels/a/body.cpp": 9000,
    "kernels/fast/kernel.toml": 1000,
    "kernels/fast/body.cpp": 9000,
    "kernels/own/kernel.toml": 1000,
    "kernels/own/body.cpp": 9000,
}


def judged_kernel(*args: Any, **kw: Any) -> KernelReport:
    """`kernel_verdict`'s report as report.json states it (its findings' lines written)."""
    return written_kernel(kernel_verdict(*args, **kw))


def test_a_folder_that_comes_mostly_from_a_base_kernel_is_that_kernel_renamed_or_copied():
    head = {"fast": "kernels/fast", "own": "kernels/own"}
    base = {"a": "kernels/a"}
    copies = [("kernels/a/kernel.toml", "kernels/fast/kernel.toml"), ("kernels/a/body.cpp", "kernels/fast/body.cpp")]
    copies.append(("kernels/a/kernel.toml", "kernels/own/kernel.toml"))  # only the manifest: 10 % of its bytes
    found = origins(copies, SIZES, head, base)
    assert found == {"fast": Origin(base="a", how="renamed", share=1.0)}
    assert renamed_to(found) == {"a": "fast"}
    copied = origins(copies, SIZES, {**head, "a": "kernels/a"}, base)  # a is still in head: a copy
    assert copied["fast"].how == "copied" and renamed_to(copied) == {}


def _case(name: str, p50: float, base: float) -> CaseReport:
    return CaseReport(name=name, device="cpu", tolerance=1e-2, verdict="pass", p50_ms=p50, base_p50_ms=base)


def test_a_head_more_than_three_times_faster_than_base_needs_a_person():
    cases = [_case("square_512", 0.43, 27.1), _case("ragged", 1.0, 1.2)]
    kernel = judged_kernel(KernelReport(name="k", domain="d", changed=True, verdict="pass"), [], cases,
                            Constraints(), Policy())  # fmt: skip
    assert kernel.verdict == "needs_accept"
    assert kernel.accept_needed == [
        "implausible speedup — verify: square_512 head p50 0.43 ms vs base 27.1 ms (63.0x faster, above max_speedup 3x)"
    ]
    relaxed = Constraints.model_validate(RepoConfig(thresholds={"max_speedup": 100}).constraints)
    kernel = judged_kernel(KernelReport(name="k", domain="d", changed=True, verdict="pass"), [], cases, relaxed,
                            Policy())  # fmt: skip
    assert kernel.verdict == "pass" and kernel.accept_needed == []
