"""The comment in the team's language: the catalogs are whole and current, every example report renders in English
and Simplified Chinese on GitHub's renderer, the zh-CN comment holds no English sentence, the locale is chosen in
one place, and the CI summary answers in it."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from typing import Any

import pytest
from babel.messages.pofile import read_po

from bot.agent.ci_summary import messages
from bot.agent.ci_summary_reply import parse_ci_summary
from bot.agent.review import AgentOutputError
from bot.cli import main
from bot.config.repo import RepoConfig
from bot.config.settings import load_settings
from bot.errors import InputError
from bot.models.finding import Finding, Gate, Outcome, Phrase
from bot.models.report import Report
from bot.present.digest import short_names, shorten
from bot.present.render import render_accept_reply, render_comment
from bot.text.i18n import LOCALES, catalog_path, english_runs, is_chinese, speaking
from bot.text.safe import untrusted
from bot.wording import messages as catalog
from bot.wording import spoken
from tests import comment_reports as cr
from tests.comment_checks import structure_problems
from tests.conftest import ROOT
from tests.hostile import html, problems, table_breaks

ZH = "zh-CN"


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("opgate_catalog", ROOT / "scripts" / "catalog.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _zh() -> Any:
    with catalog_path(ZH).open("rb") as po:
        return read_po(po, locale="zh_CN")


# -- the catalogs ------------------------------------------------------------------------------------------------


def test_the_catalogs_hold_exactly_the_messages_the_templates_and_the_code_use():
    """A message added, changed or removed in templates/ or bot/ without `scripts/catalog.py` fails here."""
    script = _script()
    assert script.main(["--check"]) == 0, "run: .venv/bin/python scripts/catalog.py, then translate what it added"
    used = {m.id for m in script.extracted() if m.id}
    assert used == {m.id for m in _zh() if m.id}
    assert {"correctness", "performance", "resource", "stability"} <= used  # the checklist's gates


def test_every_message_is_translated_with_the_same_parameters():
    def params(text: str) -> set[str]:
        return set(re.findall(r"%\((\w+)\)s", text)) | set(re.findall(r"(?<!\{)\{(\w+)\}", text))

    wrong = []
    for m in _zh():
        if not m.id:
            continue
        ids = [m.id] if isinstance(m.id, str) else list(m.id)
        strings = [m.string] if isinstance(m.string, str) else list(m.string)
        if not all(strings) or "fuzzy" in m.flags:
            wrong.append(f"untranslated: {ids[0]!r}")
        elif any(params(s) - {"num"} != params(ids[0]) - {"num"} for s in strings):
            wrong.append(f"parameters differ: {ids[0]!r} -> {strings!r}")
    assert wrong == []


def test_the_checklist_names_its_gates_in_chinese():
    with speaking(ZH):
        labels = {key: spoken.label(Finding(gate=Gate.performance, outcome=Outcome.fail, key=key))
                  for key in ("performance.regression", "correctness.max_abs_err_total", "resources.spill",
                              "stability.nan_inf")}  # fmt: skip
    assert labels == {
        "performance.regression": "性能",
        "correctness.max_abs_err_total": "正确性",
        "resources.spill": "资源",
        "stability.nan_inf": "稳定性",
    }


def test_every_finding_message_reads_as_chinese_with_its_numbers_and_names_as_they_are():
    """Each message of bot/wording/messages.py, its parameters filled with names and numbers: no English sentence,
    and every parameter's value appears unchanged."""
    english = []
    for key, (_label, text) in catalog.MESSAGES.items():
        if text == "{text}":
            continue  # a line made elsewhere, shown as written
        names = re.findall(r"\{(\w+)\}", text)
        params = {name: f"v_{i}_{name}" for i, name in enumerate(names)}
        finding = Finding(gate=Gate.performance, outcome=Outcome.fail, key=key, params=params, case="square_512")
        with speaking(ZH):
            line = spoken.render(finding)
        assert all(v in line for v in params.values()), (key, line)
        if english_runs(line):
            english.append(f"{key}: {line}")
    spill = {"function": "k", "bytes": 16, "stores": 8, "loads": 8}
    arch = [Phrase(key="tail.arch", params={"arch": "sm_100a"})]
    tail = Finding(gate=Gate.resources, outcome=Outcome.fail, key="resources.spill", tail=arch, params=spill)
    with speaking(ZH):
        assert spoken.render(tail) == "资源: k 寄存器溢出 16 字节（存 8 B，取 8 B）（sm_100a）"
    assert english == []


# -- every example report, in both locales ------------------------------------------------------------------------


# Text a report holds that opgate did not write, shown verbatim in any locale: what an agent wrote (its risk notes,
# commands, patch, the names and figures of its proposals), a compiler's or worker's output (logs, a compile error's
# message), an exception's message (a finding's parameter the catalog names verbatim), a person's reason.
FOREIGN = {
    "agents": {"risk_notes", "local_commands", "candidate_patch", "note"},  # the agent's words (inline notes too)
    "agent": {"risk_notes", "local_commands", "candidate_patch", "note"},
    "ci_summary": {"summary", "text", "look_next", "cannot_tell", "contradictions"},
    "build": {"log_tail"}, "base_build": {"log_tail"}, "cases": {"log_tail"},  # compilers' and workers' output
    "resource_check": {"log_tail", "base_log_tail"}, "arch_checks": {"log_tail", "base_log_tail"},
    "errors": {"message"}, "base_errors": {"message"},  # a compile error's message as the compiler wrote it
    "probes": {"error"},  # an exception's message
    "agent_cases": {"name"}, "refused": {"name"}, "expectations": {"metric", "shown"},  # the agent's proposals
}  # fmt: skip


def _data_texts(report: Report) -> set[str]:
    """Text the report holds that opgate did not write (FOREIGN's fields, a finding's or phrase's verbatim parameters
    — bot/wording/messages.py VERBATIM —, the review's error), shown as written in whatever language it was written.
    Every sentence opgate composes — a finding's message and its phrases, a skip, crash or refusal reason, an
    expectation's note, the occupancy arithmetic — is the catalog's, in both locales."""
    found: set[str] = set()

    def walk(value: Any, path: tuple[str, ...]) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, (*path, k))
        elif isinstance(value, list):
            for v in value:
                walk(v, path)
        elif isinstance(value, str) and any(path[-1] in FOREIGN.get(owner, ()) for owner in path[:-1]):
            found.add(value)
        elif isinstance(value, str) and path[-2:-1] == ("params",) and path[-1] in catalog.VERBATIM:
            found.add(value)  # a phrase's verbatim parameter outside a finding (bwrap's refusal, a data sheet's line)

    walk(report.model_dump(mode="json"), ())
    if report.error:
        found.add(report.error)
    findings = [f for k in report.kernels for f in (*k.findings, *(f for c in k.cases for f in c.findings))]
    found |= {str(p.params[name]) for p in _phrases(findings) for name in catalog.VERBATIM if name in p.params}
    functions = sorted({r.function for k in report.kernels for b in (k.build, k.base_build) if b for r in b.resources})
    short = short_names(functions)
    return found | {shorten(text, short) for text in found}


def _phrases(findings: list[Finding]) -> list[Finding | Phrase]:
    """Every finding and every phrase inside one (a phrase may hold phrases)."""
    out: list[Finding | Phrase] = []
    todo: list[Finding | Phrase] = list(findings)
    while todo:
        item = todo.pop()
        out.append(item)
        todo.extend(p for ps in item.phrases.values() for p in ps)
        if isinstance(item, Finding):
            todo.extend(item.tail)
    return out


def _without(text: str, data: set[str]) -> str:
    for value in sorted(data, key=len, reverse=True):
        for shown in (value, untrusted(value), *value.split("; "), *(untrusted(p) for p in value.split("; "))):
            if len(shown.split()) >= 3:
                text = text.replace(shown, " | ")
    return text


@pytest.mark.parametrize("name", sorted(cr.REPORTS))
def test_every_report_renders_cleanly_in_both_locales_and_the_chinese_one_has_no_english_sentence(name: str):
    report = cr.REPORTS[name]()
    pr = cr.pr_for(report)
    with speaking("en"):
        english = render_comment(report, pr=pr)
    assert english == render_comment(report, pr=pr)  # English unless the settings say otherwise
    with speaking(ZH):
        chinese = render_comment(report, pr=pr)
        assert structure_problems(chinese, report) == []  # the digest's lines, in Chinese, each shown once
    assert chinese != english
    for out in (english, chinese):
        assert problems(out, mentions=("maint-bob",)) == [] and table_breaks(out) == []
        assert "<table>" in html(out) or not report.kernels  # GitHub's renderer (cmark-gfm) made its tables
    names = frozenset({k.name for k in report.kernels} | {c.name for k in report.kernels for c in k.cases})
    text = _without(re.sub(r"```.*?```", " | ", chinese, flags=re.DOTALL), _data_texts(report))
    assert english_runs(re.sub(r"<[^>]+>", " | ", text), names) == []


def test_the_chinese_comment_keeps_numbers_case_names_and_code_identical():
    report = cr.fail_latency()
    with speaking("en"):
        english = render_comment(report)
    with speaking(ZH):
        chinese = render_comment(report)

    def facts(text: str) -> list[str]:
        return re.findall(r"`[^`\n]+`|[+-]?\d+\.\d+%?", re.sub(r"```.*?```", "", text, flags=re.DOTALL))

    assert facts(chinese) == facts(english)
    assert "- ❌ **性能** `ragged_200x328x264` p50 +10.53%（95% CI +9.73%..+12.00%）&gt; 3% 限值" in chinese
    assert "- ❌ **performance** `ragged_200x328x264` p50 +10.53% (95% CI +9.73%..+12.00%) &gt; 3% limit" in english
    assert "## ❌ opgate: **未通过** — `deepgemm_tile` 未通过门禁" in chinese


def test_the_accept_reply_speaks_the_locale():
    decision = _refused()
    english = render_accept_reply(decision, "/accept")
    with speaking(ZH):
        chinese = render_accept_reply(decision, "/accept")
    assert "refused" in english and "被拒绝" in chinese and english_runs(_without(chinese, {decision.reason})) == []


def _refused() -> Any:
    from bot.verdict.accept import Decision

    return Decision(granted=False, reason="only a collaborator with write access may /accept", login="eve", role="read")


# -- choosing the locale -------------------------------------------------------------------------------------------


def test_the_locale_comes_from_the_configuration_and_the_variable_overrides_it():
    assert LOCALES == ("en", "zh-CN")
    assert load_settings({}).locale == "en"
    assert load_settings({}, RepoConfig(locale="zh-CN")).locale == "zh-CN"
    assert load_settings({"OPGATE_LOCALE": "en"}, RepoConfig(locale="zh-CN")).locale == "en"
    with pytest.raises(ValueError, match="'fr' is not a locale opgate speaks: choose one of en, zh-CN"):
        RepoConfig(locale="fr")
    with pytest.raises(InputError, match="OPGATE_LOCALE='de'"):
        load_settings({"OPGATE_LOCALE": "de"})


def test_an_unknown_locale_is_a_clear_error_and_a_non_zero_exit(tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text('[tool.opgate]\nlocale = "fr"\n')
    monkeypatch.chdir(tmp_path)
    assert main(["summary", "--week", "2026-W48"]) == 2
    err = capsys.readouterr().err
    assert "locale" in err and "'fr' is not a locale opgate speaks" in err and "en, zh-CN" in err


def test_the_locale_is_set_once_at_the_edge_read_in_one_place_and_taken_by_no_renderer():
    """ARCHITECTURE.md, "The locale travels one way": bot/cli.py alone enters `speaking`, `i18n.catalog` alone reads
    the ContextVar, and no function of bot/present/ or bot/wording/ takes a locale."""
    entering, reading, taking = [], [], []
    for path in sorted((ROOT / "bot").rglob("*.py")):
        where = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute):
                name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
                entering += [where] if name == "speaking" else []
            if isinstance(node, ast.Attribute) and node.attr == "get" and getattr(node.value, "id", "") == "_speaking":
                reading.append(where)
            if isinstance(node, ast.FunctionDef) and where.startswith(("bot/present/", "bot/wording/")):
                params = [a.arg for a in (*node.args.args, *node.args.kwonlyargs)]
                taking += [f"{where}:{node.name}"] if "locale" in params else []
    assert entering == ["bot/cli.py"] and reading == ["bot/text/i18n.py"] and taking == []


# -- the CI summary answers in the locale --------------------------------------------------------------------------


def _facts() -> Any:
    from bot.models.ci_summary import CiSummaryFacts, KernelFacts

    return CiSummaryFacts(
        base_sha="9f04", head_sha="1339", verdict="fail",
        kernels=[KernelFacts(name="deepgemm_tile", domain="deepgemm", verdict="fail", passed=["square_512"])],
    )  # fmt: skip


def _reply(summary: str, cause: str) -> str:
    cause_item = {"kernel": "deepgemm_tile", "cases": ["square_512"], "text": cause}
    return json.dumps({"summary": summary, "verdicts": {"deepgemm_tile": "fail"}, "likely_cause": [cause_item]})


def test_the_ci_summary_is_asked_for_chinese_and_an_english_reply_is_refused():
    from bot.config.task import load_task

    task = load_task(ROOT / "ci_summary_task.json")
    system = messages(task, _facts(), [], ZH)[0]["content"]
    assert (
        "Simplified Chinese (简体中文)" in system
        and "Simplified Chinese" not in messages(task, _facts(), [])[0]["content"]
    )
    chinese = _reply("`deepgemm_tile` 在 square_512 上变慢 10.53%，超过 3% 限值。", "tile_n 256 使寄存器溢出。")
    assert parse_ci_summary(chinese, _facts(), ZH).summary.startswith("`deepgemm_tile`")
    english = _reply("The kernel deepgemm_tile got slower on square_512 by 10.53%.", "tile_n 256 使寄存器溢出。")
    assert parse_ci_summary(english, _facts()).summary.startswith("The kernel")  # English: as before
    with pytest.raises(AgentOutputError, match=r"reply field summary: not written in Simplified Chinese .*got slower"):
        parse_ci_summary(english, _facts(), ZH)
    mixed = _reply("`deepgemm_tile` 变慢了。", "the larger tile spills registers on every case")
    with pytest.raises(AgentOutputError, match=r"likely_cause\.0\.text"):
        parse_ci_summary(mixed, _facts(), ZH)


def test_is_chinese_allows_names_numbers_units_and_code_only():
    assert is_chinese("`square_512` 的 p50 +10.53%，max_abs_err 1.9e-05 ≤ 0.01，GPU SM 1980 MHz")
    assert not is_chinese("p50 is slower than base on every case")
    assert not is_chinese("square_512 10.53% 3 ms")  # no Chinese at all
    assert english_runs("needs a CUDA GPU; this machine has none") == ["this machine has none"]


def test_the_weekly_token_summary_is_written_in_the_locale_the_environment_names(opgate, tmp_path):
    """The real CLI: OPGATE_LOCALE (what the reusable workflows' `locale` input sets) over the configuration."""
    from tests.test_summary import WEEK, seed

    seed(tmp_path / "ledger.sqlite")
    run = opgate("summary", "--out-dir", str(tmp_path / "reports"), env={"OPGATE_LOCALE": ZH})
    assert run.code == 0, run.stderr
    text = (tmp_path / "reports" / f"summary-{WEEK}.md").read_text()
    assert f"## opgate token 汇总 — {WEEK}" in text
    assert "| 任务 | 请求数 | 平均输入 | 平均输出 | 合计 | 预算 | 已用 % | 异常 | 本地动作 |" in text
    assert "| DeepGEMM | 1 | 8,000 | 1,000 | 9,000 | 500,000 | 1.8% |" in text  # numbers as in English
    # The anomaly and local-action cells are bot/spend's own text, still English (not yet in the catalog).
    spend_cells = {cell for line in text.splitlines() if line.startswith("| ") for cell in line.split(" | ")[7:9]}
    assert english_runs(_without(text, spend_cells)) == []


def test_a_reply_cut_off_is_worded_by_the_catalog_not_passed_on_as_an_error() -> None:
    """bot/agent/exchange.answered's own words about a reply cut off at max_tokens (ReplyCut.why) reach the agent's
    reason as phrases of the catalog, not as a verbatim `error`: the same English, and no English sentence in zh-CN."""
    from bot.agent import run

    cut = cr.cut_twice()
    assert cut.why is not None
    why = run.rejected(str(cut), repaired=False, why=cut.why)
    assert "error" not in why.params
    assert catalog.phrase(why) == f"agent reply rejected: {cut}"
    with speaking(ZH):
        zh = spoken.phrase(why)
    assert is_chinese(zh) and "8192" in zh and "OPGATE_AGENT_MAX_TOKENS" in zh
    assert not english_runs(zh.replace("OPGATE_AGENT_MAX_TOKENS", "").replace('finish_reason "length"', ""))


def test_a_reply_without_text_and_its_repair_cut_off_are_worded_by_the_catalog(tmp_path: Any) -> None:
    """bot/agent/exchange.with_repair's own words (a reply with tool calls and no text; the repair reply cut off)
    ride on the error's `why` as phrases of the catalog: the same English, no English sentence in zh-CN."""
    from bot.agent import run
    from bot.agent.client import ChatResult
    from bot.agent.exchange import Reader, ReplyCut, with_repair

    class Asker:
        def __init__(self) -> None:
            self.answered: list[ChatResult] = []
            self.calls = 0

        def chat(self, messages: list[dict[str, str]], max_tokens: int | None = None) -> ChatResult:
            self.calls += 1
            first = self.calls == 1
            return ChatResult(
                request_id="r", model="m", content="" if first else "{", prompt_tokens=1, completion_tokens=1,
                total_tokens=2, usage_reported=True, latency_ms=1.0, status_code=200,
                finish_reason="tool_calls" if first else "length", tool_calls=["run_kernel"] if first else [],
                max_tokens=max_tokens or 4096,
            )  # fmt: skip

        def record_cached(self, model: str) -> None: ...
        def secrets(self) -> list[str]:
            return []

    reader: Reader[str] = Reader(parse=str, repair=lambda e: e, what="reply")
    with pytest.raises(ReplyCut) as raised:
        with_repair(Asker(), [], reader, tmp_path / "reply")
    cut = raised.value
    assert cut.why is not None
    why = run.rejected(str(cut), repaired=False, why=cut.why)
    assert catalog.phrase(why) == f"agent reply rejected: {cut}"
    with speaking(ZH):
        zh = spoken.phrase(why)
    assert is_chinese(zh) and "run_kernel" in zh and "4096" in zh
    assert "holds no text" not in zh and "repair reply" not in zh and "not asked again" not in zh
    assert not english_runs(zh.replace('finish_reason "length"', ""))


def test_the_ci_summary_s_reply_cut_off_is_worded_by_the_catalog() -> None:
    """The CI summary's agent words a reply cut off (bot/agent/exchange's ReplyCut.why) through the catalog too."""
    from bot.agent import ci_summary

    cut = cr.cut_twice()
    why = ci_summary.rejected(str(cut), repaired=False, why=cut.why)
    assert catalog.phrase(why) == f"reply rejected: {cut}"
    with speaking(ZH):
        zh = spoken.phrase(why)
    assert is_chinese(zh) and "8192" in zh and "cut off" not in zh
    assert not english_runs(zh.replace("OPGATE_AGENT_MAX_TOKENS", "").replace('finish_reason "length"', ""))
