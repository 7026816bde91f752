"""The sandbox probe names Ubuntu's AppArmor restriction of unprivileged user namespaces when bwrap is refused."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from bot.text.i18n import english_runs, speaking
from bot.untrusted import sandbox, userns
from bot.wording import spoken
from bot.wording.messages import phrase

UID_MAP_REFUSED = "bwrap: setting up uid map: Permission denied"


def fake_bwrap(folder: Path, stderr: str) -> str:
    """A bwrap that fails the way Ubuntu 24.04's refuses: the message on stderr, exit 1."""
    path = folder / "bwrap"
    path.write_text(f"#!/bin/sh\necho '{stderr}' >&2\nexit 1\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def proc_sys(folder: Path, **values: str) -> Path:
    """A /proc/sys of our own: kernel/apparmor_restrict_unprivileged_userns and the like."""
    for name, value in values.items():
        target = folder / name.replace(".", "/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"{value}\n")
    return folder


@pytest.fixture
def refused(tmp_path, monkeypatch):
    """The probe, run against a refusing bwrap and a chosen /proc/sys; returns the isolation it decides."""

    def probe(stderr: str = UID_MAP_REFUSED, **sysctls: str):
        bwrap = fake_bwrap(tmp_path, stderr)
        monkeypatch.setattr(sandbox, "_bwrap_candidates", lambda: [bwrap])
        monkeypatch.setattr(userns, "PROC_SYS", proc_sys(tmp_path / "sys", **sysctls))
        monkeypatch.delenv("OPGATE_SANDBOX", raising=False)
        sandbox.probe.cache_clear()
        try:
            return sandbox.probe()
        finally:
            sandbox.probe.cache_clear()

    return probe


def test_an_apparmor_refusal_is_named_with_the_sysctl_and_the_fix(refused, tmp_path):
    isolation, bwrap = refused(**{"kernel.apparmor_restrict_unprivileged_userns": "1"})
    fake = tmp_path / "bwrap"
    assert bwrap is None and isolation.mode == "none"
    assert isolation.reason is not None and phrase(isolation.reason) == (
        f"bubblewrap cannot start here ({fake}: {UID_MAP_REFUSED}): AppArmor restricts unprivileged user namespaces "
        "here (kernel.apparmor_restrict_unprivileged_userns = 1, Ubuntu's default since 23.10): give "
        f"{fake} an AppArmor profile that allows userns, or set the sysctl to 0 "
        "(docs/security.md#ubuntu-2404-and-apparmor)"
    )
    assert isolation.reason.key == "sandbox.refused_because"  # the catalog's message, rendered in English above
    with speaking("zh-CN"):
        chinese = spoken.phrase(isolation.reason)
    assert chinese.startswith(
        f"bubblewrap 无法在此启动（{fake}: {UID_MAP_REFUSED}）：此处 AppArmor 限制了非特权用户命名空间"
    )
    assert english_runs(chinese.replace(UID_MAP_REFUSED, "")) == []
    security = (Path(__file__).resolve().parents[1] / "docs" / "security.md").read_text()
    assert "### Ubuntu 24.04 and AppArmor" in security and "apparmor_parser -r /etc/apparmor.d/opgate-bwrap" in security


def test_a_refusal_the_host_settings_do_not_explain_names_no_cause(refused):
    isolation, _ = refused(**{"kernel.apparmor_restrict_unprivileged_userns": "0"})
    assert isolation.reason is not None and phrase(isolation.reason).endswith(
        f"bwrap: {UID_MAP_REFUSED})"
    )  # bwrap's own words, no guessed cause
    isolation, _ = refused(
        "bwrap: execvp /bin/sh: No such file or directory", **{"kernel.apparmor_restrict_unprivileged_userns": "1"}
    )
    assert isolation.reason is not None and "AppArmor" not in phrase(
        isolation.reason
    )  # another failure: not blamed on AppArmor


def test_user_namespaces_turned_off_are_named_too(refused):
    isolation, _ = refused("bwrap: No permissions to creating new namespace", **{"user.max_user_namespaces": "0"})
    assert isolation.reason is not None
    assert "user namespaces are turned off (user.max_user_namespaces = 0" in phrase(isolation.reason)
