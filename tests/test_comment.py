"""The PR comment as GitHub renders it (cmark-gfm): headline first, failing cells marked, each reason once, fits."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bot.config.manifest_tables import Constraints
from bot.edges import publish
from bot.models.finding import Gate, Outcome
from bot.models.ledger import AcceptanceRow
from bot.models.report import CaseReport, KernelReport, Report
from bot.present import digest
from bot.present.render import COMMENT_LIMIT, REVIEW_MARKER, render_comment
from bot.present.status import acceptance_status
from bot.review import fanout
from bot.text.i18n import speaking
from bot.text.safe import one_line
from bot.verdict.findings import add_kernel
from bot.verdict.gate import Policy, kernel_verdict
from bot.verdict.written import written, written_kernel
from tests import comment_reports as cr
from tests.comment_checks import rows, sections, structure_problems, text_of
from tests.hostile import HOSTILE, html, problems, table_breaks


def comment(name: str, with_pr: bool = True) -> str:
    report = cr.REPORTS[name]()
    return render_comment(report, pr=cr.pr_for(report) if with_pr else None)


@pytest.mark.parametrize("with_pr", [True, False], ids=["pr", "local"])
@pytest.mark.parametrize("name", sorted(cr.REPORTS))
def test_every_comment_starts_with_its_verdict_and_renders_cleanly(name: str, with_pr: bool):
    out = comment(name, with_pr)
    report = cr.REPORTS[name]()
    assert structure_problems(out, report) == []
    rendered = html(out)
    assert f"opgate: {report.verdict.replace('_', ' ')}" in text_of(rendered[: rendered.index("</h2>")])
    assert problems(out, mentions=("maint-bob",)) == [] and table_breaks(out) == []
    assert len(out) < COMMENT_LIMIT


def test_the_structure_check_finds_what_the_old_comment_did_wrong():
    """The check itself: a dash-only row, a reason twice, a table before the headline are each found."""
    report = cr.fail_latency()
    good = render_comment(report)
    assert structure_problems(good, report) == []
    row = "| `gemm_4096` | — | — | — | — | ⏭️ skipped |"
    dashes = good.replace("| `square_512` |", row + "\n| `square_512` |", 1)
    assert any("a table row for a case that did not run: ['gemm_4096'" in p for p in structure_problems(dashes, report))
    assert any("a table row of empty or dash cells" in p for p in structure_problems(dashes, report))
    line = next(ln for ln in good.splitlines() if ln.startswith("- ❌ **performance**"))
    twice = good.replace("**Notes**", line + "\n\n**Notes**", 1)
    assert any(
        "shown 2 times: deepgemm_tile: performance: ragged_200x328x264" in p for p in structure_problems(twice, report)
    )
    table_first = good.replace("\n## ", "\n| a | b |\n|---|---|\n| 1 | 2 |\n\n## ", 1)
    assert "the comment does not start with its verdict heading" in structure_problems(table_first)[0]


@pytest.mark.parametrize("name", sorted(cr.REPORTS))
def test_no_table_row_is_only_dashes_and_no_cell_is_empty(name: str):
    for cells in rows(html(comment(name))):
        assert all(cells), cells
        assert any(c != "—" for c in cells[1:-1]), cells


@pytest.mark.parametrize("name", sorted(cr.REPORTS))
def test_each_reason_appears_once_in_the_headline_or_under_its_kernel(name: str):
    report = written(cr.REPORTS[name]())  # its lines as report.json writes them
    out = comment(name)
    assert [p for p in structure_problems(out, report) if p.startswith("shown")] == []
    for k in report.kernels:
        assert f"`{k.name}`: fail" not in out and f"{k.name}: fail" not in out
        for c in k.cases:  # the old comment listed each failing case twice ("case: fail", then the reason)
            assert f"{c.name}: fail" not in out and f"{c.name}`: fail" not in out
    lines = [ln for k in report.kernels for ln in digest.kernel_lines(k)]
    failing = [r for k in report.kernels if k.verdict in ("fail", "error") for r in k.reasons]
    assert len(lines) == len(failing) + sum(len(k.undecided) + len(k.accept_needed) for k in report.kernels)


def test_the_headline_carries_gate_case_value_limit_and_counts():
    rendered = html(comment("fail_latency"))
    headline = rendered[: rendered.index("<h3>")]
    assert "❌ performance ragged_200x328x264 p50 +10.53% (95% CI +9.73%..+12.00%) > 3% limit" in text_of(headline)
    counts = text_of(re.search(r"<p><strong>9 cases</strong>.*?</p>", headline, re.DOTALL).group(0))
    assert counts == (
        "9 cases : 2 ran · 🚀 0 faster · 🐢 1 slower · ➖ 1 unchanged · ❌ 1 failed · ⏭️ 7 not run "
        "(7 cuda: needs a CUDA GPU; this machine has none)"
    )


def test_the_failing_cell_is_marked_and_the_others_are_not():
    table = {cells[0]: cells for cells in rows(html(comment("fail_latency"))) if len(cells) == 6}
    assert table["ragged_200x328x264"][4] == "+10.53% (+9.73..+12.00) ❌ > 3%"
    assert "<strong>+10.53%</strong>" in html(comment("fail_latency"))
    assert "❌" not in " ".join(table["square_512"]) and "❌" not in table["ragged_200x328x264"][1]
    wrong = {cells[0]: cells for cells in rows(html(comment("fail_correctness"))) if len(cells) == 6}
    assert wrong["cpu_seq_8192"][1] == "0.0625 > 0.01 ❌" and wrong["cpu_seq_4096"][1] == "NaN/Inf ❌"
    assert wrong["cpu_seq_8192"][4] == "not timed: incorrect"  # no dash-only row for a case that failed early


def test_cases_that_did_not_run_are_one_line_not_rows():
    out = comment("fail_latency")
    assert not any(c[0] in cr.CUDA_CASES for c in rows(html(out)))
    (line,) = [ln for ln in out.splitlines() if ln.startswith("⏭️ Not run")]
    assert line.startswith("⏭️ Not run, 7 cuda cases: needs a CUDA GPU; this machine has none — `gemm_4096`, ")
    gpu = comment("gpu_skipped")
    assert "| case |" not in gpu and "**7 cases**: 0 ran · ⏭️ 7 not run" in gpu


def test_details_open_where_they_decide_the_verdict():
    def opened(out: str, what: str) -> bool:
        return bool(re.search(rf"<details open><summary>{what}", out))

    assert opened(comment("fail_latency"), "Statistics") and not opened(comment("fail_latency"), "Resources")
    assert opened(comment("noisy"), "Statistics") and opened(comment("tampered"), "Statistics")
    assert opened(comment("resource_fail"), "Resources") and not opened(comment("resource_fail"), "Statistics")
    assert not opened(comment("pass"), "Statistics") and not opened(comment("pass"), "Resources")


def test_statistics_show_processes_stop_reason_spot_checks_cpu_seed_and_runner():
    cells = {c[0]: c for c in rows(html(comment("noisy"))) if len(c) == 9}
    assert cells["square_512"][1:6] == ["67 / 67", "6", "cap: time", "6", "1.6 of 2"]
    assert cells["square_512"][6:] == ["0.07 / 0.09 / 0.02", "0.08 / 0.09 / 0.01", "1351305928456565723"]
    stats = comment("noisy").split("<summary>Statistics")[1].split("</details>")[0]
    assert "Runner: 2 cores, load 3.7, governor performance, 2399.9 MHz." in stats
    assert "ragged_200x328x264: base measured -55.0% against its first measurement" in stats  # beside the statistics
    assert "Not timed, seeds of their check inputs: `square_512` `77` (3 spot checks)." in comment("tampered")


def test_a_noisy_runner_is_undecided_never_a_pass_with_its_reason_once():
    out = comment("noisy")
    assert "❔ 2 undecided" in out and "## ❔ opgate: **undecided** — `deepgemm_tile` is undecided" in out
    assert "✅" not in out.split("\n**")[0]  # no green check in the headline
    assert out.count("noisy runner: other processes kept 1.6 of 2 cores busy") == 1


def test_tampered_and_crashed_cases_are_errors_that_say_what_happened():
    tampered = html(comment("tampered"))
    assert "could not be judged" in text_of(tampered[: tampered.index("</h2>")])
    assert "⚠️ measurement rejected square_512 head: the GPU was still busy 4.1 ms" in text_of(tampered)
    row = next(c for c in rows(tampered) if c[0] == "square_512 · cuda")
    assert row[1] == "⚠️ tampered" and row[-1] == "⚠️ error"
    crashed = text_of(html(comment("crashed")))
    assert "⚠️ ragged_200x328x264 : head crashed: killed by signal 11 (SIGSEGV) during head timing" in crashed


def test_isolation_none_is_a_warning_in_the_headline_area():
    out = comment("isolation_none")
    warning = out.index("> [!WARNING]\n> **isolation: none**")
    assert warning < out.index("**9 cases**") < out.index("### ")
    assert "bubblewrap cannot start here" in out[warning : out.index("**9 cases**")]
    assert "isolation: none" not in comment("pass") and "- isolation bwrap (bubblewrap 0.11.0)" in comment("pass")


def test_a_review_that_could_not_run_says_why_under_the_heading():
    out = comment("review_error")
    assert out.startswith(f"{REVIEW_MARKER}\n## ⚠️ opgate: **error** — the review could not run\n\n> [!CAUTION]")
    assert "unknown revision 'feature~3'" in out


def test_resources_show_occupancy_with_short_function_names_and_their_notes_once():
    out = comment("resource_fail")
    resources = out.split("<summary>Resources")[1].split("</details>")[0]
    assert "| `deepgemm_tile::gemm_bf16_kernel<128, 256, 64, false>` | 215 → 215 | 0 → **16** |" in resources
    assert (
        "- deepgemm_tile::gemm_bf16_kernel&lt;128, 256, 64, false&gt;: dynamic_smem_bytes 98304 -&gt; 196608"
        in resources
    )
    assert "unsigned short const*" not in out.split("<details><summary>Reproducibility")[0]
    assert out.count("dynamic_smem_bytes 98304") == 1
    unbuilt = cr.resource_fail()  # static findings stop before any build: ptxas's check still shows its resources
    unbuilt.kernels[0].build = unbuilt.kernels[0].base_build = None
    assert "| `deepgemm_tile::gemm_bf16_kernel<128, 256, 64, false>` | 215 → 215 | 0 → **16** |" in render_comment(
        unbuilt
    )


def test_the_delta_chart_plots_each_case_its_ci_and_the_limit_band():
    out = comment("fail_latency")
    chart = out.split("```mermaid\n")[1].split("```")[0]
    assert 'x-axis ["square_512", "ragged_200x328x264"]' in chart
    series = [line.strip() for line in chart.splitlines() if line.strip().startswith(("bar", "line"))]
    assert series == [  # floating bars: the CI's top, the measured Δp50, the mask under the CI's bottom
        "bar [0.40, 12.00]",
        "bar [-1.20, 10.53]",
        "bar [-2.90, 9.73]",
        "line [3.00, 3.00]",
        "line [-3.00, -3.00]",
    ]
    assert 'y-axis "Δ p50 (%)" -4.5 --> 13.5' in chart  # room under the lowest CI and the -3% line
    assert "```mermaid" not in comment("fail_correctness", with_pr=False)  # one timed case: the table says it all


def test_a_case_name_is_never_mermaid_syntax():
    report = cr.fail_latency()
    report.kernels[0].cases[0].name = 'x"] ; click A "https://evil.example"'
    chart = render_comment(report).split("```mermaid\n")[1].split("```")[0]
    assert 'x-axis ["case 1", "ragged_200x328x264"]' in chart and "evil" not in chart


def test_spend_against_the_weekly_budget_is_a_chart_when_a_budget_is_used():
    report = cr.with_candidate_and_agent()
    out = render_comment(report, pr=cr.pr_for(report, budget=500_000, used=600_000))
    chart = out.split("xychart-beta horizontal")[1].split("```")[0]
    assert 'x-axis ["deepgemm"]' in chart and "bar [120.0]" in chart and "line [100]" in chart
    assert "| deepgemm | 1,555 | 3 | 3,000 | 600,000 | 500,000 | 120.0% |" in out
    assert "horizontal" not in render_comment(report, pr=cr.pr_for(report, used=0))
    assert "| deepgemm | 2 (1 estimated) | 1234 | 321 | 1555 |" in out


def test_the_biggest_review_fits_in_one_comment_and_says_what_it_left_out():
    report = cr.biggest()
    out = render_comment(report, pr=cr.pr_for(report))
    assert len(out) < COMMENT_LIMIT and problems(out, mentions=("maint-bob",)) == [] and table_breaks(out) == []
    assert "Too big for one comment:" in out and "`report.json` has everything" in out
    parts = sections(out)
    assert all(k.name in parts for k in report.kernels if k.changed)  # every kernel keeps its section
    assert "… and 2 more, under their kernels below" in parts[""]


def test_even_far_beyond_the_biggest_review_the_comment_is_cut_under_the_limit():
    report = cr.biggest()
    report.kernels = [k.model_copy(update={"name": f"{k.name}_{i}"}) for i in range(6) for k in report.kernels]
    out = render_comment(report, pr=cr.pr_for(report))
    assert len(out) < COMMENT_LIMIT and out.endswith("`report.json` has everything]\n")
    assert out.startswith(REVIEW_MARKER + "\n## ❌ opgate: **fail** — 24 of 48 kernels fail a gate")


def test_the_step_summary_is_the_comment_without_its_marker(tmp_path: Path):
    report = cr.fail_latency()
    text = render_comment(report, unseen_files=[], pr=cr.pr_for(report))
    path = tmp_path / "summary.md"
    publish.write_step_summary(path, text)
    summary = path.read_text()
    assert summary == text.removeprefix(REVIEW_MARKER).lstrip("\n") + "\n"
    assert summary.startswith("## ❌ opgate: **fail**") and "```mermaid" in summary and "<details open>" in summary


def test_the_status_names_gate_case_value_and_limit():
    state, description = acceptance_status(cr.fail_latency())
    assert (state, description) == (
        "failure",
        "gate failed: deepgemm_tile — performance: ragged_200x328x264 p50 +10.53% (95% CI +9.73%..+12.00%) > 3% limit",
    )
    _, resource = acceptance_status(cr.resource_fail())
    assert resource.startswith("gate failed: deepgemm_tile — resource: deepgemm_tile::gemm_bf16_kernel<128, 256, 64, ")


def test_no_state_but_a_judged_pass_has_a_green_headline_or_a_plain_success():
    """undecided (latency, nothing ran) and needs /accept (a new kernel) say so in the headline and the status."""
    expected = {
        "noisy": (
            "❔ opgate: **undecided** — `deepgemm_tile` is undecided: latency undecided on 2 cases",
            "success",
            "undecided, not blocking: deepgemm_tile (latency undecided on 2 cases) — deepgemm_tile: performance "
            "inconclusive: square_512 p50 +4.10% (95% CI -0.80%..+9.20%) straddles the 3% limit (noisy runner: ",
        ),
        "gpu_skipped": (
            "❔ opgate: **undecided** — `deepgemm_tile` is undecided: not everything it changes was run",
            "success",
            "undecided, not blocking: deepgemm_tile (not everything it changes was run) — ",
        ),
        "cuda_changed": (
            "❔ opgate: **undecided** — `deepgemm_tile` is undecided: not everything it changes was run",
            "success",
            "undecided, not blocking: deepgemm_tile (not everything it changes was run) — deepgemm_tile: "
            "kernels/deepgemm_tile/gemm_cuda.cu: changed, compiled by no build that ran here (only [build.cuda], "
            "which needs a CUDA GPU): not judged",
        ),
        "simulated": (  # the count above the limit decides nothing (issue 40, 2)
            "❔ opgate: **undecided** — `deepgemm_tile` is undecided: latency undecided on 1 case",
            "success",
            "undecided, not blocking: deepgemm_tile (latency undecided on 1 case) — deepgemm_tile: performance "
            "inconclusive: square_512 p50 +2.10% (95% CI -1.40%..+5.70%) straddles the 3% limit; simulated cost x1.049 "
            "(callgrind cycles; instructions x1.049), reported: a model the counted code can lower, it decides nothing",
        ),
        "new_kernel": (
            "🔶 opgate: **needs accept**",
            "pending",
            "needs /accept: deepgemm_fast — deepgemm_fast: new kernel",
        ),
        "pass": ("✅ opgate: **pass**", "success", "all gates pass: deepgemm_tile"),
    }
    for name, (headline, state, description) in expected.items():
        report = cr.REPORTS[name]()
        assert comment(name).split("\n")[1].startswith(f"## {headline}"), name
        got_state, got_description = acceptance_status(report)
        assert got_state == state and got_description.startswith(description), (name, got_description)
    gpu = comment("gpu_skipped")
    assert "❔ no case ran: 7 cuda cases (needs a CUDA GPU; this machine has none)" in gpu


def test_a_new_kernel_turns_green_only_after_a_persons_accept_for_this_head():
    report = cr.new_kernel()
    row = AcceptanceRow(
        pr=7, head_sha=report.head_sha, login="maint", role="write", kernels=["deepgemm_fast"], comment_id=1
    )
    state, description = acceptance_status(report, [row])
    assert state == "success" and description.startswith("accepted by @maint: nothing failed")
    old = row.model_copy(update={"head_sha": "0" * 40})
    assert acceptance_status(report, [old])[0] == "pending"  # an acceptance of another commit counts nothing


# -- the gate states each reason once ----------------------------------------------------------------------


def test_judge_kernel_states_each_failing_case_once_with_its_gate_value_and_limit():
    span = cr.span(10.53, 9.73, 12.0)
    cases = [
        cr.with_findings(
            CaseReport(name="sq", tolerance=0.01, verdict="fail"),
            cr.found(Gate.correctness, "correctness.max_abs_err_total", value="0.5", limit="0.01"),
        ),
        cr.with_findings(
            CaseReport(name="rg", tolerance=0.01, verdict="fail"),
            cr.found(Gate.performance, "performance.regression", **span),
        ),
        cr.with_findings(
            CaseReport(name="cr", tolerance=0.01, verdict="error"),
            cr.found(Gate.run, "run.side_failed", Outcome.error, who="head", status="crashed", detail="signal 11"),
        ),
        cr.with_findings(
            CaseReport(name="nc", tolerance=0.01, verdict="inconclusive"),
            cr.found(Gate.performance, "performance.inconclusive", Outcome.undecided, **span),
        ),
        CaseReport(
            name="old", tolerance=0.01, verdict="fail", reasons=["head does not build"]
        ),  # made outside the gate
    ]
    k = KernelReport(name="k", domain="deepgemm", changed=True, verdict="skipped")
    judged = written_kernel(kernel_verdict(k, [], cases, Constraints(), Policy()))
    assert judged.reasons == [
        "correctness: sq max_abs_err 0.5 > tolerance 0.01",
        "performance: rg p50 +10.53% (95% CI +9.73%..+12.00%) > 3% limit",
        "cr: head crashed: signal 11",
        "old: head does not build",
    ]
    assert [(f.gate, f.case, f.outcome) for f in judged.findings] == [
        (Gate.correctness, "sq", Outcome.fail),
        (Gate.performance, "rg", Outcome.fail),
        (Gate.run, "cr", Outcome.error),
        (Gate.performance, "nc", Outcome.undecided),
        (Gate.run, "old", Outcome.fail),
    ]
    assert judged.undecided == [
        "performance inconclusive: nc p50 +10.53% (95% CI +9.73%..+12.00%) straddles the 3% limit"
    ]
    strict = written_kernel(
        kernel_verdict(k.model_copy(update={"findings": []}), [], cases, Constraints(), Policy(inconclusive="fail"))
    )
    assert strict.reasons[3].startswith("performance inconclusive: nc p50 +10.53%") and strict.verdict == "error"
    outside = CaseReport(name="x", tolerance=0.01, verdict="fail", reasons=["head does not build"])
    alone = written_kernel(
        kernel_verdict(k.model_copy(update={"findings": []}), [], [outside], Constraints(), Policy())
    )
    assert alone.reasons == ["x: head does not build"]  # a case's reason made outside the gate, as "case: reason"


# -- the terminal ------------------------------------------------------------------------------------------


def test_the_plain_text_form_has_the_warnings_failing_lines_and_counts():
    assert digest.plain(cr.fail_latency()) == [
        "fail: deepgemm_tile: performance: ragged_200x328x264 p50 +10.53% (95% CI +9.73%..+12.00%) > 3% limit",
        "9 cases: 2 ran (0 faster, 1 slower, 1 unchanged), 1 failed, 7 not run (7 cuda: needs a CUDA GPU; this "
        "machine has none)",
    ]
    assert digest.plain(cr.isolation_none())[0].startswith("warning: isolation none, PR code ran without a sandbox")
    assert digest.plain(cr.noisy())[0].startswith("undecided: deepgemm_tile: performance inconclusive: square_512")


def test_opgate_review_prints_the_headline_and_failing_lines_log_safe(opgate, tmp_path: Path):
    report = cr.fail_latency()
    report.kernels = report.kernels[:1]
    hostile = cr.found(Gate.performance, "performance.regression", **{**cr.span(10.53, 9.73, 12.0), "delta": HOSTILE})
    kernel = report.kernels[0]
    kernel.cases[1] = cr.with_findings(kernel.cases[1], hostile)
    kernel.findings, kernel.reasons = [], []
    add_kernel(kernel, kernel.cases[1].findings[0])
    part = tmp_path / "part-deepgemm_tile"
    part.mkdir()
    (part / "report.json").write_text(report.to_json())
    (part / fanout.UNSEEN_FILE).write_text("[]")
    run = opgate("review", "--merge", str(part), "--base", cr.BASE, "--head", cr.HEAD)
    assert run.code == 1, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "opgate: verdict FAIL (deepgemm_tile fail)"
    hostile = f"fail: deepgemm_tile: performance: ragged_200x328x264 p50 {HOSTILE} (95% CI +9.73%..+12.00%) > 3% limit"
    assert lines[1] == "  " + one_line(hostile, limit=2000)
    assert lines[2].startswith("  9 cases: 2 ran (0 faster, 1 slower, 1 unchanged), 1 failed, 7 not run")
    assert not any(line.lstrip().startswith(("::", "##[")) for line in lines) and "\r" not in run.stdout
    assert json.loads((run.out / "report.json").read_text())["verdict"] == "fail"


def _report_json_roundtrip(report: Report) -> Report:
    return Report.model_validate_json(report.to_json())


def test_the_comment_reads_the_same_from_report_json():
    for make in cr.REPORTS.values():
        report = make()
        assert render_comment(_report_json_roundtrip(report)) == render_comment(report)


def _without_lines(k: KernelReport) -> KernelReport:
    """The kernel with every line its findings were rendered to emptied, its cases' and its candidate's too."""
    cases = [c.model_copy(update={"reasons": []}) for c in k.cases]
    candidate = _without_lines(k.candidate) if k.candidate is not None else None
    return k.model_copy(update={"reasons": [], "undecided": [], "accept_needed": [], "notes": [], "cases": cases,
                                "candidate": candidate})  # fmt: skip


@pytest.mark.parametrize("name", sorted(set(cr.REPORTS) - {"biggest"}))  # biggest adds notes no finding makes
def test_the_outputs_read_the_findings_never_their_lines(name: str):
    """The comment (both locales), the status line and the plain text are the same with every line emptied: each
    output renders the findings themselves."""
    report = cr.REPORTS[name]()
    bare = report.model_copy(update={"kernels": [_without_lines(k) for k in report.kernels]})
    assert acceptance_status(bare) == acceptance_status(report)
    assert digest.plain(bare) == digest.plain(report)
    for locale in ("en", "zh-CN"):
        with speaking(locale):
            assert render_comment(bare, pr=cr.pr_for(bare)) == render_comment(report, pr=cr.pr_for(report))


# -- the charts, drawn by mermaid.js in Chromium -----------------------------------------------------------


def test_every_chart_the_suite_produces_is_drawn_by_mermaid(tmp_path: Path):
    """Each ```mermaid block parses and draws one bar per case (three overlapping series: CI high, Δp50, mask), in
    every comment in English and in Chinese (zh-CN: its titles and labels in Han characters)."""
    from tests import browser, comment_page

    mermaid = comment_page.mermaid_path()
    if (why := browser.missing_reason()) is not None or mermaid is None:
        pytest.skip(why or "no mermaid.js: run scripts/comment_screenshot.py once (npm pack mermaid) or set "
                    "OPGATE_TEST_MERMAID")  # fmt: skip
    comments = []
    for make in cr.REPORTS.values():
        report = make()
        for locale in ("en", "zh-CN"):
            with speaking(locale):
                comments.append(render_comment(report, pr=cr.pr_for(report, used=400_000)))
    every = "\n\n".join(comments)  # one page: each chart in the order the comments hold them
    expected = [
        len(re.search(r"x-axis \[(.*)\]", block).group(1).split('", "')) for block in every.split("```mermaid\n")[1:]
    ]
    with browser.Browser(width=960, height=900) as chromium:
        loaded = comment_page.open_page(chromium, every, tmp_path, mermaid)
        assert chromium.evaluate(loaded, "window.chartErrors") == []
        bars = chromium.evaluate(
            loaded,
            "[...document.querySelectorAll('.mermaid svg')].map(s => s.querySelectorAll('g.bar-plot-0 rect').length)",
        )
        assert not chromium.evaluate(loaded, "document.body.innerText.includes('Syntax error')")
        titles = chromium.evaluate(loaded, "[...document.querySelectorAll('.mermaid svg')].map(s => s.textContent)")
    assert bars == expected and len(bars) >= 20
    assert any("颜色在测得值处变化" in t for t in titles) and any("shade changes" in t for t in titles)


def test_every_resource_column_reads_base_to_head_threads_and_stack_included():
    out = comment("resource_fail")
    row = next(
        line for line in out.splitlines() if line.startswith("| `deepgemm_tile::gemm_bf16_kernel<128, 256, 64, false>`")
    )
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[4] == "128 → 256" and cells[8] == "0 → 0"  # threads per block and stack bytes, base → head
    assert "p50 head is p50 base × the paired ratio, so Δ p50 = head / base − 1" in out


def test_a_launch_declared_not_measured_is_named_first_in_the_headline_and_the_status():
    from bot.models.report import ResourceCheckReport

    report = cr.cuda_changed()
    k = report.kernels[0]
    site = (
        "kernels/deepgemm_tile/gemm_cuda.cu:406 kernel<<<…, Cfg::kThreads, Cfg::kSmemBytes + (k > 4096 ? 65536 : 0)>>>"
    )
    k.undecided.append(
        "resource: launch figures declared, not measured: kernels/deepgemm_tile/gemm_cuda.cu holds the launch: "
        f"{site} (…)"
    )
    k.resource_check = ResourceCheckReport(status="ok", launch_unmeasured=[site])
    state, description = acceptance_status(report)
    assert state == "success"
    assert description.startswith(
        "undecided, not blocking: deepgemm_tile (launch figures declared, not measured: "
        "kernels/deepgemm_tile/gemm_cuda.cu:406 "
    )
    assert len(description[: description.index(":406") + 4]) <= 140  # GitHub keeps 140 characters: the line stays
    headline = render_comment(report, unseen_files=[], pr=None).split("\n")[1]
    assert "undecided: launch figures declared, not measured: kernels/deepgemm_tile/gemm_cuda.cu:406 kernel" in headline


def test_agent_cases_are_listed_under_the_agents_name_and_only_the_one_base_passes_fails():
    text = comment("agent_cases")
    assert "## ❌ opgate: **fail** — `deepgemm_tile` fails a gate" in text
    assert "**Agent cases** proposed by `deepseek-v4` (5 proposed, 3 run, 2 refused)" in text
    assert "| `tail_15` | `m=47, n=16` | ❌ fail |" in text
    assert "| `tail_31` | `m=31, n=16` | ⚠️ base fails too |" in text and "base fails too (base is wrong on it)" in text
    assert "| `rows_1` | `m=1, n=8` | ✅ pass | 1.9e-05 ≤ 0.01 | +9.00% (+6.00%..+12.00%) | — |" in text  # not gated
    assert "- refused `huge`: shape.m = 5000 is outside \\[1, 256\\]" in text
    block = text[text.index("**Agent cases**") : text.index("### Agent review")]
    assert problems(block) == []  # the refused name is inert code: no image, no link, no broken table
    report = cr.agent_cases()
    [k] = [k for k in report.kernels if k.agent_cases]
    assert k.verdict == "fail" and [r for r in written_kernel(k).reasons if "agent case" in r] == [
        "correctness: agent case tail_15 (proposed by deepseek-v4) max_abs_err 1.5 > tolerance 1e-05 on out, first "
        "bad element out[46, 0]: got 0, reference 1.5"
    ]
