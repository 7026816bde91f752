"""Rules across files: one gateway base URL everywhere, one key variable per task domain and per client."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from bot.lint.collect import Facts, KeyUse
from bot.lint.findings import LintFinding, make_finding, scrub
from bot.lint.urls import gateway_root, show_url


def lint_across(facts: Iterable[Facts]) -> list[LintFinding]:
    """One gateway base URL everywhere; one key variable per task domain and per client."""
    facts = list(facts)
    out: list[LintFinding] = []

    urls = [u for f in facts for u in f.urls]
    roots = [gateway_root(u.url) or "" for u in urls]
    counts = Counter(roots)
    if len(counts) > 1:
        task_roots = [r for u, r in zip(urls, roots, strict=True) if u.label == "provider.base_url"]
        majority = max(counts, key=lambda r: (counts[r], task_roots.count(r), -roots.index(r)))
        agree = sorted({u.path for u, r in zip(urls, roots, strict=True) if r == majority})
        for use, root in zip(urls, roots, strict=True):
            if root != majority:
                where = ", ".join(agree[:3]) + (f" and {len(agree) - 3} more" if len(agree) > 3 else "")
                out.append(
                    make_finding(
                        use.path,
                        use.line,
                        "XFILE001",
                        f"{use.label} {show_url(use.url)!r} points elsewhere than {show_url(majority)!r}, "
                        f"the base URL of {where}; switch every client to the same gateway",
                    )
                )

    by_var: dict[str, list[KeyUse]] = {}
    for key_use in (k for f in facts for k in f.keys):
        by_var.setdefault(key_use.variable, []).append(key_use)
    for variable, uses in sorted(by_var.items()):
        owners = sorted({u.owner for u in uses if u.owner})
        unknown_tasks = any(u.owner is None for u in uses)
        clients = [o for o in owners if not o.startswith("domain ")]
        if len(owners) < 2 and not (unknown_tasks and clients):
            continue
        sharers = ", ".join(owners + (["a task of unknown domain"] if unknown_tasks else []))
        for key_use in uses:
            out.append(
                make_finding(
                    key_use.path,
                    key_use.line,
                    "XFILE002",
                    f"{key_use.label} {variable} is shared by {sharers}; give each task domain and each client "
                    "its own key variable",
                )
            )
    return scrub(out, {secret for f in facts for secret in f.secrets})
