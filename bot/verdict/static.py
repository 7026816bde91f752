"""Static checks on a kernel's tunable config, run before any build (pure)."""

from __future__ import annotations

from typing import Any


def _fmt_set(values: list[Any]) -> str:
    return "{" + ",".join(str(v) for v in values) + "}"


def check_tunables(config: dict[str, Any], allowed: dict[str, list[Any]], config_name: str) -> list[str]:
    """Every key allowed, every allowed key present, every value in its set."""
    findings = []
    for key in sorted(set(config) - set(allowed)):
        findings.append(f"{config_name}: unknown tunable {key!r} (allowed: {', '.join(sorted(allowed))})")
    for key in sorted(set(allowed) - set(config)):
        findings.append(f"{config_name}: missing tunable {key!r}")
    for key, values in allowed.items():
        if key not in config:
            continue
        value = config[key]
        if isinstance(value, bool) or value not in values:
            findings.append(f"{config_name}: {key}={value} not in {_fmt_set(values)}")
    return findings
