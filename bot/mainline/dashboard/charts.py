"""Line charts as inline SVG (pure): no script, no font or file to fetch, so a page works offline from one folder."""

from __future__ import annotations

import math
from html import escape

from pydantic import BaseModel, ConfigDict, Field

WIDTH, HEIGHT = 760, 250
LEFT, RIGHT, TOP, BOTTOM = 70, 16, 46, 40
MAX_X_LABELS = 12


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class Point(_Model):
    x: float
    y: float
    label: str  # the tooltip (SVG <title>)
    mark: str = ""  # extra CSS class: pass, fail, inconclusive, override, anomaly


class Series(_Model):
    name: str
    points: list[Point]
    dashed: bool = False


class Band(_Model):
    """A shaded interval per x (a confidence band)."""

    name: str
    xs: list[float]
    lows: list[float]
    highs: list[float]


class Tick(_Model):
    """A vertical segment from y0 to y1 at x, with a point at y1 (a pull request: its base → its head)."""

    x: float
    y0: float
    y1: float
    label: str
    mark: str = ""


class Rule(_Model):
    """A horizontal reference line (a budget, a limit)."""

    y: float
    label: str


class Chart(_Model):
    title: str
    x_labels: list[str]  # one per integer x position
    y_label: str
    series: list[Series] = Field(default_factory=list)
    bands: list[Band] = Field(default_factory=list)
    ticks: list[Tick] = Field(default_factory=list)
    rules: list[Rule] = Field(default_factory=list)
    y_zero: bool = False  # include 0 on the y axis

    @property
    def points(self) -> int:
        return sum(len(s.points) for s in self.series) + len(self.ticks)


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (1, 2, 2.5 or 5 times a power of ten apart)."""
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / max(1, count - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    start = math.floor(low / step) * step
    ticks, v = [], start
    while v <= high + step * 1e-9:
        ticks.append(round(v, 10))
        v += step
    if ticks[-1] < high:
        ticks.append(round(v, 10))
    return ticks


def number(v: float) -> str:
    """A compact axis label: 1.2M, 350k, 4.56, 0.0123."""
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:.3g}M"
    if a >= 1e4:
        return f"{v / 1e3:.3g}k"
    if a == 0:
        return "0"
    return f"{v:.3g}"


def _extent(chart: Chart) -> tuple[float, float]:
    ys = [p.y for s in chart.series for p in s.points]
    ys += [y for b in chart.bands for y in (*b.lows, *b.highs)]
    ys += [y for t in chart.ticks for y in (t.y0, t.y1)]
    ys += [r.y for r in chart.rules]
    if chart.y_zero:
        ys.append(0.0)
    if not ys:
        return 0.0, 1.0
    low, high = min(ys), max(ys)
    pad = (high - low) * 0.08 or abs(high) * 0.05 or 1.0
    return (low if chart.y_zero and low >= 0 else low - pad), high + pad


def svg(chart: Chart) -> str:
    """The chart as an <svg> element: axes, bands, lines, points with tooltips, ticks and rules."""
    n = max(1, len(chart.x_labels))
    ticks = nice_ticks(*_extent(chart))
    y_low, y_high = ticks[0], ticks[-1]
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(x: float) -> float:
        return LEFT + (plot_w / 2 if n == 1 else (x + 0.5) * plot_w / n)

    def sy(y: float) -> float:
        return TOP + plot_h * (1 - (y - y_low) / ((y_high - y_low) or 1.0))

    out = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(chart.title)}"'
        f' data-points="{chart.points}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(chart.title)}</title>",
        f'<text class="ctitle" x="{LEFT}" y="18">{escape(chart.title)}</text>',
    ]
    for t in ticks:
        y = sy(t)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>')
        out.append(f'<text class="ylab" x="{LEFT - 6}" y="{y + 4:.1f}">{escape(number(t))}</text>')
    out.append(
        f'<text class="yname" transform="translate(14 {TOP + plot_h / 2:.0f}) rotate(-90)">'
        f"{escape(chart.y_label)}</text>"
    )
    every = max(1, math.ceil(n / MAX_X_LABELS))
    for i, label in enumerate(chart.x_labels):
        if i % every == 0 or i == n - 1:
            out.append(f'<text class="xlab" x="{sx(i):.1f}" y="{HEIGHT - BOTTOM + 16}">{escape(label)}</text>')
    for i, b in enumerate(chart.bands):
        upper = [f"{sx(x):.1f},{sy(h):.1f}" for x, h in zip(b.xs, b.highs, strict=True)]
        lower = [f"{sx(x):.1f},{sy(lo):.1f}" for x, lo in reversed(list(zip(b.xs, b.lows, strict=True)))]
        if upper:
            out.append(
                f'<polygon class="band b{i % 6}" points="{" ".join(upper + lower)}">'
                f"<title>{escape(b.name)}</title></polygon>"
            )
    for r in chart.rules:
        y = sy(r.y)
        out.append(
            f'<line class="rule" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}">'
            f"<title>{escape(r.label)}</title></line>"
        )
        out.append(f'<text class="rlab" x="{WIDTH - RIGHT - 4}" y="{y - 4:.1f}">{escape(r.label)}</text>')
    for i, s in enumerate(chart.series):
        cls = f"line s{i % 6}" + (" dashed" if s.dashed else "")
        coords = " ".join(f"{sx(p.x):.1f},{sy(p.y):.1f}" for p in s.points)
        if len(s.points) > 1:
            out.append(f'<polyline class="{cls}" points="{coords}"/>')
        for p in s.points:
            out.append(_point(sx(p.x), sy(p.y), f"pt s{i % 6} {p.mark}".strip(), f"{s.name}: {p.label}"))
    for pr in chart.ticks:
        x = sx(pr.x)
        y0, y1 = sy(pr.y0), sy(pr.y1)
        out.append(f'<line class="tick {pr.mark}" x1="{x:.1f}" x2="{x:.1f}" y1="{y0:.1f}" y2="{y1:.1f}"/>')
        out.append(_point(x, sy(pr.y1), f"pt pr {pr.mark}".strip(), pr.label, shape="diamond"))
    out.append(_legend(chart))
    out.append("</svg>")
    return "".join(out)


def _point(x: float, y: float, cls: str, label: str, shape: str = "circle") -> str:
    title = f"<title>{escape(label)}</title>"
    if shape == "diamond":
        d = f"M{x:.1f},{y - 5:.1f}L{x + 5:.1f},{y:.1f}L{x:.1f},{y + 5:.1f}L{x - 5:.1f},{y:.1f}Z"
        return f'<path class="{cls}" d="{d}">{title}</path>'
    return f'<circle class="{cls}" cx="{x:.1f}" cy="{y:.1f}" r="3.5">{title}</circle>'


def _legend(chart: Chart) -> str:
    items = [(f"s{i % 6}", s.name) for i, s in enumerate(chart.series)]
    if chart.ticks:
        items.append(("pr", "pull request: base → head"))
    x: float = LEFT
    out: list[str] = []
    for cls, name in items:
        label = name if len(name) <= 28 else name[:27] + "…"
        width = 14 + 7.0 * len(label)
        if x + width > WIDTH - RIGHT:
            break  # the tooltips still name every series
        out.append(f'<rect class="key {cls}" x="{x:.0f}" y="25" width="9" height="9"/>')
        out.append(f'<text class="legend" x="{x + 12:.0f}" y="33">{escape(label)}</text>')
        x += width + 10
    return "".join(out)
