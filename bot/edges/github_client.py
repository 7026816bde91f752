"""The connection to GitHub under the edge: the token and repository checked, PyGithub set up, which login opgate
posts as, and every call's retries.

Failures cross this boundary as `bot.errors.ServiceError` (exit 3). Rate limits are
waited for as GitHub documents them (bot/edges/ratelimit.py: the primary limit until `x-ratelimit-reset`,
`Retry-After` in full, the secondary limit from a minute, doubling); 5xx and dropped connections are retried
with exponential backoff; other 4xx fail at once; all waits of one edge together stay under `max_wait_s`.
PyGithub's own urllib3 retry is switched off (`retry=None`) so every failed answer reaches our loop, and the
retry unit is a whole operation: an upsert re-reads before it writes again, so a write whose answer was lost
is found rather than repeated.

The token never appears in a message or a log line (messages are scrubbed with bot.redact as well).
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, TypeVar

import requests
from github import Auth, Github, GithubException
from github.GithubException import BadAttributeException, IncompletableObject

from bot.edges.ratelimit import Wait, limit_kind, limit_wait, retry_after
from bot.errors import InputError, ServiceError
from bot.text.redact import scrub

log = logging.getLogger("opgate.github")

T = TypeVar("T")

DEFAULT_API_URL = "https://api.github.com"


class GitHubClient:
    """The connection to one GitHub repository.

    api_url: the REST root (https://api.github.com, or https://HOST/api/v3 for GitHub Enterprise Server).
    retries: further attempts after the first, for retryable failures; backoff_s doubles per attempt up
    to max_backoff_s after a 5xx or a dropped connection (a longer Retry-After wins); rate limits wait as
    GitHub documents; max_wait_s bounds all waits of this edge together (a wait past it is not started).
    bot_login: the login opgate's own comments, issues and pull requests carry (github-actions[bot] for
    Actions' GITHUB_TOKEN, `<app-slug>[bot]` for a GitHub App); None: the token's user from `GET /user`
    (a personal token; an installation token cannot read it and gets an InputError naming the setting).
    seconds_between_requests / seconds_between_writes: PyGithub's pacing (its defaults, which GitHub
    recommends against secondary rate limits); tests pass None. sleep and clock: injectable for tests.
    """

    def __init__(
        self,
        api_url: str,
        token: str,
        repository: str,
        *,
        retries: int = 3,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        max_wait_s: float = 300.0,
        timeout_s: int = 15,
        per_page: int = 100,
        bot_login: str | None = None,
        seconds_between_requests: float | None = 0.25,
        seconds_between_writes: float | None = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        api_url = (api_url or DEFAULT_API_URL).strip().rstrip("/")
        parsed = urllib.parse.urlsplit(api_url)
        if parsed.username or parsed.password:
            raise InputError("GitHub API URL must not carry credentials (the token goes in GITHUB_TOKEN)")
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise InputError(f"GitHub API URL must be http(s)://host[/path], got {api_url!r}")
        if not token or not token.strip():
            raise InputError("no GitHub token (GITHUB_TOKEN is empty)")
        owner, _, name = repository.strip().partition("/")
        if not owner or not name or "/" in name:
            raise InputError(f"GitHub repository must be 'owner/name', got {repository!r}")
        if retries < 0 or backoff_s < 0 or max_backoff_s < 0 or max_wait_s < 0 or per_page < 1 or timeout_s < 1:
            raise InputError("GitHub retry, backoff, wait, timeout and page settings must be positive")
        if bot_login is not None and not bot_login.strip():
            raise InputError("OPGATE_GITHUB_LOGIN is empty: the login opgate posts as, e.g. github-actions[bot]")
        self.api_url = api_url
        self.repository = f"{owner}/{name}"
        self.retries, self.backoff_s, self.max_backoff_s = retries, backoff_s, max_backoff_s
        self.max_wait_s = max_wait_s
        self.waited_s = 0.0  # all waits of this edge so far
        self._login = bot_login.strip() if bot_login else None
        self._token = token.strip()
        self._sleep, self._clock = sleep, clock
        self._gh = Github(
            base_url=api_url,
            auth=Auth.Token(self._token),
            timeout=timeout_s,
            per_page=min(per_page, 100),
            retry=None,  # no urllib3 retries: 5xx and connection errors come to _call
            seconds_between_requests=seconds_between_requests,
            seconds_between_writes=seconds_between_writes,
            lazy=True,  # objects are built from URLs without a GET; attributes are fetched when read
        )
        self._repo = self._gh.get_repo(self.repository)

    # ------------------------------------------------------------------ who opgate is

    def login(self) -> str:
        """The login opgate's own comments, issues and pull requests carry (read once from `GET /user` when it
        was not given; InputError when the token cannot read it, as an installation token cannot)."""
        if self._login is None:
            self._login = self._call("read which login the token posts as (GET /user)", self._read_login)
        return self._login

    def _read_login(self) -> str:
        try:
            return str(self._gh.get_user().login)
        except GithubException as exc:
            if exc.status in (401, 403, 404) and limit_kind(exc.status, exc.headers, _github_message(exc)) is None:
                raise InputError(
                    f"cannot tell which login opgate posts as: GET /user answered HTTP {exc.status} (a GitHub App's "
                    "installation token cannot read it); set OPGATE_GITHUB_LOGIN to the login its comments carry, "
                    "e.g. my-app[bot] (in Actions with GITHUB_TOKEN it is github-actions[bot])"
                ) from exc
            raise

    def _mine(self, user: Any) -> bool:
        """Whether `user` (a PyGithub NamedUser, or None for a deleted account) is opgate's own identity."""
        return user is not None and str(user.login).lower() == self.login().lower()

    def _check_author(self, user: Any, what: str) -> None:
        """Warn when GitHub put what opgate just wrote under another login than the one it looks for."""
        if user is not None and not self._mine(user):
            log.warning(
                "%s",
                scrub(
                    f"GitHub: the {what} was written as {user.login}, but opgate looks for its own by {self.login()}: "
                    f"set OPGATE_GITHUB_LOGIN={user.login}, or the next run will not find it and writes another",
                    self._secrets,
                ),
            )

    # ------------------------------------------------------------------ retries and errors

    def _call(self, what: str, op: Callable[[], T]) -> T:
        attempt = 0
        limited = 0  # rate-limit answers of this operation so far (the secondary rule doubles per repeat)
        while True:
            try:
                return op()
            except GithubException as exc:
                kind = limit_kind(exc.status, exc.headers, _github_message(exc))
                reason = _describe_http(exc, hint=kind is None)
                if kind is not None:
                    limited += 1
                    wait = limit_wait(kind, exc.headers, self._clock(), limited)
                elif exc.status is not None and exc.status >= 500:
                    wait = self._backoff(attempt, exc.headers, f"HTTP {exc.status}")
                else:
                    raise ServiceError(self._message(what, reason, attempt)) from exc
                self._may_wait(what, reason, attempt, wait, exc)
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
                reason = f"connection failed ({type(exc).__name__})"
                wait = self._backoff(attempt, None, "a failed connection")
                self._may_wait(what, reason, attempt, wait, exc)
            except requests.RequestException as exc:
                raise ServiceError(self._message(what, f"request failed ({type(exc).__name__})", attempt)) from exc
            except (BadAttributeException, IncompletableObject, KeyError, ValueError) as exc:
                # An answer we could not read: not JSON, a field missing or of the wrong type.
                reason = f"unexpected answer ({type(exc).__name__})"
                raise ServiceError(self._message(what, reason, attempt)) from exc
            attempt += 1
            self.waited_s += wait.seconds
            log.warning(
                "%s",
                scrub(
                    f"GitHub: {what}: {reason}; {wait.reason}: waiting {wait.seconds:.3g} s, "
                    f"retry {attempt}/{self.retries}",
                    self._secrets,
                ),
            )
            self._sleep(wait.seconds)

    def _backoff(self, attempt: int, headers: dict[str, Any] | None, after: str) -> Wait:
        """Exponential backoff after a 5xx or a dropped connection; a Retry-After is honoured in full."""
        delay = min(self.max_backoff_s, self.backoff_s * (2**attempt))
        asked = retry_after(headers)
        if asked is not None and asked > delay:
            return Wait(seconds=asked, reason=f"after {after}, Retry-After {asked:g} s")
        return Wait(seconds=delay, reason=f"after {after}, backoff")

    def _may_wait(self, what: str, reason: str, attempt: int, wait: Wait, exc: Exception) -> None:
        """Raise the operation's ServiceError when no retry is left or the wait would pass max_wait_s."""
        if attempt >= self.retries:
            spent = f", {self.waited_s:.3g} s waited" if self.waited_s else ""
            detail = f"{reason} — {wait.reason}; no retry left{spent}"
            raise ServiceError(self._message(what, detail, attempt)) from exc
        if self.waited_s + wait.seconds > self.max_wait_s:
            detail = (
                f"{reason} — {wait.reason} asks to wait {wait.seconds:.3g} s, over the {self.max_wait_s:.3g} s "
                f"opgate waits for GitHub in all ({self.waited_s:.3g} s waited already; OPGATE_GITHUB_MAX_WAIT_S)"
            )
            raise ServiceError(self._message(what, detail, attempt)) from exc

    @property
    def _secrets(self) -> list[str]:
        return [self._token]

    def _message(self, what: str, reason: str, attempt: int) -> str:
        tries = f" after {attempt + 1} attempts" if attempt else ""
        message = f"GitHub ({self.api_url}, {self.repository}): could not {what}: {reason}{tries}"
        return scrub(message, self._secrets).replace(self._token, "***")


def _github_message(exc: GithubException) -> str:
    data = exc.data if isinstance(exc.data, dict) else {}
    message = data.get("message")
    return message if isinstance(message, str) else ""


def _describe_http(exc: GithubException, *, hint: bool = True) -> str:
    data = exc.data if isinstance(exc.data, dict) else {}
    message = data.get("message") if isinstance(data.get("message"), str) else None
    explain = {
        401: "the token was rejected",
        403: "forbidden (token scope or rate limit)",
        404: "not found (or the token cannot see it)",
        422: "GitHub refused the request",
    }.get(exc.status, "")
    parts = [f"HTTP {exc.status}"]
    if message:
        parts.append(message[:200])
    errors = data.get("errors")
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        first = errors[0]
        detail = first.get("message") or first.get("code") or ""
        parts.append(f"[{first.get('field', '')}: {str(detail)[:200]}]")
    if explain and hint:
        parts.append(f"({explain})")
    return " ".join(parts)
