"""Nsight Compute output → metrics per launch → report.json and the comment (bot/nsight.py).

The CSV files in tests/data/ncu are SYNTHETIC: written by hand in the layout NVIDIA documents for
`ncu --csv` (no GPU has produced them); the parser must also survive what surrounds the CSV in real output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.models.agent_report import AgentReport
from bot.models.report import CaseReport, KernelReport, Machine, NsightKernel, NsightMetrics, Report
from bot.present.render import render_comment
from bot.untrusted import nsight

DATA = Path(__file__).resolve().parent / "data" / "ncu"


def parse(name: str) -> list[nsight.Launch]:
    return nsight.parse_csv((DATA / name).read_text())


def test_each_launch_gets_its_metrics_and_a_short_function_name():
    launches = parse("splitk_base_units.csv")
    assert [(launch.id, launch.function) for launch in launches] == [
        (0, "v41_attention::splitk_partial_kernel<4, 64>"),
        (1, "v41_attention::splitk_merge_kernel<4>"),
    ]
    assert len(launches[0].metrics) == len(nsight.METRICS)
    assert launches[0].metrics[nsight.DRAM_READ] == ("byte", 104_857_600.0)  # thousands separators dropped


def test_base_units_summarize_to_microseconds_bytes_and_percentages():
    partial, merge = nsight.summarize(parse("splitk_base_units.csv"), "ncu 2025.3.1").kernels
    assert partial.duration_us == pytest.approx(7486.912)  # 7,486,912 ns
    assert partial.model_copy(update={"duration_us": None}) == NsightKernel(
        function="v41_attention::splitk_partial_kernel<4, 64>",
        achieved_occupancy_pct=17.92,
        theoretical_occupancy_pct=18.75,
        dram_throughput_pct=3.91,
        dram_bytes=104_857_600 + 35_651_584,
        registers=168,
        local_bytes=0.0,
    )
    assert merge.duration_us == pytest.approx(13.184) and merge.registers == 40


def test_scaled_units_are_converted_and_a_missing_value_stays_unknown():
    (gemm,) = nsight.summarize(parse("gemm_scaled_units.csv")).kernels
    assert gemm.function == "deepgemm_tile::gemm_bf16_kernel<128, 128, 64, true>"
    assert gemm.duration_us == pytest.approx(236.51)
    assert gemm.dram_bytes == pytest.approx(138.41e6)  # 71.30 + 67.11 Mbyte (decimal, as ncu prints them)
    assert gemm.local_bytes == pytest.approx(8200.0)  # spills: 4.10 Kbyte loaded and stored
    assert gemm.achieved_occupancy_pct is None  # "n/a"
    assert gemm.registers == 232


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("==PROF== Connected to process 1\n==ERROR== ERR_NVGPUCTRPERM - no permission\n", "no ncu CSV header"),
        (
            '==PROF== Connected\n"ID","Process ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n',
            "no metric rows",
        ),
        ("", "no ncu CSV header"),
    ],
)
def test_output_without_metrics_is_an_error_that_says_what_is_missing(text, message):
    with pytest.raises(nsight.NsightError, match=message):
        nsight.parse_csv(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [("1,024", 1024.0), (" 3.5 ", 3.5), ("1e3", 1000.0), ("n/a", None), ("", None), ("(256, 1, 1)", None)],
)
def test_metric_values_parse_as_numbers_or_nothing(text, value):
    assert nsight.number(text) == value


def test_the_ncu_command_profiles_only_the_marked_call_and_leaves_the_clocks_alone():
    argv = nsight.command("/usr/local/cuda/bin/ncu", "/tmp/out.csv", ["python3", "-m", "x"])
    assert argv[:2] == ["/usr/local/cuda/bin/ncu", "--csv"]
    assert argv[argv.index("--clock-control") + 1] == "none"
    assert argv[argv.index("--profile-from-start") + 1] == "off"
    assert argv[argv.index("--metrics") + 1].split(",") == list(nsight.METRICS)
    assert argv[-3:] == ["python3", "-m", "x"]


def _report(*cases: CaseReport) -> Report:
    kernel = KernelReport(name="v41_attention_splitk", domain="v41_attention", changed=True, verdict="pass")
    kernel.cases = list(cases)
    return Report(
        base_sha="a" * 40,
        head_sha="b" * 40,
        verdict="pass",
        kernels=[kernel],
        agent=AgentReport(status="offline"),
        environment=Machine(device="cuda", gpu="NVIDIA H200", python="3.12.3"),
        created_at="2026-12-01T10:00:00+00:00",
        opgate_version="0.1.0",
    )


def _case(name: str) -> CaseReport:
    return CaseReport(name=name, device="cuda", tolerance=0.01, verdict="pass")


def test_metrics_attached_to_a_case_reach_report_json_and_the_comment():
    metrics = nsight.summarize(parse("splitk_base_units.csv"), "ncu 2025.3.1")
    report = nsight.attach(_report(_case("seq_8192"), _case("seq_4096")), {"v41_attention_splitk/seq_8192": metrics})
    seq_8192, seq_4096 = report.kernels[0].cases
    assert seq_8192.nsight == metrics and seq_4096.nsight is None
    assert Report.model_validate_json(report.to_json()) == report  # the contract round-trips
    comment = render_comment(report)
    assert "Nsight Compute (ncu 2025.3.1), each kernel launch of one call:" in comment
    assert (
        "| `seq_8192` | `v41_attention::splitk_partial_kernel<4, 64>` | 7487 µs | 17.9% | 18.8% | 3.9% | 134 MiB "
        "| 168 | 0 B |" in comment
    )


def test_spilling_launches_are_bold_in_the_comment_and_a_report_without_metrics_has_no_table():
    spills = NsightMetrics(kernels=[NsightKernel(function="k", registers=255, local_bytes=8192.0)])
    attached = nsight.attach(_report(_case("seq_8192")), {"v41_attention_splitk/seq_8192": spills})
    with_metrics = render_comment(attached)
    assert "| **8 KiB** |" in with_metrics
    assert "Nsight Compute" not in render_comment(_report(_case("seq_8192")))
