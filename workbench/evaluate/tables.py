"""Tables the Evaluate page shows, computed from a run's report (an `EvalReport`) and records (pure pandas).

Intervals always come from the report (the library's paired bootstrap over trajectories); these
functions only reshape them. Where the page needs a number the report lacks (a judge dimension,
a group of records), it is computed here and labelled as what it is.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from worldsmith.evals import SMALL_SAMPLE, EvalReport, MetricCell, PairCell, metric_names, misses, small_sample_note

__all__ = [
    "METRIC_COLUMNS",
    "metric_columns",
    "action_kind",
    "model_labels",
    "with_models",
    "compare_runs_frame",
    "cost_frame",
    "divergence_frame",
    "dropped_frame",
    "error_groups",
    "fidelity_frame",
    "folds_frame",
    "format_interval",
    "heatmap_frame",
    "knowable_frame",
    "leaderboard_frame",
    "leaderboard_table",
    "pairs_frame",
    "protocols_frame",
    "small_sample_caption",
    "w2r_frame",
    "win_lose_frame",
    "wrong_mask",
]

METRIC_COLUMNS = ["exact_match", "edit_similarity", "token_f1", "json_f1", "judge_total"]


def metric_columns() -> list[str]:
    """The records' metric columns: the built-ins, then every metric registered with `@metric` (a plug-in)."""
    return [*METRIC_COLUMNS, *(name for name in metric_names() if name not in METRIC_COLUMNS)]
NOVELTY_METRICS = ["exact_match_knowable", "exact_match_knowable_tf", "novel_share", "novel_share_tf"]  # report-only
PROTOCOL_LABELS = {"live": "open loop, live (real environment)", "drift": "open loop (drift)",
                   "next-obs": "teacher forced (next-obs)", "w2r": "world to real (w2r)"}
KEY = ["protocol", "env_id", "episode_id", "turn"]  # one prediction of one method


def format_interval(cell: MetricCell | None, digits: int = 3) -> str:
    """`mean [low, high]` for a report cell; '' when the cell is missing. A cell resampled over fewer than
    `SMALL_SAMPLE` trajectories says so: `mean [low, high] (only N trajectories)`."""
    if cell is None or cell.mean is None:
        return ""
    if cell.low is None or cell.high is None:
        return f"{cell.mean:.{digits}f}"
    note = small_sample_note(cell.trajectories)
    return f"{cell.mean:.{digits}f} [{cell.low:.{digits}f}, {cell.high:.{digits}f}]" + (f" ({note})" if note else "")


def _metrics_of(methods: dict[str, dict[str, MetricCell]]) -> list[str]:
    """Metrics any method has, in the contract's order (exact match first), others after by name."""
    seen = {metric for cells in methods.values() for metric in cells}
    order = [METRIC_COLUMNS[0], *NOVELTY_METRICS, *METRIC_COLUMNS[1:], "w2r_success", "real_success"]
    rank = {metric: i for i, metric in enumerate(order)}
    return sorted(seen, key=lambda metric: (rank.get(metric, len(rank)), metric))


def leaderboard_frame(methods: dict[str, dict[str, MetricCell]], metrics: list[str] | None = None) -> pd.DataFrame:
    """Long frame: one row per (method, metric) with mean, low, high, n (the report's intervals)."""
    metrics = metrics or _metrics_of(methods)
    rows = []
    for method, cells in methods.items():
        for metric in metrics:
            cell = cells.get(metric)
            if cell is not None and cell.mean is not None:
                rows.append({"method": method, "metric": metric, "mean": float(cell.mean), "low": _float(cell.low),
                             "high": _float(cell.high), "n": cell.n, "trajectories": cell.trajectories})
    return pd.DataFrame(rows, columns=["method", "metric", "mean", "low", "high", "n", "trajectories"])


def leaderboard_table(methods: dict[str, dict[str, MetricCell]], metrics: list[str] | None = None) -> pd.DataFrame:
    """Wide table methods × metrics of `mean [low, high]`, best first by the first metric, with n."""
    long = leaderboard_frame(methods, metrics)
    if long.empty:
        return pd.DataFrame(columns=["method"])
    order = list(dict.fromkeys(long["metric"]))
    long["cell"] = [format_interval(MetricCell(mean=m, low=lo, high=hi, trajectories=_count(tr)))
                    for m, lo, hi, tr in zip(long["mean"], long["low"], long["high"], long["trajectories"],
                                             strict=True)]
    table = long.pivot(index="method", columns="metric", values="cell").reindex(columns=order).fillna("")
    means = long.pivot(index="method", columns="metric", values="mean")
    table = table.loc[means[order[0]].sort_values(ascending=False, na_position="last").index]
    counts = long.groupby("method")["n"].max()
    table.insert(0, "n", counts.reindex(table.index))
    if long["trajectories"].notna().any():  # reports written before trajectories were counted have none
        table["trajectories"] = long.groupby("method")["trajectories"].max().reindex(table.index)
    return table.reset_index()


def small_sample_caption(methods: dict[str, dict[str, MetricCell]]) -> str | None:
    """What to say under a table whose intervals rest on fewer than `SMALL_SAMPLE` trajectories (None: none do)."""
    counts = [int(cell.trajectories) for cells in methods.values() for cell in cells.values()
              if cell.trajectories is not None and small_sample_note(cell.trajectories)]
    if not counts:
        return None
    return (f"Small sample: intervals marked \"only N trajectories\" were resampled over fewer than {SMALL_SAMPLE} "
            f"trajectories (as few as {min(counts)}); they are rough, and a difference between methods may not hold up.")


def pairs_frame(pairs: dict[str, dict[str, PairCell]], metric: str | None = None) -> pd.DataFrame:
    """One row per (pair, metric): the mean paired difference and its interval; `significant` when 0 is outside."""
    rows = []
    for pair, cells in pairs.items():
        for name, cell in cells.items():
            if (metric is not None and name != metric) or cell.mean_diff is None:
                continue
            low, high = _float(cell.low), _float(cell.high)
            rows.append({"pair": pair, "metric": name, "mean_diff": float(cell.mean_diff), "low": low,
                         "high": high, "n": cell.n,
                         "significant": bool(low is not None and high is not None and (low > 0 or high < 0)),
                         "trajectories": cell.trajectories, "sample": small_sample_note(cell.trajectories)})
    return pd.DataFrame(rows, columns=["pair", "metric", "mean_diff", "low", "high", "n", "significant",
                                       "trajectories", "sample"])


def knowable_frame(report: EvalReport) -> pd.DataFrame:
    """Exact match on all turns and on the knowable ones, and the novel share, per scope (pooled, each environment)
    and method; empty for a run without novelty flags (made before them, or W2R). An open-loop protocol's knowable
    turns are its own (open loop); the teacher-forced ones are beside them, labelled."""
    tf = any("novel_share_tf" in cells for cells in report.methods.values())
    own = "open loop" if report.protocol in ("drift", "live") else "teacher forced"
    columns = ["scope", "method", "exact match (all)", f"exact match (knowable, {own})", "novel share",
               *(["exact match (knowable, teacher forced)", "novel share (teacher forced)"] if tf else []), "n"]
    scopes = [("all environments", report.scope()),
              *((f"env: {env}", block) for env, block in sorted(report.per_env.items()))]
    rows = [{"scope": scope, "method": method, "exact match (all)": format_interval(cells.get("exact_match")),
             f"exact match (knowable, {own})": format_interval(cells.get("exact_match_knowable")),
             "novel share": format_interval(cells.get("novel_share")),
             **({"exact match (knowable, teacher forced)": format_interval(cells.get("exact_match_knowable_tf")),
                 "novel share (teacher forced)": format_interval(cells.get("novel_share_tf"))} if tf else {}),
             "n": exact.n if (exact := cells.get("exact_match")) is not None else None}
            for scope, block in scopes for method, cells in block.methods.items() if "novel_share" in cells]
    return pd.DataFrame(rows, columns=columns)


def protocols_frame(report: EvalReport) -> pd.DataFrame:
    """Every protocol of the run side by side, open loop first: per method exact match on all turns and on the
    knowable ones (the protocol's definition, and teacher forced), and the novel share; empty for one protocol."""
    columns = ["protocol", "method", "exact match", "exact match (knowable)", "exact match (knowable, tf)",
               "novel share", "n"]
    rows = [{"protocol": PROTOCOL_LABELS.get(protocol, protocol), "method": method,
             "exact match": format_interval(cells.get("exact_match")),
             "exact match (knowable)": format_interval(cells.get("exact_match_knowable")),
             "exact match (knowable, tf)": format_interval(cells.get("exact_match_knowable_tf")
                                                           or (cells.get("exact_match_knowable")
                                                               if protocol == "next-obs" else None)),
             "novel share": format_interval(cells.get("novel_share")),
             "n": exact.n if (exact := cells.get("exact_match")) is not None else None}
            for protocol in report.protocols if len(report.protocols) > 1
            for method, cells in report.block(protocol).methods.items()]
    return pd.DataFrame(rows, columns=columns)


def fidelity_frame(report: EvalReport) -> pd.DataFrame:
    """fidelity@t of a drift run, long: method, t, mean, low, high, n."""
    rows = [{"method": method, "t": point.t, "mean": _float(point.mean), "low": _float(point.low),
             "high": _float(point.high), "n": point.n, "trajectories": point.trajectories}
            for method, points in report.fidelity_at_t.items() for point in points]
    return pd.DataFrame(rows, columns=["method", "t", "mean", "low", "high", "n", "trajectories"])


def folds_frame(report: EvalReport) -> pd.DataFrame:
    """A cross-fitted run's folds: each fold's book, what it was built from and evaluated on; empty otherwise."""
    columns = ["fold", "book", "version", "built from (episodes)", "evaluated episodes", "families", "leakage"]
    rows = [{"fold": f.fold, "book": f.book, "version": f.book_version,
             "built from (episodes)": f.construction_episodes, "evaluated episodes": f.episodes,
             "families": f.families, "leakage": "ok" if f.leakage_ok else "leaked"}
            for f in report.folds]
    return pd.DataFrame(rows, columns=columns)


def dropped_frame(report: EvalReport) -> pd.DataFrame:
    """Episodes a run left out because they leak (`--drop-leaked`), each with why; empty when none were."""
    dropped = report.leakage.dropped
    rows = [{"episode_id": episode, "why": "; ".join(why)} for episode, why in (dropped.episodes if dropped else {}).items()]
    return pd.DataFrame(rows, columns=["episode_id", "why"])


def cost_frame(report: EvalReport) -> pd.DataFrame:
    """Mean cost per record and method (model calls, tokens, latency, money), with the model each method used."""
    rows = [{"method": method, **row.model_dump(exclude_unset=True)} for method, row in report.cost.items()]
    return with_models(pd.DataFrame(rows), report)


def model_labels(report: EvalReport) -> dict[str, str]:
    """Per method the model it used as one label: the spec (and what it was trained on, where its folder says) or
    "none"; an older run's, inferred from its configuration, says so."""
    return {method: used.model + (f" (trained on: {used.trained_on})" if used.trained_on else "")
            + ("" if used.recorded else " (inferred)") for method, used in report.method_models().items()}


def with_models(table: pd.DataFrame, report: EvalReport) -> pd.DataFrame:
    """`table` (a `method` column) with a `model` column beside it: which model each row's method used."""
    if table.empty or "method" not in table.columns:
        return table
    labels = model_labels(report)
    out = table.copy()
    out.insert(list(out.columns).index("method") + 1, "model", out["method"].map(lambda m: labels.get(m, "none")))
    return out


def _ratio_cell(mean: float | None, low: float | None, high: float | None, trajectories: int | None) -> str:
    return format_interval(MetricCell(mean=mean, low=low, high=high, trajectories=trajectories))


def w2r_frame(report: EvalReport) -> pd.DataFrame:
    """World-to-real success per policy and method: real, W2R and consistency (W2R / real), each `mean [low, high]`.

    Accepts the report's nested shape (`w2r[policy].methods[method]`) and the flat one (a policy's
    numbers at its top level, for a single method).
    """
    rows = []
    for policy, entry in report.w2r.items():
        for method, numbers in entry.by_method().items():
            rows.append({"policy": policy, "method": method,
                         "real": _ratio_cell(entry.real, entry.real_low, entry.real_high, entry.trajectories),
                         "w2r": _ratio_cell(numbers.w2r, numbers.w2r_low, numbers.w2r_high, numbers.trajectories),
                         "consistency": _ratio_cell(numbers.consistency, numbers.consistency_low,
                                                    numbers.consistency_high, numbers.trajectories),
                         "n": numbers.n if numbers.n is not None else entry.n, "sim_steps": numbers.sim_steps})
    return pd.DataFrame(rows, columns=["policy", "method", "real", "w2r", "consistency", "n", "sim_steps"])


def win_lose_frame(records: pd.DataFrame, winner: str, loser: str, metric: str, margin: float = 0.0) -> pd.DataFrame:
    """Predictions where `winner` scores above `loser` by more than `margin` on the same record.

    Records are matched on (protocol, env, episode, turn); W2R rows (turn -1) have no metric and drop out.
    """
    columns = [*KEY, "action", "reference", f"prediction_{winner}", f"prediction_{loser}", f"{metric}_{winner}",
               f"{metric}_{loser}", "difference"]
    if records.empty or metric not in records.columns or winner == loser:
        return pd.DataFrame(columns=columns)
    keep = [*KEY, "action", "reference", "prediction", metric]
    a = records.loc[records["method"] == winner, keep].dropna(subset=[metric])
    b = records.loc[records["method"] == loser, [*KEY, "prediction", metric]].dropna(subset=[metric])
    merged = a.merge(b, on=KEY, suffixes=(f"_{winner}", f"_{loser}"))
    merged["difference"] = merged[f"{metric}_{winner}"] - merged[f"{metric}_{loser}"]
    merged = merged[merged["difference"] > margin]
    return merged.sort_values(["difference", "episode_id", "turn"], ascending=[False, True, True])[columns] \
        .reset_index(drop=True)


def action_kind(action: Any) -> str:
    """The action's name: a JSON object's `name`, a call's function, else the first word ('go to desk 1' -> 'go')."""
    return misses.action_name(action)


def wrong_mask(records: pd.DataFrame, metric: str, threshold: float) -> pd.Series:
    """Scored records whose `metric` is below `threshold` (exact_match < 1 means 'not exactly right')."""
    return misses.wrong_mask(records, metric, threshold)


def error_groups(records: pd.DataFrame, metric: str, threshold: float, by: str, *,
                 resamples: int | None = None) -> pd.DataFrame:
    """Errors per action name (`by='action'`), per answer source ('source'), per rule the prediction used ('rule':
    one that used several counts for each; one no rule answered under '(no rule: <source>)') or per flag ('flag':
    unseen action, novel, fallback, error), as `worldsmith.evals.misses.miss_groups` counts them; with
    `resamples`, each row's 95% intervals (cluster bootstrap over episodes)."""
    return misses.miss_groups(records, metric, threshold, by, action_of=action_kind, resamples=resamples)


def heatmap_frame(records: pd.DataFrame, metric: str, max_steps: int = 40) -> pd.DataFrame:
    """Mean `metric` by action name (rows) × step (columns); steps past `max_steps` share the last column."""
    scored = records[(records[metric].notna()) & (records["turn"] >= 0)] if metric in records.columns else records
    if scored.empty or metric not in scored.columns:
        return pd.DataFrame()
    frame = pd.DataFrame({"action": scored["action"].map(action_kind).to_numpy(),
                          "step": scored["turn"].clip(upper=max_steps).astype(int).to_numpy(),
                          "score": scored[metric].to_numpy(float)})
    table = frame.pivot_table(index="action", columns="step", values="score", aggfunc="mean")
    order = frame.groupby("action").size().sort_values(ascending=False).index
    return table.reindex(order)


def divergence_frame(report: EvalReport | None, records: pd.DataFrame) -> pd.DataFrame:
    """First-divergence step of every drifted trajectory per method (report first, else the records' `diverged`).

    Rows: method, episode_id, step (None when the trajectory never diverged), length (turns recorded).
    """
    lengths: dict[tuple[str, str], int] = {}
    if not records.empty and {"method", "episode_id", "turn"} <= set(records.columns):
        for (method, episode), turns in records[records["turn"] >= 0].groupby(["method", "episode_id"])["turn"]:
            lengths[(str(method), str(episode))] = int(turns.max()) + 1
    rows: list[dict[str, Any]] = []
    from_report = report.first_divergence if report is not None else {}
    if from_report:
        for method, episodes in from_report.items():
            for episode, step in episodes.items():
                rows.append({"method": method, "episode_id": episode, "step": None if step is None else int(step),
                             "length": lengths.get((method, episode))})
    elif "diverged" in records.columns:
        drift = records[(records["turn"] >= 0) & records["diverged"].notna()]
        if "protocol" in drift.columns:
            drift = drift[drift["protocol"] == "drift"]
        for (method, episode), group in drift.groupby(["method", "episode_id"]):
            hits = group.loc[group["diverged"].fillna(False).astype(bool), "turn"]
            rows.append({"method": method, "episode_id": episode, "step": int(hits.min()) if len(hits) else None,
                         "length": lengths.get((str(method), str(episode)))})
    return pd.DataFrame(rows, columns=["method", "episode_id", "step", "length"])


def compare_runs_frame(a: EvalReport, b: EvalReport, metrics: list[str] | None = None) -> pd.DataFrame:
    """Methods × metrics present in both runs' reports: A and B as `mean [low, high]`, and B − A of the means.

    The difference is of the pooled means only: the two runs may hold different records, so no
    paired interval is claimed for it.
    """
    left, right = leaderboard_frame(a.methods, metrics), leaderboard_frame(b.methods, metrics)
    merged = left.merge(right, on=["method", "metric"], how="outer", suffixes=("_a", "_b"))
    rows = []
    for _, row in merged.iterrows():
        rows.append({"method": row["method"], "metric": row["metric"],
                     "run A": _ratio_cell(row["mean_a"], row["low_a"], row["high_a"], None)
                     if pd.notna(row["mean_a"]) else "",
                     "run B": _ratio_cell(row["mean_b"], row["low_b"], row["high_b"], None)
                     if pd.notna(row["mean_b"]) else "",
                     "B − A": float(row["mean_b"] - row["mean_a"])
                     if pd.notna(row["mean_a"]) and pd.notna(row["mean_b"]) else None,
                     "n A": row["n_a"], "n B": row["n_b"]})
    return pd.DataFrame(rows, columns=["method", "metric", "run A", "run B", "B − A", "n A", "n B"])


def _count(value: Any) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def _float(value: Any) -> float | None:
    if value is None:
        return None
    try:
        result = float(value)
    except (TypeError, ValueError):
        return None
    return None if np.isnan(result) else result
