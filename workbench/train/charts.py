"""Plotly figures of EnvACE runs: role losses, rewards and advantages, rehearsal fidelity with drift, runs compared,
a sweep's heat map. Pure functions of data frames (tested without Streamlit)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import plotly.graph_objects as go

from worldsmith.envace import TrainingRunStore

__all__ = [
    "COMPARABLE",
    "alignment_figure",
    "compare_figure",
    "fidelity_figure",
    "loss_figure",
    "probe_label",
    "reward_figure",
    "sweep_heatmap",
    "throughput_figure",
]

# metrics a comparison can overlay (those any run logs)
COMPARABLE = ("act_loss", "rehearse_loss", "loss", "reward", "reward_rehearse", "rehearsal_fidelity",
              "adv_mean", "tokens_per_s", "grad_norm", "pg_align_act", "pg_align_rehearse")
_LAYOUT = {"height": 320, "margin": {"l": 40, "r": 10, "t": 40, "b": 40}, "legend": {"orientation": "h", "y": -0.2}}


def _lines(frame: pd.DataFrame, columns: Mapping[str, str], title: str, *, dash: Mapping[str, str] | None = None
           ) -> go.Figure:
    figure = go.Figure()
    for column, name in columns.items():
        if column in frame and frame[column].notna().any():
            rows = frame[frame[column].notna()]
            figure.add_trace(go.Scatter(x=rows["step"], y=rows[column], mode="lines+markers", name=name,
                                        line={"dash": (dash or {}).get(column, "solid")}))
    figure.update_layout(title=title, xaxis_title="step", **_LAYOUT)
    return figure


def loss_figure(frame: pd.DataFrame) -> go.Figure:
    """Both roles' training losses per step (and the evaluation losses the probe logs, dotted)."""
    return _lines(frame, {"act_loss": "act", "rehearse_loss": "rehearse", "act_loss_eval": "act (held chunks)",
                          "rehearse_loss_eval": "rehearse (held chunks)"}, "Loss per role",
                  dash={"act_loss_eval": "dot", "rehearse_loss_eval": "dot"})


def reward_figure(frame: pd.DataFrame) -> go.Figure:
    """Task and rehearse rewards, and the mean advantage with its spread (GRPO runs)."""
    figure = _lines(frame, {"reward": "task reward (act)", "reward_rehearse": "rehearse reward"}, "Reward")
    if "adv_mean" in frame and frame["adv_mean"].notna().any():
        rows = frame[frame["adv_mean"].notna()]
        spread = rows["adv_std"] if "adv_std" in rows else None
        figure.add_trace(go.Scatter(x=rows["step"], y=rows["adv_mean"], mode="markers", name="advantage mean ± std",
                                    error_y={"type": "data", "array": spread.tolist()} if spread is not None else None))
    return figure


def alignment_figure(frame: pd.DataFrame) -> go.Figure:
    """Per role, the cosine between GRPO's gradient and the descent of that role's supervised loss
    (`grpo.log_alignment`): above zero, the policy gradient alone pulls the role toward the data."""
    figure = _lines(frame, {"pg_align_act": "act", "pg_align_rehearse": "rehearse"},
                    "GRPO gradient vs supervised descent (cosine)")
    figure.add_hline(y=0.0, line_dash="dot")
    figure.update_yaxes(range=[-1.02, 1.02])
    return figure


def probe_label(source: str | None, split: str | None) -> str:
    """What the probe's episodes were, truthfully (`TrainingRunStore.probe_split`: the provenance says the same)."""
    return TrainingRunStore.probe_split(source, split)


def fidelity_figure(frame: pd.DataFrame, threshold: float | None = None, probe: str = "probe episodes not recorded"
                    ) -> go.Figure:
    """The probe's rehearsal fidelity per probe step, titled with what it probed (`probe_label`); drift flagged in
    red, the switch threshold dashed."""
    figure = _lines(frame, {"rehearsal_fidelity": "fidelity", "fidelity_exact_match": "exact match",
                            "fidelity_edit_similarity": "edit similarity"}, f"Rehearsal fidelity ({probe})",
                    dash={"fidelity_exact_match": "dot", "fidelity_edit_similarity": "dash"})
    if "drift" in frame and "rehearsal_fidelity" in frame:
        drifted = frame[frame["drift"].fillna(False).astype(bool) & frame["rehearsal_fidelity"].notna()]
        if not drifted.empty:
            figure.add_trace(go.Scatter(x=drifted["step"], y=drifted["rehearsal_fidelity"], mode="markers",
                                        name="drift", marker={"color": "red", "size": 12, "symbol": "x"}))
    if threshold is not None:
        figure.add_hline(y=threshold, line_dash="dash", annotation_text="switch threshold")
    figure.update_yaxes(range=[0, 1.02])
    return figure


def throughput_figure(frame: pd.DataFrame) -> go.Figure:
    return _lines(frame, {"tokens_per_s": "tokens/s"}, "Training throughput")


def compare_figure(frames: Mapping[str, pd.DataFrame], metric: str) -> go.Figure:
    """One metric of several runs over their steps."""
    figure = go.Figure()
    for name, frame in frames.items():
        if metric in frame and frame[metric].notna().any():
            rows = frame[frame[metric].notna()]
            figure.add_trace(go.Scatter(x=rows["step"], y=rows[metric], mode="lines+markers", name=name))
    figure.update_layout(title=f"{metric} by run", xaxis_title="step", yaxis_title=metric, **_LAYOUT)
    return figure


def sweep_heatmap(table: pd.DataFrame, x: str, y: str, value: str) -> go.Figure:
    """Mean `value` of the trials at each (x, y) pair of knob values (failed trials left out)."""
    rows = table[table[value].notna()] if value in table else table.iloc[0:0]
    grid = rows.pivot_table(index=y, columns=x, values=value, aggfunc="mean") if not rows.empty else pd.DataFrame()
    figure = go.Figure(go.Heatmap(
        z=grid.to_numpy().tolist() if not grid.empty else [[]],
        x=[str(v) for v in grid.columns], y=[str(v) for v in grid.index],
        colorscale="Viridis", colorbar={"title": value},
        text=[[("" if pd.isna(v) else f"{v:.3g}") for v in row] for row in grid.to_numpy()] if not grid.empty else None,
        texttemplate="%{text}",
    ))
    figure.update_layout(title=f"{value} by {x} × {y}", xaxis_title=x, yaxis_title=y,
                         height=360, margin={"l": 60, "r": 10, "t": 40, "b": 40})
    return figure
