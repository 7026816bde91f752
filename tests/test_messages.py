"""The message catalog: every message id the gates use is in it, each renders, and nothing a finding holds breaks it."""

from __future__ import annotations

import re
import string

import pytest

from bot.errors import InputError
from bot.models.finding import Finding, Gate, Outcome, Phrase
from bot.text.i18n import speaking
from bot.wording import spoken
from bot.wording.messages import ENGLISH, LABELS, MESSAGES, Wording, render
from tests.conftest import ROOT

_KEY = re.compile(r"""["']((?:run|measurement|correctness|stability|element|performance|plausibility|resources|build|"""
                  r"""coverage|static|tail)\.[a-z_]+)["']""")  # fmt: skip


def _placeholders(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def test_every_message_id_the_code_names_is_in_the_catalog():
    used = {m for path in (ROOT / "bot" / "verdict").rglob("*.py") for m in _KEY.findall(path.read_text())}
    used |= {
        f"correctness.{metric}" for metric in ("max_abs_err", "max_rel_err", "cos_diff")
    }  # f"correctness.{v.metric}"
    assert used, "the scan found no message id"
    assert sorted(used - set(MESSAGES)) == []


def test_every_message_has_a_known_label_and_plain_named_placeholders():
    for key, (lab, template) in MESSAGES.items():
        assert lab is None or lab in LABELS, key
        for name in _placeholders(template):
            assert name.isidentifier(), (key, name)  # {named} only: a msgid a translator can read


def test_a_case_finding_reads_with_its_gate_then_the_case_on_its_kernel():
    f = Finding(gate=Gate.performance, outcome=Outcome.fail, key="performance.regression", case="ragged",
                params={"delta": "+10.53%", "low": "+9.73%", "high": "+12.00%", "limit": "3"})  # fmt: skip
    assert render(f, case=False) == "performance: p50 +10.53% (95% CI +9.73%..+12.00%) > 3% limit"
    assert render(f) == "performance: ragged p50 +10.53% (95% CI +9.73%..+12.00%) > 3% limit"
    assert ENGLISH.label(f) == "performance" and ENGLISH.text(f) == "p50 +10.53% (95% CI +9.73%..+12.00%) > 3% limit"
    bare = Finding(gate=Gate.run, outcome=Outcome.error, key="run.no_result", case="ragged")
    assert render(bare) == "ragged: head produced no result" and ENGLISH.label(bare) is None


def test_phrases_and_tails_render_through_the_catalog_too():
    element = Phrase(key="element.value", params={"where": "out[1, 2]", "got": "0.1", "expected": "0.9"})
    f = Finding(gate=Gate.correctness, outcome=Outcome.fail, key="correctness.max_abs_err",
                params={"value": "0.5", "limit": "0.01", "output": "out"}, phrases={"element": [element]},
                tail=[Phrase(key="tail.probe", params={"probe": "edge"})])  # fmt: skip
    assert render(f, case=False) == (
        "correctness: max_abs_err 0.5 > tolerance 0.01 on out, first bad element out[1, 2]: got 0.1, reference 0.9; "
        "boundary probe edge"
    )


def test_an_unknown_id_or_a_missing_parameter_is_shown_never_raised():
    forged = Finding(gate=Gate.review, outcome=Outcome.note, key="{0.__class__} nope", params={"x": "y"})
    assert render(forged) == "{0.__class__} nope"
    missing = Finding(gate=Gate.resources, outcome=Outcome.fail, key="resources.registers", params={"function": "k"})
    assert render(missing) == "resource: k uses {registers} registers > limit {limit}"


def test_another_locale_renders_through_its_translator_and_an_unknown_one_is_refused():
    with pytest.raises(InputError, match="not one opgate speaks"), speaking("xx"):
        spoken.render(Finding(gate=Gate.run, outcome=Outcome.error, key="run.no_result"))
    table = {"head produced no result": "head 没有结果", "performance": "性能", "p50 {delta}": "p50 {delta}"}
    f = Finding(gate=Gate.run, outcome=Outcome.error, key="run.no_result", case="c")
    assert Wording(lambda msgid: table.get(msgid, msgid)).render(f) == "c: head 没有结果"
    with speaking("zh-CN"):
        assert spoken.render(f) == "c: head 没有产生结果" and render(f) == "c: head produced no result"
