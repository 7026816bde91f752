"""`/accept`: the pure parser and decision, then `opgate accept` end to end against the local GitHub server."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.ledger import open_ledger
from bot.models.agent_report import AgentReport
from bot.models.github import CommitPeople, PullInfo, Role
from bot.models.ledger import AcceptanceRow
from bot.models.report import KernelReport, Machine, Report
from bot.present.render import render_accept_reply
from bot.verdict.accept import (
    AcceptCommand,
    Pushers,
    accepted_status,
    decide,
    gates_overridden,
    ignore_reason,
    parse_command,
    pushers_of,
)
from tests.github_server import FakeGitHub, load_fixture

REPO = "octo-org/kernels"
TOKEN = "ghs_acceptTestToken0123456789abcd"
HEAD, BASE, OLD = "a1" * 20, "b2" * 20, "c3" * 20
PR = 42


def make_report(head: str = HEAD, verdicts: dict[str, str] | None = None, pr: int | None = PR) -> Report:
    """A stored review: kernel name -> verdict (changed); an unchanged `flashmla_decode` is always there."""
    verdicts = {"deepgemm_tile": "pass"} if verdicts is None else verdicts
    kernels = [
        KernelReport(
            name=name,
            domain="deepgemm",
            changed=True,
            verdict=verdict,  # type: ignore[arg-type]
            reasons=[] if verdict == "pass" else ["latency p50 +7.1% (CI +6.2%..+8.0%) over the 3% limit"],
        )
        for name, verdict in verdicts.items()
    ]
    kernels.append(KernelReport(name="flashmla_decode", domain="flashmla", changed=False, verdict="skipped"))
    worst = "error" if "error" in verdicts.values() else "fail" if "fail" in verdicts.values() else "pass"
    return Report(
        base_sha=BASE,
        head_sha=head,
        pr=pr,
        verdict=worst,  # type: ignore[arg-type]
        kernels=kernels,
        agent=AgentReport(status="offline"),
        environment=Machine(device="cpu", python="3.11"),
        created_at="2024-05-01T12:00:00+00:00",
        opgate_version="0.1.0",
    )


def pull(state: str = "open", merged: bool = False, head: str = HEAD, commits: int = 1) -> PullInfo:
    return PullInfo(
        number=PR,
        state=state,
        draft=False,
        merged=merged,
        title="t",
        author="alice-dev",
        head_sha=head,
        base_sha=BASE,
        head_ref="feature",
        base_ref="main",
        head_repo=REPO,
        base_repo=REPO,
        commits=commits,
    )


def commit(sha: str = HEAD, author: str | None = "alice-dev", committer: str | None = "") -> CommitPeople:
    """A listed commit; the committer defaults to its author."""
    return CommitPeople(sha=sha, author=author, committer=author if committer == "" else committer)


def pushers(*commits: CommitPeople, of: PullInfo | None = None) -> Pushers:
    """Who pushed to the pull request (`pull()` by default): its commits, default one by its author at HEAD."""
    return pushers_of(of or pull(), list(commits) or [commit()])


# ---------------------------------------------------------------------------- parsing (pure)


@pytest.mark.parametrize(
    ("body", "kernel", "override", "reason"),
    [
        ("/accept", None, False, ""),
        ("/accept\nthe numbers look right", None, False, ""),
        ("  /accept deepgemm_tile  \r\nthanks", "deepgemm_tile", False, ""),
        (
            '/accept --override "CI box was noisy; re-measured by hand"',
            None,
            True,
            "CI box was noisy; re-measured by hand",
        ),
        (
            "/accept deepgemm_tile --override 'known +4% on small shapes'",
            "deepgemm_tile",
            True,
            "known +4% on small shapes",
        ),
        ('/accept --override="flaky timer"', None, True, "flaky timer"),
    ],
)
def test_accept_commands_are_read_from_the_first_line(body, kernel, override, reason) -> None:
    command = parse_command(body)
    assert command is not None and command.error is None
    assert (command.kernel, command.override, command.reason) == (kernel, override, reason)


@pytest.mark.parametrize(
    "body",
    ["/acceptx", "> /accept", "LGTM\n/accept", "", "please /accept", "`/accept`", "/ok-to-test", "/Accept"],
)
def test_other_comments_are_not_commands(body: str) -> None:
    assert parse_command(body) is None


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("/accept --override", "needs a reason"),
        ('/accept --override ""', "needs a reason"),
        ("/accept a b", "more than one kernel"),
        ("/accept --force", "unknown option --force"),
        ('/accept --override "unclosed', "cannot read the command"),
        ('/accept --override "a" --override "b"', "given twice"),
    ],
)
def test_a_malformed_accept_is_an_error_to_answer(body: str, error: str) -> None:
    command = parse_command(body)
    assert command is not None and command.error is not None and error in command.error


def test_edited_comments_and_bots_are_ignored() -> None:
    assert ignore_reason("created", "maint-bob", False) is None
    assert "edited" in (ignore_reason("edited", "maint-bob", False) or "")
    assert ignore_reason("created", "dependabot[bot]", False) is not None
    assert ignore_reason("created", "some-app", True) is not None


# ---------------------------------------------------------------------------- decisions (pure)


def base(level: str, name: str | None = None) -> Role:
    """A role as GitHub's permission endpoint gives it: a base role, or a custom role `name` built on one."""
    return Role(level=level, name=name or level)  # type: ignore[arg-type]


def _decide(command: str, role: str | Role = "write", report: Report | None = None, **kw) -> object:
    parsed = parse_command(command)
    assert parsed is not None
    return decide(
        parsed,
        login=kw.get("login", "maint-bob"),
        role=base(role) if isinstance(role, str) else role,
        is_pull_request=kw.get("is_pull_request", True),
        pull=kw.get("pull", pull()),
        report=report,
        pushers=kw.get("pushers", pushers()),
        allow_self_accept=kw.get("allow_self_accept", False),
    )


def test_a_writer_accepts_a_passing_report_for_the_current_head() -> None:
    d = _decide("/accept", report=make_report())
    assert d.granted and d.head_sha == HEAD and d.kernels == ["deepgemm_tile"] and not d.override


@pytest.mark.parametrize(
    ("command", "role", "report", "kw", "why"),
    [
        ("/accept", "read", make_report(), {}, "has the role `read`"),
        ("/accept", "triage", make_report(), {}, "needs write, maintain or admin"),
        ("/accept", "write", None, {}, "no opgate report for the head `a1a1a1a1a1`"),
        ("/accept", "write", make_report(verdicts={"deepgemm_tile": "fail"}), {}, "gates did not pass"),
        ("/accept", "write", make_report(verdicts={"deepgemm_tile": "error"}), {}, "gates did not pass"),
        ('/accept --override "noise"', "write", make_report(verdicts={"deepgemm_tile": "fail"}), {}, "maintain"),
        ("/accept", "admin", make_report(), {"pull": pull(state="closed")}, "is closed"),
        ("/accept", "admin", make_report(), {"pull": pull(state="closed", merged=True)}, "is merged"),
        ("/accept", "admin", None, {"is_pull_request": False, "pull": None}, "not a pull request"),
        ("/accept nosuch", "write", make_report(), {}, "no kernel `nosuch`"),
        ("/accept flashmla_decode", "write", make_report(), {}, "is not changed"),
        ("/accept", "write", make_report(verdicts={}), {}, "changes no kernel"),
    ],
)
def test_refusals_say_why(command, role, report, kw, why) -> None:
    d = _decide(command, role=role, report=report, **kw)
    assert not d.granted and why in d.reason


def test_a_maintainer_overrides_failed_gates_and_the_reason_is_kept() -> None:
    d = _decide(
        '/accept --override "runner was thermally throttled"',
        role="maintain",
        report=make_report(verdicts={"deepgemm_tile": "fail", "other": "pass"}),
    )
    assert d.granted and d.override and d.overridden == ["deepgemm_tile"]
    assert d.override_reason == "runner was thermally throttled" and d.kernels == ["deepgemm_tile", "other"]


def test_one_kernel_can_be_accepted_while_another_fails() -> None:
    report = make_report(verdicts={"deepgemm_tile": "pass", "other": "fail"})
    d = _decide("/accept deepgemm_tile", report=report)
    assert d.granted and d.kernels == ["deepgemm_tile"] and not d.override
    row = AcceptanceRow(pr=PR, head_sha=HEAD, login="maint-bob", role="write", kernels=d.kernels, comment_id=1)
    assert accepted_status(report, [row]) == ("pending", "accepted by @maint-bob: deepgemm_tile; waiting for other")


def test_a_writer_accepts_a_kernel_that_needs_a_person_without_an_override() -> None:
    """needs_accept (a new kernel, an implausible speedup) and undecided: nothing failed, so write access decides."""
    for verdict in ("needs_accept", "undecided"):
        d = _decide("/accept", role="write", report=make_report(verdicts={"deepgemm_tile": verdict}))
        assert d.granted and not d.override and d.kernels == ["deepgemm_tile"], verdict
        assert "nothing failed, a person's call" in d.reason


def test_an_override_not_needed_is_a_plain_accept() -> None:
    d = _decide('/accept --override "just in case"', role="write", report=make_report())
    assert d.granted and not d.override and d.override_reason == ""


def test_acceptances_for_another_head_count_for_nothing() -> None:
    report = make_report(verdicts={"deepgemm_tile": "fail"})
    old = AcceptanceRow(
        pr=PR, head_sha=OLD, login="maint-bob", role="admin", kernels=["deepgemm_tile"], override=True, comment_id=1
    )
    assert accepted_status(report, [old])[0] == "pending"
    assert gates_overridden(report, [old]) is None
    now = old.model_copy(update={"head_sha": HEAD, "comment_id": 2})
    assert gates_overridden(report, [old, now]) == now
    assert accepted_status(report, [old, now]) == ("success", f"accepted by @maint-bob for {HEAD[:10]}")


def test_a_malformed_command_is_refused_before_anything_else() -> None:
    d = decide(
        AcceptCommand(line="/accept a b", error="more than one kernel"),
        login="x",
        role=base("none"),
        is_pull_request=False,
        pull=None,
        report=None,
        pushers=None,
    )
    assert not d.granted and d.reason == "more than one kernel"


# ---------------------------------------------------------------------------- nobody accepts their own change (pure)

OTHERS_ONLY = (
    "`/accept` needs a collaborator with write, maintain or admin, and `--override` one with maintain or admin, who "
    "neither opened this pull request nor pushed a commit to it"
)
CAROL = "c4" * 20  # a commit by a co-author who pushed to the pull request


@pytest.mark.parametrize(
    ("command", "role", "verdict"),
    [
        ("/accept", "write", "pass"),
        ("/accept", "admin", "needs_accept"),
        ('/accept --override "mine"', "maintain", "fail"),
    ],
)
@pytest.mark.parametrize("login", ["alice-dev", "Alice-Dev"])  # GitHub's logins compare in any case
def test_the_author_cannot_accept_their_own_change(command: str, role: str, verdict: str, login: str) -> None:
    d = _decide(command, role=role, report=make_report(verdicts={"deepgemm_tile": verdict}), login=login)
    assert not d.granted and not d.kernels
    assert d.reason == f"@{login} opened pull request #{PR}, and nobody accepts their own change: {OTHERS_ONLY}"


def test_whoever_wrote_or_committed_a_commit_of_it_cannot_accept_it() -> None:
    commits = (commit(OLD), commit(CAROL, author="carol-coauthor"), commit(HEAD, committer="dave-rebaser"))
    for login, sha in (("carol-coauthor", CAROL), ("dave-rebaser", HEAD)):
        d = _decide(
            '/accept --override "fine"', role="admin", report=make_report(), login=login, pushers=pushers(*commits)
        )
        assert not d.granted
        assert d.reason.startswith(f"@{login} wrote or committed commit `{sha[:10]}` of pull request #{PR}, and nobody")
    assert pushers(*commits).logins == ["alice-dev", "carol-coauthor", "dave-rebaser"]
    d = _decide("/accept", report=make_report(), login="maint-bob", pushers=pushers(*commits))
    assert d.granted and d.self_accept == "" and "self-acceptance" not in d.reason


def test_githubs_own_committer_and_unmapped_emails_name_nobody() -> None:
    """web-flow commits what is made on github.com (an edit, "Update branch"); a commit whose e-mail GitHub maps to
    no account has no login (documented in docs/security.md: git's author fields are the pusher's own word)."""
    listed = pushers(commit(OLD, committer="web-flow"), commit(HEAD, author=None, committer=None))
    assert listed.logins == ["alice-dev"] and not listed.unknown
    assert _decide("/accept", report=make_report(), pushers=listed).granted


def test_a_commit_list_not_known_whole_refuses_everyone() -> None:
    """GitHub lists at most 250 commits: beyond that anyone may be a pusher, so nobody can accept here."""
    long = pull(commits=300)
    listed = pushers(*[commit(f"{i:040x}") for i in range(249)], commit(HEAD), of=long)
    d = _decide("/accept", role="admin", report=make_report(), pull=long, pushers=listed)
    assert not d.granted
    assert d.reason.startswith("GitHub lists 250 of this pull request's 300 commits (at most 250), so opgate cannot")
    assert d.reason.endswith(OTHERS_ONLY)
    moved = pushers(commit(OLD))  # the head is not among the commits: a force-push landed between the two reads
    d = _decide("/accept", report=make_report(), pushers=moved)
    assert not d.granted and "the pull request moved while opgate read it" in d.reason
    d = _decide("/accept", report=make_report(), pushers=None)
    assert not d.granted and "opgate did not read who pushed to it" in d.reason


def test_allow_self_accept_lets_authors_and_pushers_accept_and_says_so() -> None:
    commits = pushers(commit(OLD), commit(HEAD, author="carol-coauthor"))
    d = _decide("/accept", report=make_report(), login="alice-dev", pushers=commits, allow_self_accept=True)
    assert d.granted and (d.self_accept, d.self_commit) == ("author", "")
    assert d.reason.endswith(f"; self-acceptance (@alice-dev opened pull request #{PR}), allowed by allow_self_accept")
    reply = render_accept_reply(d, "/accept")
    assert "**Self-acceptance**: @alice-dev opened this pull request, and accepted it" in reply
    assert "`allow_self_accept = true`, a weakening" in reply
    d = _decide(
        '/accept --override "ok"',
        role="maintain",
        report=make_report(verdicts={"deepgemm_tile": "fail"}),
        login="carol-coauthor",
        pushers=commits,
        allow_self_accept=True,
    )
    assert d.granted and d.override and (d.self_accept, d.self_commit) == ("pusher", HEAD)
    reply = render_accept_reply(d, '/accept --override "ok"')
    assert f"wrote or committed its commit `{HEAD[:10]}`" in reply and "Override recorded" in reply
    d = _decide("/accept", role="read", report=make_report(), login="alice-dev", allow_self_accept=True)
    assert not d.granted and "has the role `read`" in d.reason  # the role rule still holds
    d = _decide("/accept", report=make_report(), allow_self_accept=True)
    assert d.granted and d.self_accept == "" and "self-acceptance" not in d.reason


def test_the_refusal_reply_names_the_rule_and_who_may_accept() -> None:
    d = _decide("/accept", report=make_report(), login="alice-dev")
    reply = render_accept_reply(d, "/accept")
    said = "👎 **`/accept` refused**: @\u200balice-dev opened pull request #42, and nobody accepts their own change"
    assert said in reply  # the reply's untrusted text mentions nobody (a zero-width space after the @)
    assert "who neither opened this pull request nor pushed a commit to it." in reply


# ---------------------------------------------------------------------------- end to end


@pytest.fixture
def server() -> Iterator[FakeGitHub]:
    with FakeGitHub(TOKEN) as gh:
        gh.add_repo(REPO)
        gh.set_permission(REPO, "maint-bob", "maintain")
        gh.set_permission(REPO, "wanda-writer", "write")
        gh.set_permission(REPO, "rita-reader", "read")
        yield gh


def github_env(server: FakeGitHub) -> dict[str, str]:
    return {
        "GITHUB_API_URL": server.base_url,
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_REPOSITORY": REPO,
        "OPGATE_GITHUB_BACKOFF_S": "0.01",
        "OPGATE_GITHUB_WRITE_INTERVAL_S": "0",
        "OPGATE_GITHUB_LOGIN": server.bot_login,  # an installation token: GET /user cannot say who it is
    }


class Accept:
    """Posts a comment on the server, writes its issue_comment event, runs `opgate accept --event … --post`."""

    def __init__(self, opgate, server: FakeGitHub, tmp_path: Path) -> None:
        self.opgate, self.server, self.tmp_path = opgate, server, tmp_path
        self.ledger_path = tmp_path / "ledger.sqlite"  # the opgate fixture's OPGATE_DATABASE_URL

    def store(self, report: Report) -> None:
        ledger = open_ledger(str(self.ledger_path))
        ledger.record_review(report)
        ledger.close()

    def acceptances(self) -> list[AcceptanceRow]:
        ledger = open_ledger(str(self.ledger_path))
        try:
            return ledger.acceptances(PR)
        finally:
            ledger.close()

    def __call__(
        self,
        body: str,
        *,
        login: str = "maint-bob",
        number: int = PR,
        action: str = "created",
        post: bool = True,
        on_issue: bool = False,
    ):
        comment_id = self.server.add_comment(REPO, number, body, author=login)
        self.server.requests.clear()
        event = load_fixture("issue_comment.on_issue.json" if on_issue else "issue_comment.created.json")
        event["action"] = action
        event["comment"].update(id=comment_id, body=body)
        event["comment"]["user"]["login"] = event["sender"]["login"] = login
        event["comment"]["user"]["type"] = event["sender"]["type"] = "Bot" if login.endswith("[bot]") else "User"
        event["issue"]["number"] = number
        path = self.tmp_path / f"event-{comment_id}.json"
        path.write_text(json.dumps(event))
        self.comment_id = comment_id
        args = ["accept", "--event", str(path)] + (["--post"] if post else [])
        return self.opgate(*args, env=github_env(self.server), timeout=60)

    def calls(self) -> list[tuple[str, str]]:
        return [(r.method, r.path) for r in self.server.requests]

    def reactions(self) -> list[str]:
        return [r["content"] for r in self.server.reactions(self.comment_id)]


@pytest.fixture
def accept(opgate, server: FakeGitHub, tmp_path: Path) -> Accept:
    server.add_pull(REPO, number=PR, head_sha=HEAD, base_sha=BASE, author="alice-dev")
    return Accept(opgate, server, tmp_path)


def test_accept_records_reacts_and_sets_the_status(accept: Accept, server: FakeGitHub) -> None:
    accept.store(make_report())
    run = accept("/accept")
    assert run.code == 0, run.stderr
    assert "/accept granted: accept: deepgemm_tile" in run.stdout
    c = accept.comment_id
    assert accept.calls() == [
        ("POST", f"/repos/{REPO}/issues/comments/{c}/reactions"),
        ("GET", f"/repos/{REPO}/pulls/{PR}"),
        ("GET", f"/repos/{REPO}/collaborators/maint-bob/permission"),
        ("GET", f"/repos/{REPO}/pulls/{PR}/commits"),
        ("POST", f"/repos/{REPO}/issues/comments/{c}/reactions"),
        ("POST", f"/repos/{REPO}/statuses/{HEAD}"),
    ]
    assert accept.reactions() == ["eyes", "+1"]
    (status,) = server.statuses(REPO, HEAD)
    assert (status["context"], status["state"]) == ("opgate/accepted", "success")
    assert status["description"] == f"accepted by @maint-bob for {HEAD[:10]}"
    (row,) = accept.acceptances()
    assert (row.login, row.role, row.head_sha, row.kernels, row.override) == (
        "maint-bob",
        "maintain",
        HEAD,
        ["deepgemm_tile"],
        False,
    )
    assert len(server.comments(REPO, PR)) == 1  # no reply on a plain success


REFUSALS = [
    # (body, login, report verdicts or None for no report, what the reply says)
    ("/accept", "maint-bob", None, "no opgate report for the head"),
    ("/accept", "wanda-writer", {"deepgemm_tile": "fail"}, "gates did not pass for `deepgemm_tile`"),
    ('/accept --override "timer noise"', "wanda-writer", {"deepgemm_tile": "fail"}, "needs maintain or admin"),
    ("/accept", "rita-reader", {"deepgemm_tile": "pass"}, "has the role `read`"),
    ("/accept", "passer-by", {"deepgemm_tile": "pass"}, "has the role `read`"),
    ("/accept nosuch", "maint-bob", {"deepgemm_tile": "pass"}, "no kernel `nosuch`"),
    ("/accept a b", "maint-bob", {"deepgemm_tile": "pass"}, "more than one kernel"),
]


@pytest.mark.parametrize(("body", "login", "verdicts", "says"), REFUSALS)
def test_every_refusal_gets_a_reply_and_a_thumbs_down(accept: Accept, server, body, login, verdicts, says) -> None:
    server.user("passer-by")
    if verdicts is not None:
        accept.store(make_report(verdicts=verdicts))
    run = accept(body, login=login)
    assert run.code == 0, run.stderr
    assert accept.reactions() == ["eyes", "-1"]
    replies = [c for c in server.comments(REPO, PR) if c["id"] != accept.comment_id]
    assert len(replies) == 1
    reply = replies[0]["body"]
    assert reply.startswith("<!-- opgate:accept -->") and "`/accept` refused" in reply and says in reply, reply
    assert accept.acceptances() == [] and server.statuses(REPO, HEAD) == []
    assert [m for m, _ in accept.calls() if m != "GET"] == ["POST", "POST", "POST"]  # 👀, reply, 👎


def test_the_author_is_refused_and_a_configuration_that_allows_it_says_so_on_the_pull_request(
    accept: Accept, server: FakeGitHub
) -> None:
    """The author's own /accept: refused; with allow_self_accept = true in the configuration opgate runs from (the
    default branch's checkout), granted, and a reply on the pull request names the weakening."""
    server.set_permission(REPO, "alice-dev", "write")
    accept.store(make_report())
    run = accept("/accept", login="alice-dev")
    assert run.code == 0, run.stderr
    assert accept.reactions() == ["eyes", "-1"] and accept.acceptances() == []
    assert "opened pull request #42, and nobody accepts their own change" in server.comments(REPO, PR)[-1]["body"]
    (accept.tmp_path / "opgate.toml").write_text("allow_self_accept = true\n")
    run = accept("/accept", login="alice-dev")
    assert run.code == 0, run.stderr
    assert "self-acceptance (@alice-dev opened pull request #42), allowed by allow_self_accept" in run.stdout
    assert accept.reactions() == ["eyes", "+1"]
    reply = server.comments(REPO, PR)[-1]["body"]
    assert "**Self-acceptance**: @alice-dev opened this pull request, and accepted it" in reply
    assert "👍 Accepted `deepgemm_tile`" in reply
    ((login, role),) = [(r.login, r.role) for r in accept.acceptances()]
    assert (login, role) == ("alice-dev", "write")


def test_a_closed_pull_request_is_refused(accept: Accept, server: FakeGitHub) -> None:
    n = server.add_pull(REPO, number=43, head_sha=HEAD, base_sha=BASE, state="closed")
    accept.store(make_report())
    run = accept("/accept", number=n)
    assert run.code == 0, run.stderr
    assert accept.reactions() == ["eyes", "-1"]
    assert "pull request #43 is closed" in server.comments(REPO, n)[-1]["body"]


def test_an_accept_on_an_issue_is_refused(accept: Accept, server: FakeGitHub) -> None:
    n = server.add_issue(REPO, "Flaky case in flashmla", author="alice-dev")
    run = accept("/accept", number=n, on_issue=True)
    assert run.code == 0, run.stderr
    assert "not a pull request" in server.comments(REPO, n)[-1]["body"]
    assert not any(path.startswith(f"/repos/{REPO}/pulls") for _, path in accept.calls())


def test_a_maintainer_override_is_recorded_replied_and_turns_the_gate_green(accept: Accept, server) -> None:
    accept.store(make_report(verdicts={"deepgemm_tile": "fail"}))
    run = accept('/accept --override "CI box thermally throttled; re-measured: +0.4%"')
    assert run.code == 0, run.stderr
    assert accept.reactions() == ["eyes", "+1"]
    statuses = {s["context"]: s for s in server.statuses(REPO, HEAD)}
    assert statuses["opgate/accepted"]["state"] == "success"
    assert statuses["opgate/acceptance"]["state"] == "success"
    assert statuses["opgate/acceptance"]["description"].startswith("gates failed, overridden by @maint-bob (maintain)")
    (row,) = accept.acceptances()
    assert row.override and row.reason == "CI box thermally throttled; re-measured: +0.4%"
    reply = server.comments(REPO, PR)[-1]["body"]
    assert "Override recorded" in reply and "re-measured: +0.4%" in reply


def test_a_custom_role_built_on_write_may_accept_and_is_named_as_it_is(accept: Accept, server) -> None:
    """GitHub answers a custom role as role_name "kernel-maintainer", permission "write": the base role decides."""
    server.set_permission(REPO, "kay-kernels", "write", role_name="kernel-maintainer")
    accept.store(make_report())
    run = accept("/accept", login="kay-kernels")
    assert run.code == 0, run.stderr
    assert "granted: accept: deepgemm_tile at `a1a1a1a1a1` by @kay-kernels (kernel-maintainer (write))" in run.stdout
    assert accept.reactions() == ["eyes", "+1"]
    (row,) = accept.acceptances()
    assert (row.login, row.role) == ("kay-kernels", "kernel-maintainer")


def test_a_custom_role_built_on_maintain_may_override(accept: Accept, server) -> None:
    server.set_permission(REPO, "mona", "maintain", role_name="release-captain")
    accept.store(make_report(verdicts={"deepgemm_tile": "fail"}))
    run = accept('/accept --override "measured by hand on the H200: +0.2%"', login="mona")
    assert run.code == 0, run.stderr
    statuses = {s["context"]: s for s in server.statuses(REPO, HEAD)}
    description = statuses["opgate/acceptance"]["description"]
    assert description.startswith("gates failed, overridden by @mona (release-captain)")


def test_a_custom_role_built_on_read_is_refused_by_its_name(accept: Accept, server) -> None:
    server.set_permission(REPO, "rex", "read", role_name="kernel-reader")
    accept.store(make_report())
    run = accept("/accept", login="rex")
    assert run.code == 0, run.stderr
    assert accept.reactions() == ["eyes", "-1"]
    assert "has the role `kernel-reader (read)` here" in server.comments(REPO, PR)[-1]["body"]


@pytest.mark.parametrize(
    ("body", "login", "action"),
    [
        ("/accept", "maint-bob", "edited"),
        ("/acceptx", "maint-bob", "created"),
        ("> /accept", "maint-bob", "created"),
        ("Thanks!\n/accept", "maint-bob", "created"),
        ("/accept", "opgate-helper[bot]", "created"),
    ],
)
def test_what_is_not_a_command_does_nothing(accept: Accept, server: FakeGitHub, body, login, action) -> None:
    accept.store(make_report())
    run = accept(body, login=login, action=action)
    assert run.code == 0, run.stderr
    assert "ignored" in run.stdout
    assert accept.calls() == [] and accept.reactions() == []


def test_without_post_it_is_a_dry_run(accept: Accept, server: FakeGitHub) -> None:
    accept.store(make_report())
    run = accept("/accept", post=False)
    assert run.code == 0, run.stderr
    assert "granted" in run.stdout and "dry run" in run.stdout
    assert all(method == "GET" for method, _ in accept.calls())
    assert accept.acceptances() == []


def test_a_github_outage_exits_3_and_never_prints_the_token(accept: Accept, server: FakeGitHub) -> None:
    accept.store(make_report())
    server.fail(re.compile(rf"/repos/{REPO}/pulls/{PR}"), status=503, times=None)
    run = accept("/accept")
    assert run.code == 3
    assert "HTTP 503" in run.stderr and "after 4 attempts" in run.stderr
    assert TOKEN not in run.stdout + run.stderr
    assert accept.acceptances() == []


def test_an_accept_with_a_bare_cr_cannot_write_a_workflow_command_to_the_log(accept: Accept) -> None:
    accept.store(make_report())
    run = accept('/accept a "b\r::error title=forged::PASS"', post=False)
    assert run.code == 0, run.stderr
    assert "more than one kernel" in run.stdout
    lines = re.split(r"\r\n|\r|\n", run.stdout + run.stderr)
    assert [line for line in lines if line.lstrip().startswith("::")] == []


def test_a_comment_holding_a_lone_surrogate_is_bad_input_not_a_crash(accept: Accept) -> None:
    run = accept("/accept a \ud800", post=False)  # json.dumps writes it as the escape \ud800
    assert run.code == 2 and "Traceback" not in run.stderr
    assert "not Unicode text" in run.stderr
