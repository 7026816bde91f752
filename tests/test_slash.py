"""The slash-command table (bot/commands/slash.py) and its shared rules (bot/verdict/slash.py): for each command
its parse, its role rule and its reply; every command in the table is answered by a workflow."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.cli import COMMANDS
from bot.commands.slash import table
from bot.models.github import PullInfo, Role
from bot.tune.command import TuneDecision
from bot.verdict import slash
from bot.verdict.accept import Decision

ROOT = Path(__file__).resolve().parent.parent
HEAD = "a1" * 20


def base(level: str, name: str | None = None) -> Role:
    return Role(level=level, name=name or level)  # type: ignore[arg-type]


def test_the_table_holds_each_command_once_and_each_is_an_opgate_command() -> None:
    commands = table()
    assert set(commands) == {"/accept", "/tune", "/ok-to-test"}
    for name, command in commands.items():
        assert command.name == name and command.answered_by in COMMANDS


@pytest.mark.parametrize(
    ("body", "name", "read"),
    [
        ("/accept deepgemm_tile\nthanks", "/accept", "deepgemm_tile"),
        ("/tune deepgemm_tile --rounds 3", "/tune", "deepgemm_tile"),
        ("/ok-to-test\r\nplease", "/ok-to-test", "/ok-to-test"),
    ],
)
def test_each_command_is_read_from_the_first_line(body: str, name: str, read: str) -> None:
    command = table().get(slash.command_word(body))
    assert command is not None and command.name == name
    parsed = command.parse(body)
    assert parsed is not None
    assert (parsed if isinstance(parsed, str) else parsed.kernel) == read


@pytest.mark.parametrize("name", ["/accept", "/tune", "/ok-to-test"])
@pytest.mark.parametrize("body", ["> {name}", "LGTM\n{name}", "{name}x", "", "please {name}", "`{name}`"])
def test_no_command_but_on_the_first_line_alone(name: str, body: str) -> None:
    assert table()[name].parse(body.format(name=name)) is None


def test_ok_to_test_takes_no_arguments() -> None:
    assert table()["/ok-to-test"].parse("/ok-to-test now") is None
    assert slash.command_word("/ok-to-test now") in table()  # the command word, refused as not a command by its parse


@pytest.mark.parametrize("name", ["/accept", "/tune", "/ok-to-test"])
def test_every_command_needs_write_maintain_or_admin_by_the_base_role(name: str) -> None:
    command = table()[name]
    for level in ("write", "maintain", "admin"):
        assert command.refusal("bob", base(level)) is None
    assert command.refusal("carol", base("write", "kernel-maintainer")) is None  # a custom role built on write
    for level in ("read", "triage", "none"):
        assert command.refusal("rita", base(level)) == (
            f"@rita has the role `{level}` here; `{name}` needs write, maintain or admin"
        )
    refused = command.refusal("rita", base("read", "kernel-reader"))
    assert refused is not None and "`kernel-reader (read)`" in refused


def test_the_accept_and_tune_decisions_use_the_same_role_rule() -> None:
    """The sentence each decision gives is the table's refusal, word for word."""
    from bot.tune.command import decide as tune_decide
    from bot.tune.command import parse_command as tune_parse
    from bot.verdict.accept import decide as accept_decide
    from bot.verdict.accept import parse_command as accept_parse

    reader = base("read")
    accept_command = accept_parse("/accept")
    assert accept_command is not None
    from tests.test_accept import make_report, pull, pushers

    refused = accept_decide(
        accept_command,
        login="rita",
        role=reader,
        is_pull_request=True,
        pull=pull(),
        report=make_report(),
        pushers=pushers(),
    )
    assert not refused.granted and refused.reason == table()["/accept"].refusal("rita", reader)
    tune_command = tune_parse("/tune deepgemm_tile")
    assert tune_command is not None
    refused_tune = tune_decide(tune_command, login="rita", role=reader, kernels=["deepgemm_tile"], number=3)
    assert not refused_tune.granted and refused_tune.reason == table()["/tune"].refusal("rita", reader)


def test_ok_to_test_grants_a_writer_the_current_head_and_says_so() -> None:
    granted = slash.decide_ok_to_test(login="bob", role=base("write"), number=42, head_sha=HEAD)
    assert granted.granted and granted.inputs == {"pr": "42", "head_sha": HEAD}
    reply = table()["/ok-to-test"].reply(granted, "/ok-to-test")
    assert reply == (
        f"🚀 @bob trusted head `{HEAD[:10]}` for one review on the GPU runners. A new push needs a new `/ok-to-test`."
    )
    refused = slash.decide_ok_to_test(login="rita", role=base("read"), number=42, head_sha=HEAD)
    assert not refused.granted and refused.inputs == {}
    assert table()["/ok-to-test"].reply(refused, "/ok-to-test") == (
        "👎 `/ok-to-test` refused: it needs write, maintain or admin; @rita has `read`."
    )


def test_the_accept_and_tune_replies_carry_their_reason_and_marker() -> None:
    accept_reply = table()["/accept"].reply(
        Decision(granted=False, reason="pull request #42 is closed", login="bob", role="write"), "/accept"
    )
    assert "pull request #42 is closed" in accept_reply and "<!-- opgate:" in accept_reply
    tune_reply = table()["/tune"].reply(
        TuneDecision(granted=False, reason="no kernel `x` on the default branch", login="bob", role="write"),
        "/tune x",
    )
    assert "no kernel `x` on the default branch" in tune_reply and "<!-- opgate:tune-command -->" in tune_reply


@pytest.mark.parametrize(("name", "ok"), [("pr-review.yml", True), ("opgate.yaml", True), ("../x.yml", False),
                                          ("x.yml; rm -rf /", False), ("review", False)])  # fmt: skip
def test_the_dispatched_workflow_is_a_file_name(name: str, ok: bool) -> None:
    assert (slash.check_workflow(name) is None) is ok


def test_edits_and_bots_are_ignored_by_every_command() -> None:
    assert slash.ignore_reason("edited", "bob", False) == "comment edited, not created: only new comments are commands"
    assert slash.ignore_reason("created", "opgate[bot]", False) == "comment by the bot account opgate[bot]"
    assert slash.ignore_reason("created", "bob", True) is not None
    assert slash.ignore_reason("created", "bob", False) is None


def test_every_command_in_the_table_is_answered_by_opgate_in_a_workflow() -> None:
    runs = "\n".join(
        str(step.get("run", ""))
        for path in sorted((ROOT / ".github" / "workflows").glob("*.yml"))
        for job in (yaml.safe_load(path.read_text()).get("jobs") or {}).values()
        for step in job.get("steps", [])
    )
    for command in table().values():
        assert f'opgate {command.answered_by} --event "$GITHUB_EVENT_PATH"' in runs, command.name
    job = yaml.safe_load((ROOT / ".github" / "workflows" / "opgate-comment.yml").read_text())["jobs"]["ok-to-test"]
    assert not any("gh " in str(step.get("run", "")) for step in job["steps"])  # opgate decides, not the shell


def test_accept_and_tune_decide_with_one_shared_decision_whose_fields_come_first() -> None:
    """/accept's and /tune's decisions share one model (bot.verdict.slash.SlashDecision), each adding only its own
    fields after the shared ones (the order their JSON keeps)."""
    shared = list(slash.SlashDecision.model_fields)
    assert shared == ["granted", "reason", "login", "role"]
    for model in (Decision, TuneDecision):
        assert issubclass(model, slash.SlashDecision)
        assert list(model.model_fields)[: len(shared)] == shared
    assert list(TuneDecision.model_fields) == [*shared, "inputs"]


def test_a_dispatched_review_runs_only_the_trusted_head_of_an_open_ready_pull_request() -> None:
    def pull(**change: object) -> PullInfo:
        fields = dict(number=43, state="open", draft=False, merged=False, title="t", author="mallory", head_sha=HEAD,
                      base_sha="b" * 40, head_ref="f", base_ref="main", head_repo="mallory/kernels",
                      base_repo="o/r", commits=1)  # fmt: skip
        return PullInfo.model_validate(fields | change)

    runs = slash.decide_dispatched(pull(), HEAD)
    assert runs.run and not runs.moved_on
    assert runs.outputs == {"run": "true", "pr": "43", "head_sha": HEAD, "base_sha": "b" * 40}
    moved = slash.decide_dispatched(pull(head_sha="c" * 40), HEAD)
    assert (moved.run, moved.moved_on, moved.outputs) == (False, True, {"run": "false"})
    assert moved.reason == f"#43 moved on to {'c' * 40} after {HEAD} was trusted: comment /ok-to-test again"
    for change, why in (({"state": "closed"}, "#43 is closed"), ({"draft": True}, "#43 is a draft")):
        skipped = slash.decide_dispatched(pull(**change), HEAD)
        assert (skipped.run, skipped.moved_on, skipped.outputs) == (False, False, {"run": "false"})
        assert skipped.reason.startswith(why)
