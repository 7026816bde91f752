"""GitHub's data as opgate models it (bot/models/github.py): role levels compare."""

from __future__ import annotations

from bot.models.github import Role


def test_role_levels_compare() -> None:
    custom = Role(level="maintain", name="release-captain")
    assert custom.at_least("write") and custom.at_least("maintain") and not custom.at_least("admin")
    assert custom.shown == "release-captain (maintain)" and Role(level="write", name="write").shown == "write"
