"""Static checks on a kernel's tunable config, run before any build (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.models.finding import Finding, Gate, Outcome
from bot.wording.messages import render


def _fmt_set(values: list[Any]) -> str:
    return "{" + ",".join(str(v) for v in values) + "}"


def check_tunables(config: dict[str, Any], allowed: dict[str, list[Any]], config_name: str) -> list[str]:
    """Every key allowed, every allowed key present, every value in its set (`tunable_findings`, as lines)."""
    return [render(f) for f in tunable_findings(config, allowed, config_name)]


def tunable_findings(
    config: dict[str, Any],
    allowed: dict[str, list[Any]],
    config_name: str,
    path: str | None = None,
    lines: Mapping[str, int] | None = None,
) -> list[Finding]:
    """Every key allowed, every allowed key present, every value in its set; each finding at the config file (`path`
    from the repository root, else `config_name`) and at its key's line there (`lines`: `Kernel.config_lines`); a
    missing key has no line, so its finding names the file alone (no annotation: GitHub's need a line)."""

    def found(message: str, tunable: str, /, **params: str) -> Finding:
        return Finding(
            gate=Gate.static,
            outcome=Outcome.fail,
            key=message,
            params={"config": config_name, **params},
            file=path or config_name,
            line=(lines or {}).get(tunable),
        )

    findings = []
    for key in sorted(set(config) - set(allowed)):
        findings.append(found("static.unknown_tunable", key, key=repr(key), allowed=", ".join(sorted(allowed))))
    for key in sorted(set(allowed) - set(config)):
        findings.append(found("static.missing_tunable", key, key=repr(key)))
    for key, values in allowed.items():
        if key not in config:
            continue
        value = config[key]
        if isinstance(value, bool) or value not in values:
            findings.append(found("static.tunable_value", key, key=key, value=str(value), values=_fmt_set(values)))
    return findings
