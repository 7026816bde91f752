"""Headless Chromium for tests, driven over the DevTools protocol on a pipe (stdlib only, no driver to download).

`Browser().open(url)` loads a page and returns what a person's browser saw: console errors, uncaught
exceptions, failed loads (`Log.entryAdded` at level error) and the values of JavaScript expressions;
`screenshot()` saves the page as PNG. Chromium reads commands on fd 3 and answers on fd 4, each message
a JSON object ended by a NUL byte (`--remote-debugging-pipe`, what Playwright and Puppeteer use).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def executable() -> str | None:
    """The Chromium on this machine (OPGATE_TEST_CHROMIUM, else the first of CANDIDATES on the PATH)."""
    return os.environ.get("OPGATE_TEST_CHROMIUM") or next((p for c in CANDIDATES if (p := shutil.which(c))), None)


def missing_reason() -> str | None:
    if executable() is None:
        return "no Chromium on this machine (apt-get install chromium; scripts/setup.sh does it as root)"
    return None


@dataclass
class PageLoad:
    url: str
    errors: list[str] = field(default_factory=list)  # console errors, exceptions, failed loads
    session: str = ""


class Browser:
    """One headless Chromium process; use as a context manager."""

    def __init__(self, width: int = 1200, height: int = 900) -> None:
        path = executable()
        if path is None:
            raise RuntimeError(missing_reason())
        self.width, self.height = width, height
        self.profile = tempfile.mkdtemp(prefix="opgate-chromium-")
        to_chrome_r, self._write = os.pipe()
        self._read, from_chrome_w = os.pipe()
        argv = [  # bash, not sh: dash cannot redirect from a descriptor above 9
            "bash",
            "-c",
            f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w}',
            path,
            "--headless=new",
            "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
            "--disable-gpu",
            "--disable-extensions",
            "--no-first-run",
            "--no-default-browser-check",
            "--remote-debugging-pipe",
            f"--user-data-dir={self.profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        self.proc = subprocess.Popen(
            argv, pass_fds=(to_chrome_r, from_chrome_w), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []

    # -- the protocol -----------------------------------------------------------------------

    def _send(self, method: str, params: dict[str, Any] | None, session: str | None) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _receive(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._read], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise EOFError("Chromium closed the pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return dict(json.loads(message))

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        wanted = self._send(method, params, session)
        while True:
            message = self._receive(30)
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))
            self._events.append(message)

    def _drain(self, quiet_s: float) -> None:
        try:
            while True:
                self._events.append(self._receive(quiet_s))
        except TimeoutError:
            pass

    # -- pages --------------------------------------------------------------------------------

    def open(self, url: str) -> PageLoad:
        """Load `url` in a new tab; wait for the load event and a quiet moment; collect every error."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page.enable", "Runtime.enable", "Log.enable"):
            self.call(domain, None, session)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
            session,
        )
        self._events.clear()
        self.call("Page.navigate", {"url": url}, session)
        deadline = time.monotonic() + 30
        while not any(e.get("method") == "Page.loadEventFired" and e.get("sessionId") == session for e in self._events):
            self._events.append(self._receive(max(0.1, deadline - time.monotonic())))
        self._drain(0.3)
        load = PageLoad(url=url, session=session)
        for e in self._events:
            if e.get("sessionId") != session:
                continue
            params = e.get("params", {})
            if e.get("method") == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                load.errors.append(
                    "console: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
                )
            elif e.get("method") == "Runtime.exceptionThrown":
                load.errors.append("exception: " + str(params.get("exceptionDetails", {}).get("text")))
            elif e.get("method") == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                load.errors.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip())
        return load

    def evaluate(self, page: PageLoad, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, page.session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def screenshot(self, page: PageLoad, path: Path, *, full_page: bool = False) -> None:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            height = int(self.evaluate(page, "document.documentElement.scrollHeight"))
            params["clip"] = {"x": 0, "y": 0, "width": self.width, "height": height, "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", params, page.session)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        with contextlib.suppress(OSError, EOFError, TimeoutError, RuntimeError):
            self.call("Browser.close")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
