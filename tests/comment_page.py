"""A comment as a page that looks like it does on GitHub: cmark-gfm HTML, GitHub-like styles, alerts, mermaid charts.

Used by scripts/comment_screenshot.py (docs/comment.png) and by the test that every chart parses in mermaid.
mermaid.js comes from npm's `mermaid` package (`npm pack`, no dependencies needed: dist/mermaid.min.js is one
file), fetched once into .venv/opgate-mermaid/; OPGATE_TEST_MERMAID names another copy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.hostile import html

ROOT = Path(__file__).resolve().parent.parent
MERMAID_VERSION = "11.12.2"
MERMAID_CACHE = ROOT / ".venv" / "opgate-mermaid" / f"mermaid-{MERMAID_VERSION}.min.js"

STYLE = """
body { margin: 0; background: #fff; color: #1f2328; font: 14px/1.5 -apple-system, "Segoe UI", "Noto Sans",
       Helvetica, Arial, sans-serif; }
.comment { margin: 16px; border: 1px solid #d1d9e0; border-radius: 6px; }
.comment-header { background: #f6f8fa; border-bottom: 1px solid #d1d9e0; padding: 8px 16px; color: #59636e; }
.comment-body { padding: 16px; }
h2 { font-size: 1.5em; margin: 0 0 16px; padding-bottom: .3em; border-bottom: 1px solid #d1d9e0; }
h3 { font-size: 1.25em; margin: 24px 0 16px; }
p, ul, table, pre, blockquote, details { margin: 0 0 16px; }
ul { padding-left: 2em; }
code { font: 85% ui-monospace, SFMono-Regular, Menlo, monospace; background: #818b981f; padding: .2em .4em;
       border-radius: 6px; }
pre { background: #f6f8fa; padding: 16px; border-radius: 6px; overflow: auto; }
pre code { background: none; padding: 0; }
table { border-collapse: collapse; display: block; overflow: auto; }
th, td { border: 1px solid #d1d9e0; padding: 6px 13px; }
th { font-weight: 600; }
tr:nth-child(2n) { background: #f6f8fa; }
sub { color: #59636e; }
summary { cursor: pointer; }
.alert { border-left: .25em solid; padding: 8px 16px; }
.alert .title { font-weight: 600; margin-bottom: 4px; }
.alert-warning { border-color: #9a6700; } .alert-warning .title { color: #9a6700; }
.alert-caution { border-color: #d1242f; } .alert-caution .title { color: #d1242f; }
.alert-note { border-color: #0969da; } .alert-note .title { color: #0969da; }
.mermaid { margin: 0 0 16px; }
::-webkit-scrollbar { display: none; }
"""

# GitHub's alerts (> [!WARNING]) and mermaid blocks, as github.com shows them
SCRIPT = """
for (const q of document.querySelectorAll("blockquote")) {
  const p = q.querySelector("p"); const m = p && p.innerHTML.match(/^\\[!(NOTE|TIP|IMPORTANT|WARNING|CAUTION)\\]\\s*/);
  if (!m) continue;
  p.innerHTML = p.innerHTML.slice(m[0].length);
  const kind = m[1].toLowerCase(); const box = document.createElement("div");
  box.className = "alert alert-" + kind;
  box.innerHTML = '<div class="title">' + m[1][0] + m[1].slice(1).toLowerCase() + "</div>" + q.innerHTML;
  q.replaceWith(box);
}
for (const pre of document.querySelectorAll('pre[lang="mermaid"]')) {
  const div = document.createElement("div"); div.className = "mermaid"; div.textContent = pre.textContent;
  pre.replaceWith(div);
}
window.chartErrors = [];
if (window.mermaid) {
  mermaid.initialize({ startOnLoad: false, theme: "default" });
  mermaid.run({ querySelector: ".mermaid", postRenderCallback: () => {} })
    .catch((e) => window.chartErrors.push(String(e && e.message || e)))
    .finally(() => { window.chartsDone = true; });
} else { window.chartsDone = true; }
"""


def mermaid_path() -> Path | None:
    """A mermaid.min.js on this machine, or None."""
    named = os.environ.get("OPGATE_TEST_MERMAID")
    if named:
        return Path(named) if Path(named).is_file() else None
    return MERMAID_CACHE if MERMAID_CACHE.is_file() else None


def fetch_mermaid() -> Path:
    """mermaid.min.js of MERMAID_VERSION from npm (`npm pack`: the package's tarball, no install), cached."""
    found = mermaid_path()
    if found is not None:
        return found
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError(
            "no npm on this machine: apt-get install npm, or set OPGATE_TEST_MERMAID to a mermaid.min.js"
        )
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run([npm, "pack", "--silent", f"mermaid@{MERMAID_VERSION}", "--pack-destination", scratch],
                       check=True, capture_output=True, timeout=300)  # fmt: skip
        (tarball,) = Path(scratch).glob("mermaid-*.tgz")
        with tarfile.open(tarball) as tar:
            member = tar.extractfile("package/dist/mermaid.min.js")
            if member is None:
                raise RuntimeError(f"{tarball.name} has no package/dist/mermaid.min.js")
            MERMAID_CACHE.parent.mkdir(parents=True, exist_ok=True)
            MERMAID_CACHE.write_bytes(member.read())
    return MERMAID_CACHE


def page(markdown: str, mermaid: Path | None, title: str = "opgate commented") -> str:
    """The comment inside a GitHub-like comment box; charts drawn when `mermaid` is given."""
    script = f'<script src="{mermaid.as_uri()}"></script>' if mermaid else ""
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><style>{STYLE}</style>{script}</head><body>'
        f'<div class="comment"><div class="comment-header"><b>opgate</b> {title}</div>'
        f'<div class="comment-body">{html(markdown)}</div></div><script>{SCRIPT}</script></body></html>'
    )


def open_page(chromium: Any, markdown: str, folder: Path, mermaid: Path | None) -> Any:
    """Load the comment page in `chromium` (a tests.browser.Browser) and wait until its charts are drawn."""
    target = folder / "comment.html"
    target.write_text(page(markdown, mermaid))
    loaded = chromium.open(target.as_uri())
    deadline = time.monotonic() + 30
    while not chromium.evaluate(loaded, "window.chartsDone === true"):
        if time.monotonic() > deadline:
            raise TimeoutError("mermaid did not finish drawing the charts")
        time.sleep(0.1)
    return loaded
