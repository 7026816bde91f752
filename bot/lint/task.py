"""Agent task files: the `AgentTask` schema, a bare base URL, the domain's key variable, the three denials."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from bot.config.task import REQUIRED_DENY, AgentTask
from bot.lint.collect import Collector, Facts, KeyUse, UrlUse, parse_json_object
from bot.lint.findings import LintFinding
from bot.lint.locate import label_of, line_of, strings
from bot.lint.secrets import VAR_NAME, KeyBook, find_keys, looks_like_key, mask
from bot.lint.urls import check_url, gateway_root

MODEL_PLACEHOLDER = "YOUR_MODEL_ID"


def infer_domain(data: dict[str, Any], book: KeyBook) -> str | None:
    """The task's domain from its target.kernel or task_id, when it names a configured one (or the part of
    its name before the first `_`, of three letters or more: `v41` for v41_attention)."""
    target = data.get("target")
    names = [str(target.get("kernel", "")) if isinstance(target, dict) else "", str(data.get("task_id", ""))]
    for name in names:
        low = name.lower()
        for domain in sorted(book.domains, key=len, reverse=True):
            head = domain.split("_")[0]
            if domain in low or ("_" in domain and len(head) >= 3 and head in low):
                return domain
    return None


def check_task(
    path: str, text: str, domain: str | None = None, book: KeyBook | None = None
) -> tuple[list[LintFinding], Facts]:
    """The findings of a task file, its base URL and its key variable (owned by `domain` when known).

    `book` is the repository's configured domains and key variables; without it the key variable is only
    checked for being a variable name."""
    book = book or KeyBook()
    c = Collector(path)
    parsed = parse_json_object(c, "TASK001", text, "the task file")
    if parsed is None:
        return c.done()
    data, lines = parsed
    domain = domain or infer_domain(data, book)

    try:
        AgentTask.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            loc = tuple(err["loc"])
            if loc[:1] == ("deny",) or (loc == ("provider", "api_key_env") and err["type"] == "value_error"):
                continue  # TASK005 / TASK002 say it better
            c.add(line_of(lines, loc), "TASK001", f"{label_of(loc) or '(top level)'}: {err['msg']}")

    provider = data.get("provider")
    provider = provider if isinstance(provider, dict) else {}
    base_url = provider.get("base_url")
    if isinstance(base_url, str):
        line = line_of(lines, ("provider", "base_url"))
        c.findings += check_url(path, line, "provider.base_url", base_url, "gateway")
        if gateway_root(base_url):
            c.facts.urls.append(UrlUse(path, line, "provider.base_url", base_url))

    variable = provider.get("api_key_env")
    if isinstance(variable, str):
        line = line_of(lines, ("provider", "api_key_env"))
        expected = book.domains.get(domain or "") or (
            "one of " + ", ".join(sorted(book.variables)) if book.domains else "e.g. TAOTOKEN_API_KEY_<DOMAIN>_AGENT"
        )
        if not variable:
            c.add(line, "TASK002", f"provider.api_key_env is empty; name the key variable ({expected})")
        elif looks_like_key(variable) or not VAR_NAME.fullmatch(variable):
            if looks_like_key(variable):
                c.secrets.add(variable.strip())
            c.add(
                line,
                "TASK002",
                f"provider.api_key_env holds {mask(variable)!r}, not an environment variable name; "
                f"name the variable ({expected}), never the key",
            )
        else:
            c.facts.keys.append(
                KeyUse(path, line, "provider.api_key_env", variable, f"domain {domain}" if domain else None)
            )
            if book.domains and variable not in book.variables:
                c.add(
                    line,
                    "TASK003",
                    f"provider.api_key_env {variable} is not a configured domain's key variable ({expected})",
                )
            elif domain is not None and domain in book.domains and variable != book.domains[domain]:
                c.add(
                    line,
                    "TASK004",
                    f"provider.api_key_env {variable} is the key of the {book.owner(variable)} domain; "
                    f"a {domain} task uses {expected}",
                )

    deny = data.get("deny")
    if not isinstance(deny, list):
        c.add(line_of(lines, ("deny",)), "TASK005", f"deny must be a list of {', '.join(REQUIRED_DENY)}")
    elif missing := [d for d in REQUIRED_DENY if d not in deny]:
        c.add(line_of(lines, ("deny",)), "TASK005", f"deny is missing {', '.join(missing)}")

    if data.get("model") == MODEL_PLACEHOLDER:
        c.add(line_of(lines, ("model",)), "TASK007", f"model is the placeholder {MODEL_PLACEHOLDER}; set a model id")

    for where, value in strings(data):
        if where == ("provider", "api_key_env"):
            continue
        if keys := find_keys(value):
            c.secrets.update(keys)
            c.add(line_of(lines, where), "TASK006", f"{label_of(where)} holds what looks like a key ({mask(keys[0])})")
    return c.done()


def lint_task(path: str, text: str, domain: str | None = None, book: KeyBook | None = None) -> list[LintFinding]:
    return check_task(path, text, domain, book)[0]
