"""The dashboard's charts (bot/mainline/dashboard/charts.py): round axis ticks, compact labels, and an SVG whose
every point names itself and whose text is escaped; the pages in a browser are tested in tests/test_dashboard.py."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from bot.mainline.dashboard.charts import Chart, Point, Rule, Series, Tick, nice_ticks, number, svg

NS = "{http://www.w3.org/2000/svg}"


def test_ticks_are_round_steps_that_cover_the_range():
    assert nice_ticks(0, 10) == [0, 2.5, 5, 7.5, 10]
    assert nice_ticks(0.13, 0.91) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(-3, 3) == [-4, -2, 0, 2, 4]
    assert nice_ticks(5, 5) == [4, 6, 8, 10]  # an empty range still gets an axis above it


def test_axis_labels_are_compact():
    assert [number(v) for v in (1_234_567, 35_000, 4.5678, 0, 0.012345, -25_000)] == [
        "1.23M", "35k", "4.57", "0", "0.0123", "-25k"
    ]  # fmt: skip


def test_the_svg_has_a_point_with_its_tooltip_for_every_figure_and_escapes_every_text():
    chart = Chart(
        title="deepgemm_tile <square_512>",
        x_labels=["a1b2c3", "d4e5f6", "0a1b2c"],
        y_label="p50 ms",
        series=[
            Series(
                name="head & base",
                points=[Point(x=0, y=2.0, label="2.0 ms"), Point(x=1, y=2.5, label="2.5 ms", mark="fail")],
            )
        ],
        ticks=[Tick(x=2, y0=2.5, y1=2.1, label="PR #7: 2.5 → 2.1 ms")],
        rules=[Rule(y=3.0, label="limit <3 ms>")],
    )
    text = svg(chart)
    root = ET.fromstring(text)  # well-formed: every text escaped
    assert root.get("data-points") == "3" and root.findtext(f"{NS}title") == "deepgemm_tile <square_512>"
    titles = [t.text for t in root.iter(f"{NS}title")]
    assert "head & base: 2.0 ms" in titles and "head & base: 2.5 ms" in titles and "PR #7: 2.5 → 2.1 ms" in titles
    assert "limit <3 ms>" in titles
    circles = list(root.iter(f"{NS}circle"))
    assert [c.get("class") for c in circles] == ["pt s0", "pt s0 fail"]
    assert float(circles[0].get("cy", 0)) > float(circles[1].get("cy", 0))  # a larger figure sits higher
    assert len(list(root.iter(f"{NS}polyline"))) == 1 and root.find(f"{NS}path") is not None  # the line, the PR
    assert "<square_512>" not in text and re.search(r"pull request: base → head", text)
