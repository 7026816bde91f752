"""A tuning run's result (bot/tune/result.py): what it counts, the pull request's title, tune.json read back, and
tune.md as a comment or as the pull request's body."""

from __future__ import annotations

import json

from bot.tune.model import RoundEvent
from bot.tune.result import TUNE_MARKER, TuneResult, render_tune, title
from tests.test_tune_github import outcome

BASE_TEXT = json.dumps({"tile_m": 128, "tile_n": 128, "tile_k": 64}) + "\n"


def result(**update: object) -> TuneResult:
    return outcome("b" * 40, BASE_TEXT).model_copy(update=update)


def test_the_counts_are_per_outcome_and_leave_out_the_re_verification():
    events = [
        RoundEvent(seq=1, round=1, source="agent", outcome="judged"),
        RoundEvent(seq=2, round=2, source="agent", outcome="judged"),
        RoundEvent(seq=3, round=2, source="agent", outcome="invalid"),
        RoundEvent(seq=4, round=3, source="verify", outcome="judged"),
    ]
    assert result(events=events).counts() == {"judged": 2, "invalid": 1}
    assert result(events=[]).counts() == {}


def test_the_title_names_the_kernel_the_config_and_the_re_verified_speedup_and_flags_an_implausible_one():
    r = result()
    assert r.proposal is not None
    assert title(r) == f"opgate tune: deepgemm_tile {r.proposal.label} (x{r.proposal.verified_speedup:.3f} re-verified)"
    flagged = r.model_copy(update={"proposal": r.proposal.model_copy(update={"flags": ["x3.2 on square_512"]})})
    assert title(flagged).endswith("re-verified, implausible speedup — verify)")


def test_tune_json_reads_back_as_the_same_result_under_its_schema():
    r = result()
    data = json.loads(r.to_json())
    assert data["schema"] == "opgate.tune/1" and "schema_" not in data
    assert TuneResult.model_validate(data) == r


def test_the_pull_requests_body_carries_the_marker_and_the_comment_does_not():
    r = result()
    body, comment = render_tune(r, pr_body=True), render_tune(r)
    assert body.startswith(TUNE_MARKER) and TUNE_MARKER not in comment
    assert "The normal review runs on this pull request." in body and "The normal review runs" not in comment
    assert f"configs seen {r.seen} of {r.space_size}" in comment and "candidates judged 1" in comment
