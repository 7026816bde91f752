"""`/tune` (bot/tune/command.py): read from a comment's first line only, and it needs write access and a known kernel.
The tuning loop's pure parts are tested in tests/test_tune_<module>.py."""

from __future__ import annotations

import pytest

from bot.models.github import Role
from bot.tune import command


@pytest.mark.parametrize(
    ("body", "kernel", "error"),
    [
        ("/tune deepgemm_tile", "deepgemm_tile", None),
        ("/tune deepgemm_tile --strategy both --rounds 4 --tokens 20000\nplease", "deepgemm_tile", None),
        ("/tune", None, "which kernel"),
        ("/tune a b", None, "more than one kernel"),
        ("/tune deepgemm_tile --rounds 0", None, "--rounds needs a whole number"),
        ("/tune deepgemm_tile --strategy random", None, "--strategy is one of"),
        ("/tune deepgemm_tile --budget 3", None, "unknown option --budget"),
    ],
)
def test_tune_commands_are_read_from_the_first_line(body: str, kernel: str | None, error: str | None) -> None:
    parsed = command.parse_command(body)
    assert parsed is not None
    assert parsed.kernel == kernel if error is None else error in (parsed.error or "")


@pytest.mark.parametrize("body", ["/tunex deepgemm_tile", "> /tune deepgemm_tile", "hi\n/tune deepgemm_tile", ""])
def test_only_a_first_line_tune_is_a_command(body: str) -> None:
    assert command.parse_command(body) is None


def test_tune_needs_write_access_and_a_known_kernel() -> None:
    parsed = command.parse_command("/tune deepgemm_tile --rounds 4")
    assert parsed is not None
    kernels = ["deepgemm_tile", "flashmla_decode"]
    ok = command.decide(parsed, login="maint-bob", role=Role(level="write", name="write"), kernels=kernels, number=7)
    assert ok.granted and ok.inputs == {"kernel": "deepgemm_tile", "strategy": "agent", "rounds": "4", "issue": "7"}
    for level in ("read", "triage", "none"):
        no = command.decide(parsed, login="eve", role=Role(level=level, name=level), kernels=kernels, number=7)
        assert not no.granted and "needs write, maintain or admin" in no.reason and no.inputs == {}
    custom = Role(level="write", name="kernel-maintainer")  # a custom role counts as the base role it builds on
    granted = command.decide(parsed, login="kay", role=custom, kernels=kernels, number=7)
    assert granted.granted and granted.role == "kernel-maintainer" and "(kernel-maintainer (write))" in granted.reason
    other = command.parse_command("/tune ../../etc")
    assert other is not None
    admin = Role(level="admin", name="admin")
    assert not command.decide(other, login="maint-bob", role=admin, kernels=kernels, number=7).granted
