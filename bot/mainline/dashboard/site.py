"""Write the dashboard into one folder: autoescaped HTML pages with their charts inline, nothing to fetch."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from bot.mainline.dashboard import charts, figures
from bot.mainline.dashboard.figures import SiteData
from bot.templates import TEMPLATES, environment

PAGES = TEMPLATES / "dashboard"
LATEST_COMMITS = 15


@cache
def _jinja_env() -> jinja2.Environment:
    env = environment(PAGES, autoescape=True, keep_trailing_newline=False)
    env.filters["svg"] = lambda chart: Markup(charts.svg(chart))  # charts.svg escapes every text it writes
    return env


def _http(url: str) -> str:
    """A link target from the ledger, kept only when it is an http(s) URL."""
    return url if url.startswith(("https://", "http://")) else ""


def pages(data: SiteData, where: str) -> dict[str, str]:
    """File name -> HTML, for every page of the site."""
    env = _jinja_env()
    names = figures.kernels(data)
    nav = [{"name": k, "page": figures.page_name(k)} for k in names]
    common: dict[str, Any] = {
        "kernels": nav,
        "where": where,
        "generated_at": data.generated_at.isoformat(timespec="seconds"),
    }
    overrides = {(a.pr, k): a for a in data.acceptances if a.override for k in (a.kernels or ["*"])}
    commits = sorted(data.commits, key=lambda c: c.committed_at, reverse=True)[:LATEST_COMMITS]
    latest = [
        {
            **c.model_dump(),
            "override": "; ".join(
                f"{a.login}: {a.reason}" for (pr, _), a in overrides.items() if c.pr is not None and pr == c.pr
            ),
        }
        for c in commits
    ]
    cumulative = [(k, chart) for k in nav if (chart := figures.cumulative_chart(data, k["name"])) is not None]
    overview, per_domain = figures.token_charts(data)
    checks = [c.model_copy(update={"issue_url": _http(c.issue_url)}) for c in data.checks]
    out = {
        "index.html": env.get_template("index.html.j2").render(
            **common,
            title="Overview",
            page="index",
            n_commits=len(data.commits),
            n_reviews=len({(r.report.pr, r.report.head_sha) for r in data.reviews}),
            n_overrides=sum(1 for a in data.acceptances if a.override),
            n_flagged=sum(1 for c in checks if c.flagged),
            checks=checks,
            cumulative=cumulative,
            tokens_chart=overview,
            commits=latest,
        ),
        "tokens.html": env.get_template("tokens.html.j2").render(
            **common,
            title="Tokens",
            page="tokens",
            overview=overview,
            charts=per_domain,
            table=figures.token_table(data),
            weeks=figures.token_weeks(data),
            labels={d: data.labels.get(d) or d for d in figures.token_table(data)},
        ),
        "tuning.html": env.get_template("tuning.html.j2").render(
            **common,
            title="Tuning",
            page="tuning",
            table_name=data.tuning_table,
            rows=data.tuning_rows,
            columns=list(data.tuning_rows[0]) if data.tuning_rows else [],
            tables=figures.TUNING_TABLES,
        ),
    }
    for k in nav:
        out[k["page"]] = env.get_template("kernel.html.j2").render(
            **common,
            title=k["name"],
            page=k["page"],
            kernel=k["name"],
            cumulative=figures.cumulative_chart(data, k["name"]),
            latency=figures.latency_charts(data, k["name"]),
            resources=figures.resource_charts(data, k["name"]),
            reviews=_review_rows(data, k["name"]),
        )
    return out


def _review_rows(data: SiteData, kernel: str) -> list[dict[str, Any]]:
    rows = []
    for r in figures.kernel_reviews(data, kernel):
        k = next(k for k in r.report.kernels if k.name == kernel)
        found = [a for a in data.acceptances if a.pr == r.report.pr and a.head_sha == r.report.head_sha and a.override]
        rows.append(
            {
                "pr": r.report.pr,
                "head": r.report.head_sha,
                "base": r.report.base_sha,
                "created_at": r.created_at,
                "verdict": k.verdict,
                "cases": [
                    (c.name, "—" if c.regression_pct is None else f"{c.regression_pct:+.2f}%", c.verdict)
                    for c in k.cases
                    if c.verdict != "skipped"
                ],
                "override": "; ".join(
                    f"{a.login} ({a.role}): {a.reason}" for a in found if kernel in a.kernels or not a.kernels
                ),
            }
        )
    return rows


def write(data: SiteData, out: Path, where: str) -> dict[str, int]:
    """Write every page into `out` (kernel pages of kernels no longer in the ledger are removed); file -> bytes."""
    out.mkdir(parents=True, exist_ok=True)
    written = pages(data, where)
    for stale in out.glob("kernel-*.html"):
        if stale.name not in written:
            stale.unlink()
    sizes = {}
    for name, html in written.items():
        path = out / name
        path.write_text(html, encoding="utf-8")
        sizes[name] = path.stat().st_size
    return sizes
