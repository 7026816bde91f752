"""Why bubblewrap cannot create its user namespace here: Ubuntu's AppArmor restriction, or user namespaces off.

Ubuntu 23.10 and later (24.04 runners included) set `kernel.apparmor_restrict_unprivileged_userns = 1`: an
unconfined program may create a user namespace but gets no capabilities in it, so bwrap fails with "setting up
uid map: Permission denied" (or "Creating new namespace failed"). The fix is the runner administrator's: an
AppArmor profile that allows `userns` for opgate's bwrap, or the sysctl set to 0 (docs/security.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from bot.models.finding import Phrase

PROC_SYS = Path("/proc/sys")  # tests point this at a folder of their own
APPARMOR_SYSCTL = "kernel.apparmor_restrict_unprivileged_userns"
# bwrap's words when the kernel or a security module refuses the namespace it needs
_REFUSED = re.compile(
    r"setting up uid map|uid_map|Creating new namespace failed|No permissions to creat|"
    r"Operation not permitted|Permission denied|loopback: Failed RTM_NEWADDR",
    re.I,
)
FIX = "docs/security.md#ubuntu-2404-and-apparmor"


def _sysctl(name: str) -> str | None:
    try:
        return (PROC_SYS / name.replace(".", "/")).read_text().strip()
    except OSError:
        return None


def cause_phrase(bwrap_error: str, bwrap: str = "bwrap") -> Phrase | None:
    """The reason bwrap's `bwrap_error` names, when the host's settings explain it, as a phrase of the message
    catalog (bot/wording/messages.py); None otherwise."""
    if not _REFUSED.search(bwrap_error):
        return None
    if _sysctl(APPARMOR_SYSCTL) == "1":
        return Phrase(key="userns.apparmor", params={"sysctl": APPARMOR_SYSCTL, "bwrap": bwrap, "fix": FIX})
    if _sysctl("kernel.unprivileged_userns_clone") == "0":
        return Phrase(key="userns.clone_off", params={"fix": FIX})
    if _sysctl("user.max_user_namespaces") == "0":
        return Phrase(key="userns.max_zero", params={"fix": FIX})
    return None
