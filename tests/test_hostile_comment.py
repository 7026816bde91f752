"""Every field of every comment template, filled with hostile text, renders inert on GitHub."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from bot.commands.bisect import Named, render_md
from bot.commands.history import render_issue
from bot.commands.summary import render_token_summary
from bot.mainline.bisect import BisectReport
from bot.mainline.drift import KernelDrift
from bot.models.report import Report
from bot.present.render import TEMPLATES, commit_url, render, render_accept_reply, render_comment
from bot.spend.pull_request import PrContext
from bot.spend.tokens import WeeklySummary
from bot.tune.command import TuneDecision
from bot.tune.result import TuneResult, render_tune
from bot.verdict.accept import Decision
from tests.hostile import HOSTILE_VARIANTS, hostile_model, html, problems

# A login comes from GitHub (the webhook's sender, the ledger's record of it): the templates mention it on
# purpose. Every other string is hostile.
LOGIN = "maint-bob"


def _comment(text: str, variant: int) -> str:
    report = hostile_model(Report, text, variant)
    pr = hostile_model(PrContext, text, variant)
    pr = pr.model_copy(
        update={k: [a.model_copy(update={"login": LOGIN}) for a in getattr(pr, k)] for k in ("accepted", "voided")}
    )
    return render_comment(report, unseen_files=[text, text], pr=pr)


def _accept_reply(text: str, variant: int) -> str:
    decision = hostile_model(Decision, text, variant).model_copy(update={"granted": variant == 0, "login": LOGIN})
    return render_accept_reply(decision, text)


def _summary(text: str, variant: int) -> str:
    summary = hostile_model(WeeklySummary, text, variant)
    return render_token_summary(summary.model_copy(update={"history": {text: [1, 2]}}))


def _bisections(text: str, variant: int) -> list[BisectReport]:
    """One hostile bisection per verdict (the model's literal gives only two per variant)."""
    b = hostile_model(BisectReport, text, variant)
    return [b.model_copy(update={"verdict": v}) for v in ("fail", "pass", "undecided", "error")]


def _drift_issue(text: str, variant: int) -> str:
    named = [Named(text, b) for b in _bisections(text, variant)] + [Named(text, None, text, text)]
    # a real commit URL: a live link only where opgate wrote a full SHA (hostile fields are not one)
    return render_issue(hostile_model(KernelDrift, text, variant), named, commit_url("https://github.com", "o/r"))


def _bisect(text: str, variant: int) -> str:
    return "\n".join(render_md(b) for b in _bisections(text, variant))


def _tune(text: str, variant: int) -> str:
    return render_tune(hostile_model(TuneResult, text, variant), pr_body=variant == 1)


def _tune_reply(text: str, variant: int) -> str:
    """Both replies: the result of a run (variant 0) and the answer to a `/tune` command (variant 1)."""
    if variant == 0:
        return render(
            "tune_reply.md.j2", marker="<!-- opgate:tune-reply -->", r=hostile_model(TuneResult, text), d=None, line=""
        )
    decision = hostile_model(TuneDecision, text).model_copy(update={"granted": False})
    return render("tune_reply.md.j2", marker="<!-- opgate:tune-reply -->", r=None, d=decision, line=text)


RENDER: dict[str, Callable[[str, int], str]] = {
    "comment.md.j2": _comment,
    "accept_reply.md.j2": _accept_reply,
    "summary.md.j2": _summary,
    "drift_issue.md.j2": _drift_issue,
    "bisect.md.j2": _bisect,
    "tune.md.j2": _tune,
    "tune_reply.md.j2": _tune_reply,
}


def test_every_comment_template_is_covered_here():
    assert sorted(p.name for p in TEMPLATES.glob("*.j2")) == sorted(RENDER)


@pytest.mark.parametrize("template", sorted(RENDER))
@pytest.mark.parametrize("variant", [0, 1])
@pytest.mark.parametrize("text", HOSTILE_VARIANTS, ids=range(len(HOSTILE_VARIANTS)))
def test_hostile_text_in_every_field_renders_inert(template: str, variant: int, text: str):
    out = RENDER[template](text, variant)
    assert problems(out, mentions=(LOGIN,)) == []
    word = max(re.findall(r"[A-Za-z0-9]+", text), key=len)
    assert out.count(word) >= 2, f"the hostile text is not in the {template} at all: {out}"


def test_a_kernel_folder_named_with_html_is_shown_as_its_name():
    """The finding: k.name and a.model were rendered unfiltered into the verdict table and the agent section."""
    report = hostile_model(Report, "x").model_copy(deep=True)
    report.kernels[0].name = "k`<img src=https://evil.example/p.gif>`"  # a backtick ends the code span
    report.agents[0].model = "m` <b>m</b> www.evil.example `"
    out = render_comment(report)
    assert problems(out) == []
    rendered = html(out)
    assert "<td><code>k'&lt;img src=https://evil.example/p.gif&gt;'</code></td>" in rendered
    assert "model <code>m' &lt;b&gt;m&lt;/b&gt; www.evil.example '</code>" in rendered
