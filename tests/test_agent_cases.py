"""The agent's test matrix (bot/verdict/agent_cases.py): base's [agent_cases] admits or refuses each entry, and an
admitted case's run fails the change only where head is wrong and base is right."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from bot.config.manifest import KernelManifest, load_kernel
from bot.errors import InputError
from bot.models.agent_report import ProposedCase
from bot.models.evidence import AgentAdmission
from bot.models.finding import Phrase
from bot.models.judging import CaseRun, Check, Timing
from bot.models.report import CaseStatus, KernelReport, Violation
from bot.verdict import agent_cases
from bot.verdict.gate import case_verdict
from bot.verdict.written import written_agent_case, written_kernel
from bot.wording.messages import MESSAGES, phrase

ROW_SCALE = Path(__file__).parent / "fixtures" / "row_scale"


def manifest(**agent: object) -> KernelManifest:
    raw = tomllib.loads((ROW_SCALE / "kernel.toml").read_text())
    if agent:
        raw["agent_cases"] = {**raw["agent_cases"], **agent}
    return KernelManifest.model_validate(raw)


def entry(name: str = "tail_15", **fields: object) -> ProposedCase:
    return ProposedCase.model_validate({"name": name, "shape": {"m": 47, "n": 16}, **fields})


def refused(*entries: ProposedCase, rules: KernelManifest | None = None) -> list[tuple[str, str]]:
    admission = agent_cases.admit(list(entries), rules or manifest())
    return [(r.name, phrase(r.reason)) for r in admission.refused]


def test_an_entry_within_the_bounds_runs_as_a_case_of_the_manifests_device_dtype_and_limits():
    admission = agent_cases.admit([entry()], manifest())
    [case] = agent_cases.cases(admission)
    assert (case.name, case.device, case.dtype, case.shape, case.tolerance) == (
        "tail_15", "cpu", "float32", {"m": 47, "n": 16}, None,
    )  # fmt: skip
    assert admission.refused == [] and admission.note == ""
    assert case.limits(manifest().constraints).max_abs_err == 1e-5  # the manifest's tolerance, never the agent's


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"shape": {"m": 5000, "n": 16}}, "shape.m = 5000 is outside [1, 256]"),
        ({"shape": {"m": 0, "n": 16}}, "shape.m = 0 is outside [1, 256]"),
        ({"shape": {"m": 47, "n": 12}}, "shape.n = 12 is not a multiple of 8"),
        ({"shape": {"m": 47.5, "n": 16}}, "shape.m = 47.5 is not an integer"),
        ({"shape": {"m": True, "n": 16}}, "shape.m = True is not an integer"),
        ({"shape": {"m": 47}}, "shape.n is missing (every bounded key is given)"),
        ({"shape": {"m": 47, "n": 16, "k": 8}}, "shape.k has no bound in [agent_cases.shape] (bounded: m, n)"),
        ({"params": {"alpha": 2}}, "params.alpha has no bound in [agent_cases.params] (bounded: none)"),
        ({"tolerance": 1.0}, "unknown key 'tolerance' (an agent case has name, shape and params)"),
        ({"device": "cuda"}, "unknown key 'device' (an agent case has name, shape and params)"),
    ],
)
def test_an_entry_outside_the_bounds_is_refused_with_its_reason(fields, reason):
    assert refused(entry(**fields)) == [("tail_15", reason)]


def test_a_refusal_quotes_the_replys_text_in_one_short_line():
    [(name, reason)] = refused(ProposedCase.model_validate({"name": "x" * 500, "k" * 300: 1, "b": 2, "c": 3, "d": 4}))
    assert len(name) <= 64 and reason.endswith("… (an agent case has name, shape and params)") and len(reason) < 300


def test_a_name_in_use_and_entries_over_max_cases_are_refused():
    entries = [entry("rows_64"), entry("a"), entry("a"), entry("b"), entry("c"), entry("d"), entry("bad name!")]
    admission = agent_cases.admit(entries, manifest())
    assert [c.name for c in admission.cases] == ["a", "b", "c"]  # max_cases = 3
    assert [(r.name, phrase(r.reason)) for r in admission.refused] == [
        ("rows_64", "the name rows_64 is already a case of this kernel or of the matrix"),
        ("a", "the name a is already a case of this kernel or of the matrix"),
        ("d", "over max_cases = 3 of [agent_cases]"),
        ("bad name!", "the name must be an identifier: a letter or _, then at most 63 letters, digits or _"),
    ]


@pytest.mark.parametrize("name", ["..", ".", "../x", "a/b", "-rf", "9lives", "a.b", "", "x" * 65])
def test_an_agent_case_name_that_is_not_an_identifier_is_refused(name):
    """Judge integrity round four, 4: a case named `..` was admitted and ran; a name is an identifier."""
    [(shown, reason)] = refused(entry(name))
    assert reason == MESSAGES["agent.bad_name"][1] and shown.rstrip("…") == name[: len(shown.rstrip("…"))]


def test_without_the_table_or_a_base_manifest_no_agent_case_runs_and_the_report_says_why():
    raw = tomllib.loads((ROW_SCALE / "kernel.toml").read_text())
    del raw["agent_cases"]
    none = agent_cases.admit([entry()], KernelManifest.model_validate(raw))
    assert none.cases == [] and none.note == agent_cases.NO_TABLE
    new = agent_cases.admit([entry()], None)
    assert new.cases == [] and new.note == agent_cases.NEW_KERNEL
    assert agent_cases.admit([], manifest()).note == ""  # nothing proposed: nothing to say


@pytest.mark.parametrize(
    ("table", "error"),
    [
        ("[agent_cases.shape]\nm = [1, 256]\n", "agent_cases.shape: no bound for n"),
        ("[agent_cases.shape]\nm = [300, 1]\nn = [8, 8]\n", "range [300, 1]: lo is above hi"),
        ("[agent_cases.shape]\nm = [1, 2]\nn = { range = [9, 15], multiple_of = 8 }\n", "holds no multiple of 8"),
        ("[agent_cases.shape]\nm = [1, 2]\nn = [8, 8]\nk = [1, 2]\n", "k is no shape key of a cpu case"),
        ('[agent_cases]\ndevice = "cuda"\n[agent_cases.shape]\nm = [1, 2]\nn = [8, 8]\n', "no cuda case"),
        ("[agent_cases]\nmax_cases = -1\n", "max_cases"),
    ],
)
def test_a_bad_agent_cases_table_is_bad_input_naming_the_key(tmp_path, table, error):
    text = (ROW_SCALE / "kernel.toml").read_text()
    folder = tmp_path / "row_scale"
    folder.mkdir()
    (folder / "kernel.toml").write_text(text[: text.index("[agent_cases]")] + table)
    with pytest.raises(InputError, match="agent_cases") as exc:
        load_kernel(folder)
    assert error in str(exc.value)


def test_the_fixture_kernel_declares_its_bounds():
    bounds = load_kernel(ROW_SCALE).manifest.agent_cases
    assert bounds is not None and bounds.max_cases == 3 and bounds.shape["n"].multiple_of == 8


# -- what an admitted case's run decides ---------------------------------------------------------------------------

WRONG = Check(
    max_abs_err=1.5,
    failure=Violation(output="out", metric="max_abs_err", value=1.5, limit=1e-5, index=[46, 0], got=0.0, expected=1.5),
)
RIGHT = Check(max_abs_err=0.0)
SLOWER = {"head": Timing(label="head", samples_ms=[2.0] * 6), "base": Timing(label="base", samples_ms=[1.0] * 6)}


def judged(head: Check | None, base: Check | None, *, status=CaseStatus.ok, base_built=True, stop=None, **update):
    """The agent case judged from a run (`stop`: the review's own stop reason, identical_build for one binary)."""
    [case] = agent_cases.cases(agent_cases.admit([entry()], manifest()))
    checks = {k: v for k, v in (("head", head), ("base", base)) if v is not None}
    run = CaseRun(status=status, checks=checks, **update)
    report = case_verdict(case, manifest().constraints, run)
    report.stop_reason = stop or report.stop_reason
    return agent_cases.judged(case, report, base_built=base_built)


def test_head_wrong_where_base_is_right_fails_the_case_and_the_kernel():
    case = judged(WRONG.model_copy(update={"label": "head"}), RIGHT)
    assert case.verdict == "fail" and case.case.base_correct is True
    kernel = KernelReport(name="row_scale", domain="deepgemm", changed=True, verdict="pass")
    kernel.agent_cases = agent_cases.report("deepseek-v4", AgentAdmission(proposed=1), [case])
    agent_cases.fold(kernel)
    assert kernel.verdict == "fail"
    assert written_kernel(kernel).reasons == [
        "correctness: agent case tail_15 (proposed by deepseek-v4) max_abs_err 1.5 > tolerance 1e-05 on out, "
        "first bad element out[46, 0]: got 0, reference 1.5"
    ]


@pytest.mark.parametrize(
    ("base", "update", "why"),
    [
        (WRONG, {}, "base is wrong on it"),
        (None, {"stop": "identical_build"}, "the same build"),
        (None, {"base_built": False}, "base does not build"),
    ],
)
def test_head_wrong_where_base_fails_too_is_reported_and_fails_nothing(base, update, why):
    base_built = update.pop("base_built", True)
    case = judged(WRONG, base, base_built=base_built, **update)
    assert case.verdict == "base_fails"
    assert written_agent_case(case).reasons[-1] == f"base fails too ({why}): not failed for it"
    kernel = KernelReport(name="row_scale", domain="deepgemm", changed=True, verdict="undecided")
    kernel.agent_cases = agent_cases.report("deepseek-v4", AgentAdmission(proposed=1), [case])
    assert agent_cases.fold(kernel).verdict == "undecided" and written_kernel(kernel).reasons == []


def test_an_agent_cases_latency_is_reported_never_gated():
    case = judged(RIGHT, RIGHT, timings=SLOWER)
    assert case.case.verdict == "fail" and case.case.regression_pct == pytest.approx(100.0)  # the judge's view
    assert case.verdict == "pass" and written_agent_case(case).reasons == []  # latency shown, not a gate
    kernel = KernelReport(name="row_scale", domain="deepgemm", changed=True, verdict="pass")
    kernel.agent_cases = agent_cases.report("m", AgentAdmission(proposed=1), [case])
    assert agent_cases.fold(kernel).verdict == "pass"


def test_a_head_crash_after_base_checked_right_fails_and_a_reference_failure_is_not_judged():
    crashed = judged(None, RIGHT, status=CaseStatus.crashed, failed_label="head", detail=Phrase.as_written("SIGSEGV"))
    assert crashed.verdict == "fail"
    reference = judged(
        None, None, status=CaseStatus.crashed, failed_label="the reference", detail=Phrase.as_written("raised")
    )
    assert reference.verdict == "not_judged" and reference.case.base_correct is None
    base_crash = judged(None, None, status=CaseStatus.crashed, failed_label="base", detail=Phrase.as_written("SIGSEGV"))
    assert base_crash.verdict == "base_fails"


def test_why_no_agent_case_ran_stays_english_in_the_report_and_is_translated_in_the_comment():
    from bot.present.render import said
    from bot.text.i18n import english_runs, speaking

    with speaking("zh-CN"):
        shown = [said(agent_cases.NO_TABLE), said(agent_cases.NEW_KERNEL), said(agent_cases.NOT_BUILT)]
    assert shown[0] == "base 的 kernel.toml 未声明 [agent_cases]：不运行 agent 的测试矩阵"
    assert all(english_runs(s) == [] for s in shown) and said(agent_cases.NO_TABLE) == agent_cases.NO_TABLE
    assert said("any other text the report holds") == "any other text the report holds"
