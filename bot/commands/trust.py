"""`opgate trust`: the trust gate of a review `/ok-to-test` dispatched — does the pull request still have the head a
writer trusted? Read through the GitHub API opgate already talks to (GITHUB_API_URL), so the workflow needs no `gh`."""

from __future__ import annotations

import argparse
from pathlib import Path

from bot.commands import Commands
from bot.config.settings import Settings
from bot.edges import publish
from bot.errors import InputError
from bot.models.output import TrustOutput
from bot.text.safe import one_line
from bot.verdict import slash


def register(commands: Commands) -> None:
    p = commands.add(
        "trust",
        help="the trust gate of a dispatched review: run only the head /ok-to-test trusted",
        description="Read pull request --pr from GitHub: open, not a draft and still at --head-sha (the head a "
        "writer trusted with /ok-to-test): run=true with pr, head_sha and base_sha; closed or a draft: run=false; "
        "moved on to another head: run=false, an error line and exit 1 (a new /ok-to-test is needed). The outputs "
        "are appended to --github-output as key=value lines ($GITHUB_OUTPUT) and printed. Needs GITHUB_TOKEN and "
        "GITHUB_REPOSITORY.",
    )
    p.add_argument("--pr", required=True, help="the pull request number the dispatch carried (input pr)")
    p.add_argument("--head-sha", required=True, help="the head SHA the dispatch carried (input head_sha)")
    p.add_argument("--github-output", type=Path, help="append the outputs here ($GITHUB_OUTPUT)")


def run(args: argparse.Namespace, settings: Settings) -> int:
    if not args.pr.isdigit() or int(args.pr) < 1:
        raise InputError(f"--pr: not a pull request number: {one_line(args.pr)!r}")
    if not slash.COMMIT_SHA.fullmatch(args.head_sha):
        raise InputError(f"--head-sha: not a commit SHA (40 lowercase hex digits): {one_line(args.head_sha)!r}")
    with publish.open_edge(settings) as edge:
        pull = edge.pull_request(int(args.pr))
    for sha in (pull.head_sha, pull.base_sha):  # what the later jobs check out, from GitHub's own answer
        if not slash.COMMIT_SHA.fullmatch(sha):
            raise InputError(f"#{pull.number}: GitHub gave a commit SHA that is not one: {one_line(sha)!r}")
    decision = slash.decide_dispatched(pull, args.head_sha)
    if args.github_output is not None:
        with args.github_output.open("a", encoding="utf-8") as out:
            out.writelines(f"{key}={value}\n" for key, value in decision.outputs.items())
    if args.json:
        print(TrustOutput(**decision.model_dump()).model_dump_json())
    else:  # an Actions workflow command: the run's summary shows it
        print(f"::{'error' if decision.moved_on else 'notice'}::opgate: {one_line(decision.reason)}")
        print("\n".join(f"{key}={value}" for key, value in decision.outputs.items()))
    return 1 if decision.moved_on else 0
