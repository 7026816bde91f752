"""What the tests of main's record share: commits, figures and a scratch main branch with reports to record."""

from __future__ import annotations

from bot.mainline.drift import Reference
from bot.mainline.record import MainCommit
from bot.models.agent_report import AgentReport
from bot.models.ledger import CaseFigure
from bot.models.report import Build, CaseReport, KernelReport, Machine, Report, Resource, ResourceCheckReport

REF = Reference(label="v0.3", sha="r" * 40, committed_at="2026-01-01T00:00:00+00:00")


def sha(i: int) -> str:
    return f"{i:040x}"


def step(i: int, pct: float, *, kernel: str = "deepgemm_tile", case: str = "square_512", ci: float = 0.5) -> CaseFigure:
    base = REF.sha if i == 1 else sha(i - 1)
    return CaseFigure(
        sha=sha(i),
        base_sha=base,
        kernel=kernel,
        domain="deepgemm",
        case_name=case,
        device="cpu",
        device_name="cpu",
        p50_ms=1.0 + pct / 100,
        base_p50_ms=1.0,
        regression_pct=pct,
        ci_low_pct=pct - ci,
        ci_high_pct=pct + ci,
        verdict="pass" if pct + ci <= 3 else "fail",
        committed_at=f"2026-02-{i:02d}T10:00:00+00:00",
    )


def commit(i: int, pr: int | None = None) -> MainCommit:
    return MainCommit(
        sha=sha(i),
        base_sha=REF.sha if i == 1 else sha(i - 1),
        committed_at=f"2026-02-{i:02d}T10:00:00+00:00",
        subject=f"change {i}" + (f" (#{pr})" if pr else ""),
        pr=pr,
    )


def _report(pr: int | None = None) -> Report:
    cases = [
        CaseReport(
            name="square_512", tolerance=0.01, p50_ms=1.1, base_p50_ms=1.0, regression_pct=10.0, ci95_pct=[9.0, 11.0],
            verdict="fail",
        ),
        CaseReport(name="gemm_4096", device="cuda", tolerance=0.01, verdict="skipped", reasons=["needs a CUDA GPU"]),
    ]  # fmt: skip
    check = ResourceCheckReport(
        status="ok", head=[Resource(function="k1", registers=96, smem_bytes=4096)], threads={"k1": 256}
    )
    return Report(
        base_sha="b" * 40,
        head_sha="c" * 40,
        pr=pr,
        verdict="fail",
        kernels=[
            KernelReport(
                name="deepgemm_tile", domain="deepgemm", changed=True, verdict="fail", cases=cases,
                resource_check=check, build=Build(ok=True, seconds=1, cached=False, device="cpu"),
            ),
            KernelReport(name="flashmla_decode", domain="flashmla", changed=False, verdict="skipped"),
        ],
        agent=AgentReport(status="offline"),
        environment=Machine(device="cpu", python="3.11"),
        created_at="2026-03-02T10:00:00+00:00",
        opgate_version="0.1.0",
    )  # fmt: skip
