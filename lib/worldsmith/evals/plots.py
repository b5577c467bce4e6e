"""The report's figures: plotly for the interactive HTML, matplotlib for the PNG beside it.

Plotly's own PNG export (kaleido 1.x) drives a Chrome it downloads or finds on the machine; neither is
guaranteed offline, so the static PNG of each figure is drawn with matplotlib (Agg, no display) from
the same numbers. Three shapes cover the report: grouped bars with intervals (leaderboard, W2R),
a forest plot of paired differences, and lines with interval bands (fidelity@t, construction size).
Each writer returns the file names it wrote, relative to the plots folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go

from worldsmith.util.atomic import atomic_write

__all__ = ["Bar", "Point", "bars_figure", "forest_figure", "lines_chart", "lines_figure"]


@dataclass(frozen=True)
class Bar:
    """One bar: its group on the x axis, its series (colour), the value and interval."""

    group: str
    series: str
    mean: float
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Point:
    """One point of a line (`series`) at `x`, with its interval."""

    series: str
    x: float
    mean: float
    low: float | None = None
    high: float | None = None


def _matplotlib():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(folder: Path, stem: str, figure: go.Figure, draw) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    html = folder / f"{stem}.html"
    with atomic_write(html, "w") as handle:  # plotly.min.js once beside the pages: readable offline
        handle.write(figure.to_html(include_plotlyjs="directory", full_html=True))
    plt = _matplotlib()
    fig = draw(plt)
    with atomic_write(folder / f"{stem}.png") as handle:
        fig.savefig(handle, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    if not (folder / "plotly.min.js").exists():
        from plotly.offline import get_plotlyjs

        with atomic_write(folder / "plotly.min.js", "w") as handle:
            handle.write(get_plotlyjs())
    return [f"{stem}.png", f"{stem}.html"]


def _err(mean: float, low: float | None, high: float | None) -> tuple[float, float]:
    return (mean - low if low is not None else 0.0, high - mean if high is not None else 0.0)


def bars_figure(folder: Path, stem: str, bars: Sequence[Bar], *, title: str, y_label: str) -> list[str]:
    """Grouped bars with interval whiskers (groups on x, one colour per series)."""
    groups = list(dict.fromkeys(b.group for b in bars))
    series = list(dict.fromkeys(b.series for b in bars))
    figure = go.Figure()
    for name in series:
        mine = {b.group: b for b in bars if b.series == name}
        xs = [g for g in groups if g in mine]
        errors = [_err(mine[g].mean, mine[g].low, mine[g].high) for g in xs]
        figure.add_bar(name=name, x=xs, y=[mine[g].mean for g in xs],
                       error_y={"type": "data", "symmetric": False, "array": [e[1] for e in errors],
                                "arrayminus": [e[0] for e in errors]})
    figure.update_layout(title=title, barmode="group", yaxis_title=y_label, template="plotly_white")

    def draw(plt):
        fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(groups) * max(1, len(series)) / 2 + 2), 3.8))
        width = 0.8 / max(1, len(series))
        for index, name in enumerate(series):
            mine = {b.group: b for b in bars if b.series == name}
            xs = [i for i, g in enumerate(groups) if g in mine]
            values = [mine[groups[i]].mean for i in xs]
            errors = [_err(mine[groups[i]].mean, mine[groups[i]].low, mine[groups[i]].high) for i in xs]
            ax.bar([x + (index - (len(series) - 1) / 2) * width for x in xs], values, width, label=name,
                   yerr=[[e[0] for e in errors], [e[1] for e in errors]], capsize=3)
        ax.set_xticks(range(len(groups)), groups, rotation=20, ha="right")
        ax.set_ylabel(y_label)
        ax.set_title(title)
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        return fig

    return _save(folder, stem, figure, draw)


def forest_figure(folder: Path, stem: str, rows: Sequence[Bar], *, title: str, x_label: str) -> list[str]:
    """Paired differences as points with intervals, one row per pair (`group`), one colour per metric (`series`)."""
    labels = list(dict.fromkeys(f"{r.group} · {r.series}" for r in rows))
    figure = go.Figure()
    for name in dict.fromkeys(r.series for r in rows):
        mine = [r for r in rows if r.series == name]
        errors = [_err(r.mean, r.low, r.high) for r in mine]
        figure.add_scatter(name=name, mode="markers", x=[r.mean for r in mine],
                           y=[f"{r.group} · {r.series}" for r in mine],
                           error_x={"type": "data", "symmetric": False, "array": [e[1] for e in errors],
                                    "arrayminus": [e[0] for e in errors]})
    figure.add_vline(x=0, line_dash="dash", line_color="gray")
    figure.update_layout(title=title, xaxis_title=x_label, template="plotly_white",
                         height=max(300, 40 * len(labels) + 120))

    def draw(plt):
        fig, ax = plt.subplots(figsize=(7, max(2.5, 0.4 * len(labels) + 1.2)))
        for index, row in enumerate(rows):
            low, high = _err(row.mean, row.low, row.high)
            ax.errorbar([row.mean], [index], xerr=[[low], [high]], fmt="o", capsize=3)
        ax.axvline(0, color="gray", linestyle="--", linewidth=1)
        ax.set_yticks(range(len(rows)), [f"{r.group} · {r.series}" for r in rows], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(x_label)
        ax.set_title(title)
        ax.grid(axis="x", alpha=0.3)
        return fig

    return _save(folder, stem, figure, draw)


def lines_chart(points: Sequence[Point], *, title: str, x_label: str, y_label: str, log_x: bool = False) -> go.Figure:
    """The plotly figure of `lines_figure` (a page shows it without writing files)."""
    figure = go.Figure()
    for name in dict.fromkeys(p.series for p in points):
        mine = sorted((p for p in points if p.series == name), key=lambda p: p.x)
        xs = [p.x for p in mine]
        figure.add_scatter(name=name, mode="lines+markers", x=xs, y=[p.mean for p in mine])
        if all(p.low is not None and p.high is not None for p in mine):
            figure.add_scatter(name=f"{name} interval", x=xs + xs[::-1],
                               y=[p.high for p in mine] + [p.low for p in mine][::-1], fill="toself", opacity=0.2,
                               line={"width": 0}, showlegend=False, hoverinfo="skip")
    figure.update_layout(title=title, xaxis_title=x_label, yaxis_title=y_label, template="plotly_white")
    if log_x:
        figure.update_xaxes(type="log")
    return figure


def lines_figure(folder: Path, stem: str, points: Sequence[Point], *, title: str, x_label: str, y_label: str,
                 log_x: bool = False) -> list[str]:
    """One line per series with its interval as a band."""
    series = list(dict.fromkeys(p.series for p in points))
    figure = lines_chart(points, title=title, x_label=x_label, y_label=y_label, log_x=log_x)

    def draw(plt):
        fig, ax = plt.subplots(figsize=(6.5, 3.8))
        for name in series:
            mine = sorted((p for p in points if p.series == name), key=lambda p: p.x)
            xs = [p.x for p in mine]
            line = ax.plot(xs, [p.mean for p in mine], marker="o", label=name)[0]
            if all(p.low is not None and p.high is not None for p in mine):
                ax.fill_between(xs, [p.low for p in mine], [p.high for p in mine], alpha=0.2,
                                color=line.get_color())
        if log_x:
            ax.set_xscale("log")
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        ax.set_title(title)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        return fig

    return _save(folder, stem, figure, draw)
