"""Base-URL rules (bot/lint/urls.py) called directly: each mistake gets its rule, the URL is shown without its
credentials, query values or a key in its path, and two clients' URLs are compared by their gateway root."""

from __future__ import annotations

import pytest

from bot.lint.urls import check_url, gateway_root, show_url
from tests.lint_texts import CANARY


def rule_ids(url: str, flavor: str = "gateway") -> list[str]:
    return [f.rule for f in check_url("f", 3, "base_url", url, flavor)]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "flavor", "expected"),
    [
        ("https://taotoken.net/api", "gateway", []),
        ("https://taotoken.net/api?utm_source=x", "gateway", ["URL001"]),
        ("https://taotoken.net/api#top", "gateway", ["URL001"]),
        ("taotoken.net/api", "gateway", ["URL002"]),
        ("https://user:pw@taotoken.net/api", "gateway", ["URL003"]),
        ("https://taotoken.net/api/chat/completions", "gateway", ["URL004"]),
        ("https://taotoken.net/api/v1", "gateway", ["URL005"]),
        ("https://taotoken.net/api/v1", "anthropic", ["URL005"]),
        ("https://taotoken.net/api/v1", "openai", []),
        ("https://taotoken.net/api", "openai", ["URL006"]),
        ("http://taotoken.net/api", "gateway", ["URL007"]),
        ("http://127.0.0.1:8080/api", "gateway", []),
    ],
)
def test_each_base_url_mistake_gets_its_rule(url: str, flavor: str, expected: list[str]) -> None:
    assert rule_ids(url, flavor) == expected


def test_findings_carry_the_path_line_and_label() -> None:
    [f] = check_url(".env", 7, "TAOTOKEN_BASE_URL", "https://taotoken.net/api/v1", "gateway")
    assert (f.path, f.line, f.rule) == (".env", 7, "URL005")
    assert f.message.startswith("TAOTOKEN_BASE_URL 'https://taotoken.net/api/v1' ends with /v1")
    assert "/v1/chat/completions" in f.message


def test_a_shown_url_keeps_no_secret() -> None:
    shown = show_url(f"https://me:{CANARY}@taotoken.net/{CANARY}/api?key={CANARY}&utm_source=x#frag")
    assert CANARY not in shown and CANARY[3:12] not in shown
    assert shown == "https://***@taotoken.net/sk-…/api?key=…&utm_source=…#…"
    [f] = [f for f in check_url("f", 1, "base_url", f"https://u:{CANARY}@taotoken.net/api", "gateway")]
    assert f.rule == "URL003" and CANARY not in f.message


def test_clients_agree_when_their_urls_share_a_gateway_root() -> None:
    root = gateway_root("https://taotoken.net/api")
    assert root == "https://taotoken.net/api"
    assert gateway_root("https://TaoToken.net/api/v1") == root  # Codex's /v1, the host's case
    assert gateway_root("https://taotoken.net/api/v1/chat/completions") == root
    assert gateway_root("https://taotoken.net/api/messages/") == root
    assert gateway_root("https://old-gateway.example.net/api") != root
    assert gateway_root("https://taotoken.net:8443/api") == "https://taotoken.net:8443/api"
    assert gateway_root("ftp://taotoken.net/api") is None and gateway_root("not a url") is None
