"""Each agent expectation beside what was measured, as the comment shows it (bot/present/expectations.py)."""

from __future__ import annotations

from bot.models.agent_report import ExpectationCheck
from bot.models.finding import Phrase
from bot.present.expectations import expected_line
from bot.present.render import render_comment
from tests.test_verdict_expectations import _with_expectations


def test_the_comment_shows_each_expectation_beside_the_measured_value():
    r = _with_expectations({"latency_p50@square_512": "-8%", "tflops": 140})
    text = render_comment(r)
    assert (
        "`latency_p50@square_512` on `square_512`: expected p50 change \u22128.0 %, "
        "measured \u22121.2 % (\u22122.9..+0.4) — outside it" in text
    )
    assert "`tflops`: expected 140, not measured (no measured quantity has this name)" in text


def test_a_resource_and_a_speedup_read_as_the_figure_they_were_held_against():
    registers = ExpectationCheck(
        metric="registers", expected=215, quantity="registers", subject="gemm (sm_90a)", expected_value=215,
        measured=223, unit="registers", outcome="outside",
    )  # fmt: skip
    assert expected_line(registers) == (
        "`registers` on `gemm (sm_90a)`: expected registers 215 registers, measured 223 registers — outside it"
    )
    speedup = ExpectationCheck(
        metric="speedup", expected=1.05, quantity="p50 change", subject="square_512", expected_value=-4.761905,
        measured=-5.0, low=-6.0, high=-4.0, unit="%", outcome="inside",
        note=Phrase(key="expect.speedup_read", params={"speedup": "1.05"}),
    )  # fmt: skip
    assert expected_line(speedup) == (
        "`speedup` on `square_512`: expected p50 change \u22124.8 %, measured \u22125.0 % (\u22126.0..\u22124.0)"
        " — inside the measured interval; speedup ×1.05 read as a p50 change"
    )


def test_agent_text_in_a_metric_name_cannot_break_out_of_its_code_span():
    check = ExpectationCheck(metric="p50` [x](http://evil)", expected="<img src=x>", outcome="not_measured")
    line = expected_line(check)
    assert "`p50' [x](http://evil)`" in line and "<img" not in line


def test_in_chinese_the_line_keeps_its_figures_and_names_and_holds_no_english_sentence():
    from bot.text.i18n import english_runs, speaking

    r = _with_expectations({"latency_p50@square_512": "-8%", "tflops": 140})
    with speaking("zh-CN"):
        text = render_comment(r)
    line = next(x for x in text.splitlines() if "`latency_p50@square_512`" in x)
    assert line.strip() == (
        "- `square_512` 上的 `latency_p50@square_512`：预期p50 变化 \u22128.0 %，"
        "实测 \u22121.2 % (\u22122.9..+0.4) — 在区间外"
    )
    assert "- agent 的预期，与本次审查的实测值对照：" in text
    registers = ExpectationCheck(
        metric="registers", expected=215, quantity="registers", subject="gemm (sm_90a)", expected_value=215,
        measured=223, unit="registers", outcome="inside",
    )  # fmt: skip
    with speaking("zh-CN"):
        shown = expected_line(registers)
    assert shown == "`gemm (sm_90a)` 上的 `registers`：预期寄存器 215 registers，实测 223 registers — 在实测区间内"
    assert english_runs(shown) == []
