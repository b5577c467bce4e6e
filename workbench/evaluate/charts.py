"""Plotly figures of the Evaluate page, built from the frames of `tables` (no Streamlit here).

Every figure shows the interval it has (error bars, bands, whiskers) so no point estimate is
ever shown alone where the report gives its uncertainty.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from worldsmith.evals import small_sample_note

__all__ = ["divergence_timeline", "fidelity_curves", "forest_plot", "heatmap", "judge_bars", "metric_bars"]

_PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d", "#bab0ac"]


def _color(i: int) -> str:
    return _PALETTE[i % len(_PALETTE)]


def _error_y(frame: pd.DataFrame) -> dict:
    return {"type": "data", "symmetric": False, "array": (frame["high"] - frame["mean"]).fillna(0).tolist(),
            "arrayminus": (frame["mean"] - frame["low"]).fillna(0).tolist()}


def metric_bars(long: pd.DataFrame, metric: str) -> go.Figure:
    """One bar per method for `metric` with its interval (a leaderboard_frame, filtered to the metric)."""
    frame = long[long["metric"] == metric].sort_values("mean", ascending=False)
    notes = [small_sample_note(t) for t in frame.get("trajectories", pd.Series([None] * len(frame)))]
    figure = go.Figure(go.Bar(x=frame["method"], y=frame["mean"], error_y=_error_y(frame),
                              marker_color=[_color(i) for i in range(len(frame))],
                              text=notes, textposition="inside"))  # small samples say so on their bar
    figure.update_layout(title=f"{metric}: mean with 95% interval", yaxis_title=metric, height=360,
                         margin={"t": 50, "b": 40})
    return figure


def judge_bars(frame: pd.DataFrame) -> go.Figure:
    """Grouped bars: judge score (1-5) per dimension, one colour per method, with bootstrap intervals."""
    figure = go.Figure()
    for i, (method, group) in enumerate(frame.groupby("method", sort=True)):
        figure.add_trace(go.Bar(name=str(method), x=group["dimension"], y=group["mean"], error_y=_error_y(group),
                                marker_color=_color(i)))
    figure.update_layout(barmode="group", title="Judge score per dimension (1-5, 95% interval over episodes)",
                         yaxis={"range": [0, 5.2], "title": "score"}, height=380, margin={"t": 50, "b": 40})
    return figure


def fidelity_curves(frame: pd.DataFrame, metric: str = "fidelity") -> go.Figure:
    """fidelity@t per method: a line of means and a shaded 95% band."""
    figure = go.Figure()
    for i, (method, group) in enumerate(frame.sort_values("t").groupby("method", sort=True)):
        color = _color(i)
        band = group.dropna(subset=["low", "high"])
        if not band.empty:
            figure.add_trace(go.Scatter(x=list(band["t"]) + list(band["t"])[::-1],
                                        y=list(band["high"]) + list(band["low"])[::-1], fill="toself",
                                        fillcolor=color, opacity=0.2, line={"width": 0}, hoverinfo="skip",
                                        showlegend=False, name=f"{method} interval"))
        figure.add_trace(go.Scatter(x=group["t"], y=group["mean"], mode="lines+markers", name=str(method),
                                    line={"color": color}, customdata=group["n"],
                                    text=[small_sample_note(t) for t in group.get("trajectories", [None] * len(group))],
                                    hovertemplate="t=%{x}<br>mean=%{y:.3f}<br>n=%{customdata}<br>%{text}"))
    figure.update_layout(title=f"{metric}@t (open-loop drift)", xaxis_title="step t", yaxis_title=metric,
                         height=380, margin={"t": 50, "b": 40})
    return figure


def forest_plot(frame: pd.DataFrame, metric: str) -> go.Figure:
    """Paired differences (A − B) with their intervals, one row per pair; the zero line marks no difference."""
    frame = frame.sort_values("mean_diff")
    colors = ["#e45756" if s else "#4c78a8" for s in frame["significant"]]
    figure = go.Figure(go.Scatter(
        x=frame["mean_diff"], y=frame["pair"], marker={"size": 10, "color": colors},
        error_x={"type": "data", "symmetric": False, "array": (frame["high"] - frame["mean_diff"]).fillna(0).tolist(),
                 "arrayminus": (frame["mean_diff"] - frame["low"]).fillna(0).tolist()},
        text=list(frame["sample"]) if "sample" in frame else None, textposition="top center", mode="markers+text",
        customdata=frame[["low", "high", "n"]].to_numpy(),
        hovertemplate="%{y}<br>difference %{x:.3f} [%{customdata[0]:.3f}, %{customdata[1]:.3f}]<br>n=%{customdata[2]}"))
    figure.add_vline(x=0, line_dash="dash", line_color="gray")
    figure.update_layout(title=f"Paired difference in {metric} (A − B, 95% paired bootstrap interval)",
                         xaxis_title=f"{metric} difference", height=max(220, 60 + 40 * len(frame)),
                         margin={"t": 50, "b": 40, "l": 10})
    return figure


def heatmap(table: pd.DataFrame, metric: str, zmax: float = 1.0) -> go.Figure:
    """Mean `metric` by action (rows) × step (columns): where in a trajectory each action goes wrong."""
    figure = go.Figure(go.Heatmap(z=table.to_numpy(), x=[str(c) for c in table.columns], y=list(table.index),
                                  colorscale="RdYlGn", zmin=0, zmax=zmax, colorbar={"title": metric},
                                  hovertemplate="action %{y}<br>step %{x}<br>mean %{z:.3f}<extra></extra>"))
    figure.update_layout(title=f"{metric} by action × step", xaxis_title="step", yaxis_title="action",
                         height=max(260, 80 + 24 * len(table)), margin={"t": 50, "b": 40})
    return figure


def divergence_timeline(frame: pd.DataFrame) -> go.Figure:
    """Each drifted trajectory on one axis of steps: a bar for its length, a marker at its first divergence."""
    figure = go.Figure()
    labels = [f"{m} · {e}" for m, e in zip(frame["method"], frame["episode_id"], strict=True)]
    known = frame["length"].notna()
    if known.any():
        figure.add_trace(go.Bar(x=frame.loc[known, "length"], y=[labels[i] for i in range(len(frame)) if known.iloc[i]],
                                orientation="h", marker_color="#dddddd", name="trajectory length",
                                hovertemplate="%{y}<br>%{x} steps<extra></extra>"))
    for i, (method, group) in enumerate(frame[frame["step"].notna()].groupby("method", sort=True)):
        figure.add_trace(go.Scatter(x=group["step"], y=[f"{m} · {e}" for m, e in zip(group["method"],
                                                                                       group["episode_id"], strict=True)],
                                    mode="markers", marker={"symbol": "x", "size": 11, "color": _color(i)},
                                    name=f"{method}: first divergence",
                                    hovertemplate="%{y}<br>diverges at step %{x}<extra></extra>"))
    figure.update_layout(title="First divergence of each trajectory (open-loop drift)", xaxis_title="step",
                         height=max(240, 60 + 22 * len(frame)), margin={"t": 50, "b": 40, "l": 10},
                         yaxis={"categoryorder": "array", "categoryarray": labels[::-1]})
    return figure
