"""Screenshot a PR comment as GitHub shows it, with headless Chromium: docs/comment.png in the README.

    .venv/bin/python scripts/comment_screenshot.py                        # the README's example -> docs/comment.png
    .venv/bin/python scripts/comment_screenshot.py --locale zh-CN --out docs/comment-zh.png   # the same, in Chinese
    .venv/bin/python scripts/comment_screenshot.py reports/latest/comment.md --out /tmp/comment.png

The Markdown is rendered with cmark-gfm (GitHub's renderer), alerts and ```mermaid charts as github.com draws
them (mermaid.js from npm's `mermaid` package, fetched once into .venv/opgate-mermaid/). Without a file, the
example is tests/comment_reports.py's `fail_latency` review (the README demo's failing case) on a pull request.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.present.render import render_comment  # noqa: E402
from bot.text.i18n import LOCALES, speaking  # noqa: E402
from tests import browser, comment_page  # noqa: E402
from tests import comment_reports as examples  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("markdown", nargs="?", type=Path, help="a comment.md (default: the README's example)")
    parser.add_argument("--example", default="fail_latency", choices=sorted(examples.REPORTS))
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "comment.png")
    parser.add_argument("--locale", default="en", choices=LOCALES, help="the language of the example's comment")
    parser.add_argument("--width", type=int, default=960)
    parser.add_argument(
        "--height",
        type=int,
        help="crop to this many pixels (default: the example's headline to its statistics; a file's whole page)",
    )
    args = parser.parse_args()
    if args.height is None:
        args.height = 0 if args.markdown is not None else 1165  # docs/comment.png: small, the decisive part
    if args.markdown is not None:
        text = args.markdown.read_text()
    else:
        report = examples.REPORTS[args.example]()
        with speaking(args.locale):
            text = render_comment(report, pr=examples.pr_for(report))
    if (why := browser.missing_reason()) is not None:
        print(f"comment_screenshot: {why}", file=sys.stderr)
        return 2
    mermaid = comment_page.fetch_mermaid()
    with tempfile.TemporaryDirectory() as scratch, browser.Browser(width=args.width, height=900) as chromium:
        loaded = comment_page.open_page(chromium, text, Path(scratch), mermaid)
        if errors := chromium.evaluate(loaded, "window.chartErrors"):
            print(f"comment_screenshot: mermaid could not draw a chart: {errors}", file=sys.stderr)
            return 1
        if args.height:
            chromium.height = args.height
            chromium.call("Emulation.setDeviceMetricsOverride", {"width": args.width, "height": args.height,
                          "deviceScaleFactor": 1, "mobile": False}, loaded.session)  # fmt: skip
        chromium.screenshot(loaded, args.out, full_page=not args.height)
    print(f"{args.out}: {args.out.stat().st_size // 1024} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
