"""From records to the run's report: report.json (the run-store contract), report.md and plots/.

Every number in the report comes with its interval (the paired bootstrap over episodes) and its `n`;
pools are per environment and overall, and split by seen/unseen task. Next-obs and drift runs add
exact match on the knowable turns (those whose observation shows no novel value, `evals.novelty`)
and the novel share; records without the flag (older runs) are unknown and count in neither. Drift runs add fidelity@t,
the first divergence of every episode and done-step agreement; W2R runs add Real, W2R and their
ratio per policy and method. Costs are means per record. A cross-fitted run pools its folds' records
(the intervals resample episodes across folds) and lists the folds.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from worldsmith.evals.bootstrap import bootstrap_mean, bootstrap_ratio, small_sample_note, summarize
from worldsmith.evals.metrics import METRICS, metric_names
from worldsmith.evals.plots import Bar, Point, bars_figure, forest_figure, lines_figure
from worldsmith.util.atomic import atomic_write, atomic_write_json
from worldsmith.worldbook.leakage_report import LeakageReport

__all__ = ["COST_COLUMNS", "NOVELTY_METRICS", "REPORT_METRICS", "build_report", "write_report"]

NOVELTY_METRICS = ("exact_match_knowable", "novel_share")
REPORT_METRICS = (*METRICS, *NOVELTY_METRICS, "judge_total")
W2R_METRICS = ("w2r_success", "real_success")
COST_COLUMNS = ("model_calls", "prompt_tokens", "completion_tokens", "latency_s", "cost_usd")


def _num(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if not np.isfinite(value) else round(value, 6)


def _metric_frame(records: pd.DataFrame, protocol: str) -> tuple[pd.DataFrame, list[str]]:
    if protocol == "w2r":
        frame = records.copy()
        for column in W2R_METRICS:
            frame[column] = frame[column].map(lambda v: None if v is None or pd.isna(v) else float(bool(v)))
        return frame, [m for m in W2R_METRICS if frame[m].notna().any()]
    frame = _with_novelty(records)
    plugins = [m for m in metric_names() if m not in REPORT_METRICS]  # `@metric`s registered beyond the built-ins
    return frame, [m for m in (*REPORT_METRICS, *plugins) if m in frame and frame[m].notna().any()]


def _with_novelty(records: pd.DataFrame) -> pd.DataFrame:
    """Adds exact match on knowable turns (null on novel and unknown ones) and the novel share (null where unknown)."""
    if "novel" not in records:
        return records
    novel = records["novel"].map(lambda v: None if v is None or pd.isna(v) else float(bool(v))).astype(float)
    return records.assign(novel_share=novel, exact_match_knowable=records["exact_match"].where(novel == 0.0))


def _fidelity_at_t(records: pd.DataFrame, methods: list[str], metric: str, resamples: int, seed: int,
                   confidence: float) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for method in methods:
        rows = []
        mine = records[(records["method"] == method) & records[metric].notna()]
        for t, group in mine.groupby("turn", sort=True):
            interval = bootstrap_mean(group["episode_id"].tolist(), group[metric].astype(float).tolist(),
                                      resamples=resamples, seed=seed, confidence=confidence)
            rows.append({"t": int(t), "mean": _num(interval.mean), "low": _num(interval.low),
                         "high": _num(interval.high), "n": interval.n, "trajectories": interval.trajectories})
        out[method] = rows
    return out


def _first_divergence(records: pd.DataFrame, methods: list[str]) -> dict[str, dict[str, int | None]]:
    out: dict[str, dict[str, int | None]] = {}
    for method in methods:
        mine = records[records["method"] == method]
        out[method] = {}
        for episode_id, group in mine.groupby("episode_id", sort=False):
            diverged = group[group["diverged"].fillna(False).astype(bool)]
            out[method][str(episode_id)] = int(diverged["turn"].min()) if len(diverged) else None
    return out


def _done_agreement(records: pd.DataFrame, methods: list[str], resamples: int, seed: int,
                    confidence: float) -> dict[str, dict[str, Any]]:
    """Per method: the share of episodes where it first says done at the step the real episode ended."""
    out: dict[str, dict[str, Any]] = {}
    for method in methods:
        mine = records[records["method"] == method]
        episodes, agree = [], []
        for episode_id, group in mine.groupby("episode_id", sort=False):
            real = group[group["done_real"].fillna(False).astype(bool)]["turn"]
            pred = group[group["done_pred"].fillna(False).astype(bool)]["turn"]
            real_step = int(real.min()) if len(real) else None
            pred_step = int(pred.min()) if len(pred) else None
            episodes.append(episode_id)
            agree.append(1.0 if real_step == pred_step else 0.0)
        if agree:
            interval = bootstrap_mean(episodes, agree, resamples=resamples, seed=seed, confidence=confidence)
            out[method] = {"mean": _num(interval.mean), "low": _num(interval.low), "high": _num(interval.high),
                           "n": interval.n, "trajectories": interval.trajectories}
    return out


def _w2r(records: pd.DataFrame, methods: list[str], resamples: int, seed: int,
         confidence: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for policy, by_policy in records.groupby("policy", sort=False):
        usable = by_policy[by_policy["real_success"].notna() & by_policy["w2r_success"].notna()]
        if usable.empty:
            continue
        real = usable.drop_duplicates("episode_id")
        real_interval = bootstrap_mean(real["episode_id"].tolist(), real["real_success"].astype(float).tolist(),
                                       resamples=resamples, seed=seed, confidence=confidence)
        entry: dict[str, Any] = {"real": _num(real_interval.mean), "real_low": _num(real_interval.low),
                                 "real_high": _num(real_interval.high), "n": real_interval.n,
                                 "trajectories": real_interval.trajectories, "methods": {}}
        for method in methods:
            mine = usable[usable["method"] == method]
            if mine.empty:
                continue
            ids = mine["episode_id"].tolist()
            w2r = mine["w2r_success"].astype(float).tolist()
            real_values = mine["real_success"].astype(float).tolist()
            w = bootstrap_mean(ids, w2r, resamples=resamples, seed=seed, confidence=confidence)
            c = bootstrap_ratio(ids, w2r, real_values, resamples=resamples, seed=seed, confidence=confidence)
            entry["methods"][method] = {"w2r": _num(w.mean), "w2r_low": _num(w.low), "w2r_high": _num(w.high),
                                        "consistency": _num(c.mean), "consistency_low": _num(c.low),
                                        "consistency_high": _num(c.high), "n": w.n, "trajectories": w.trajectories,
                                        "sim_steps": _num(mine["sim_steps"].astype(float).mean())}
        if entry["methods"]:  # the first method's numbers at the top level (the contract's flat shape)
            first = next(iter(entry["methods"]))
            entry["method"] = first
            entry.update({k: v for k, v in entry["methods"][first].items()
                          if k not in ("n", "sim_steps", "trajectories")})
        out[str(policy)] = entry
    return out


def build_report(records: pd.DataFrame, *, run: str, protocol: str, fingerprint: str, config: dict[str, Any],
                 methods: list[str], judge: str | None = None, leakage: LeakageReport | None = None,
                 resamples: int = 10_000, seed: int = 0, confidence: float = 0.95,
                 fidelity_metric: str = "exact_match", extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """report.json's content for a run's records."""
    frame, metrics = _metric_frame(records, protocol)
    stats = {"resamples": resamples, "seed": seed, "confidence": confidence}

    def pool(subset: pd.DataFrame) -> dict[str, Any]:
        present = [m for m in methods if (subset["method"] == m).any()]
        block = summarize(subset, metrics=metrics, methods=present, resamples=resamples, seed=seed,
                          confidence=confidence)
        for entry in block["pairs"].values():  # every method has the same novel turns: their difference is no news
            entry.pop("novel_share", None)
        return block

    pooled = pool(frame)
    report: dict[str, Any] = {
        "run": run, "protocol": protocol, "fingerprint": fingerprint, "config": config, "judge": judge,
        "metrics": metrics, "methods": pooled["methods"], "pairs": pooled["pairs"],
        "per_env": {str(env): pool(group) for env, group in frame.groupby(frame["env_id"].fillna("(none)"), sort=True)},
        "seen_unseen": {label: pool(frame[frame["task_seen"].fillna(False).astype(bool) == flag])
                        for label, flag in (("seen", True), ("unseen", False))},
        "counts": {m: int((frame["method"] == m).sum()) for m in methods},
        "episodes": int(frame["episode_id"].nunique()) if len(frame) else 0,
        "errors": {m: int(frame[(frame["method"] == m)]["error"].notna().sum()) for m in methods},
        "cost": {m: {c: _num(frame[frame["method"] == m][c].astype(float).mean())
                     for c in COST_COLUMNS} for m in methods if (frame["method"] == m).any()},
        "leakage": leakage.to_json() if leakage is not None else {},
        "seeds": {"bootstrap": seed, "run": config.get("seed", seed)},
        "bootstrap": stats, "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if protocol == "drift":
        report["fidelity_metric"] = fidelity_metric
        report["fidelity_at_t"] = _fidelity_at_t(frame, methods, fidelity_metric, resamples, seed, confidence)
        report["first_divergence"] = _first_divergence(frame, methods)
        report["done_agreement"] = _done_agreement(frame, methods, resamples, seed, confidence)
    if protocol == "w2r":
        report["w2r"] = _w2r(frame, methods, resamples, seed, confidence)
    if judge and protocol != "w2r":
        judged = frame["judge_total"]
        report["judge_stats"] = {"records": len(frame), "valid": int(judged.notna().sum()),
                                 "invalid": int(judged.isna().sum())}
    report.update(extra or {})
    return report


# ------------------------------------------------------------------------------------ markdown + plots
def _fmt(entry: dict[str, Any] | None, key: str = "mean") -> str:
    if not entry or entry.get(key) is None:
        return "–"
    low, high = entry.get("low"), entry.get("high")
    interval = f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
    note = small_sample_note(entry)
    return f"{entry[key]:.3f}{interval}" + (f" ({note})" if note else "")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(row) + " |" for row in rows), ""]


def _plots(report: dict[str, Any], folder: Path) -> dict[str, list[str]]:
    metrics = report.get("metrics", [])
    written: dict[str, list[str]] = {}
    bars = [Bar(group=metric, series=method, mean=entry[metric]["mean"], low=entry[metric]["low"],
                high=entry[metric]["high"])
            for method, entry in report["methods"].items() for metric in metrics
            if metric in entry and entry[metric]["mean"] is not None and metric not in ("judge_total", "novel_share")]
    if bars:
        written["leaderboard"] = bars_figure(folder, "leaderboard", bars, title="Methods (95% bootstrap intervals)",
                                             y_label="score (0-1)")
    judge = [Bar(group="judge_total", series=method, mean=entry["judge_total"]["mean"],
                 low=entry["judge_total"]["low"], high=entry["judge_total"]["high"])
             for method, entry in report["methods"].items()
             if "judge_total" in entry and entry["judge_total"]["mean"] is not None]
    if judge:
        written["judge"] = bars_figure(folder, "judge", judge, title="LLM judge total", y_label="0-100")
    forest = [Bar(group=pair, series=metric, mean=entry[metric]["mean_diff"], low=entry[metric]["low"],
                  high=entry[metric]["high"])
              for pair, entry in report["pairs"].items() for metric in metrics
              if metric in entry and entry[metric]["mean_diff"] is not None and metric != "judge_total"]
    if forest:
        written["pairs"] = forest_figure(folder, "pairs", forest, title="Paired differences A - B (95% intervals)",
                                         x_label="mean paired difference")
    if report.get("fidelity_at_t"):
        points = [Point(series=method, x=row["t"], mean=row["mean"], low=row["low"], high=row["high"])
                  for method, rows in report["fidelity_at_t"].items() for row in rows if row["mean"] is not None]
        if points:
            written["fidelity_at_t"] = lines_figure(folder, "fidelity_at_t", points,
                                                    title=f"Open-loop fidelity@t ({report.get('fidelity_metric')})",
                                                    x_label="step t", y_label=report.get("fidelity_metric", ""))
    if report.get("w2r"):
        w2r_bars = []
        for policy, entry in report["w2r"].items():
            w2r_bars.append(Bar(group=policy, series="Real", mean=entry["real"], low=entry["real_low"],
                                high=entry["real_high"]))
            for method, numbers in entry["methods"].items():
                w2r_bars.append(Bar(group=policy, series=f"W2R {method}", mean=numbers["w2r"],
                                    low=numbers["w2r_low"], high=numbers["w2r_high"]))
        written["w2r"] = bars_figure(folder, "w2r", [b for b in w2r_bars if b.mean is not None],
                                     title="Success: Real vs world-to-real", y_label="success rate")
    return written


def _knowable(report: dict[str, Any]) -> list[str]:
    """Exact match on all turns and on the knowable ones, and the novel share, pooled and per environment."""
    scopes = [("all", report), *report["per_env"].items()] if len(report["per_env"]) > 1 else [("all", report)]
    rows = [[scope, method, *(_fmt(block["methods"].get(method, {}).get(metric))
                              for metric in ("exact_match", *NOVELTY_METRICS))]
            for scope, block in scopes for method in report["counts"] if block["methods"].get(method)]
    return ["## Knowable turns", "",
            "A turn is novel when its observation shows a value (number, id, quoted string, JSON leaf, named entity) "
            "seen neither earlier in its episode nor in the book's evidence: no simulator could know it.", "",
            *_table(["environment", "method", "exact match (all)", "exact match (knowable)", "novel share"], rows)]


def _header(report: dict[str, Any]) -> list[str]:
    """The run in a few lines: protocol, books, dataset, methods, models, intervals, leakage."""
    config = report["config"]
    dropped = report["leakage"].get("dropped")
    books = (f"cross-fitted, {config['folds']} folds by trajectory family (each fold's book built from the others)"
             if config.get("folds") else f"worldbook `{config.get('book')}@{config.get('book_version')}`")
    return [f"# Evaluation run `{report['run']}`", "",
            f"- protocol: **{report['protocol']}**; {books}; "
            f"dataset `{config.get('dataset')}`" + (f" split `{config['split']}`" if config.get("split") else ""),
            f"- methods: {', '.join(report['counts'])}; episodes: {report['episodes']}; "
            f"records per method: {', '.join(f'{m} {n}' for m, n in report['counts'].items())}",
            f"- model: `{config.get('llm') or 'none'}`; judge: `{report.get('judge') or 'none'}`",
            f"- intervals: 95% paired bootstrap over episodes, {report['bootstrap']['resamples']} resamples, "
            f"seed {report['bootstrap']['seed']}; fingerprint `{report['fingerprint'][:16]}`",
            f"- leakage check: {'ok' if report['leakage'].get('ok') else 'see report.json'}"
            + (f" after dropping {dropped['count']} leaked episodes (below)" if dropped else "")
            + f" ({report['leakage'].get('target_turns', 0)} target turns)", ""]


def _folds(report: dict[str, Any]) -> list[str]:
    if not report.get("folds"):
        return []
    return ["## Folds", "",
            *_table(["fold", "book", "built from (episodes)", "evaluated episodes", "families", "leakage"],
                    [[str(f["fold"]), f"`{f['book']}@{f['book_version']}`", str(f["construction_episodes"]),
                      str(f["episodes"]), str(f["families"]), "ok" if f["leakage_ok"] else "leaked"]
                     for f in report["folds"]])]


def _methods(report: dict[str, Any], plots: dict[str, list[str]]) -> list[str]:
    """The methods' table and the paired differences, with their plots."""
    metrics = report.get("metrics", [])
    lines = ["## Methods", "",
             *_table(["method", *metrics], [[m, *(_fmt(entry.get(x)) for x in metrics)]
                                            for m, entry in report["methods"].items()])]
    if "leaderboard" in plots:
        lines += ["![leaderboard](plots/leaderboard.png) ([interactive](plots/leaderboard.html))", ""]
    if "judge" in plots:
        lines += ["![judge](plots/judge.png)", ""]
    if report["pairs"]:
        lines += ["## Paired differences (A - B, on the records both have)", ""]
        lines += _table(["pair", *metrics], [[p, *(_fmt(entry.get(x), "mean_diff") for x in metrics)]
                                              for p, entry in report["pairs"].items()])
        if "pairs" in plots:
            lines += ["![pairs](plots/pairs.png) ([interactive](plots/pairs.html))", ""]
    return lines


def _scopes(report: dict[str, Any]) -> list[str]:
    """The headline metric per environment and per seen/unseen task, and the knowable turns."""
    metrics = report.get("metrics", [])
    headline = metrics[0] if metrics else None
    methods = list(report["counts"])
    lines: list[str] = []
    if headline and len(report["per_env"]) > 1:
        lines += [f"## Per environment ({headline})", ""]
        lines += _table(["environment", *methods],
                        [[env, *(_fmt(block["methods"].get(m, {}).get(headline)) for m in methods)]
                         for env, block in report["per_env"].items()])
    if "novel_share" in metrics:
        lines += _knowable(report)
    if headline and any(block["methods"] for block in report["seen_unseen"].values()):
        lines += [f"## Seen / unseen tasks ({headline})", ""]
        lines += _table(["tasks", *methods], [[label, *(_fmt(block["methods"].get(m, {}).get(headline))
                                                         for m in methods)]
                                               for label, block in report["seen_unseen"].items()])
    return lines


def _drift(report: dict[str, Any], plots: dict[str, list[str]]) -> list[str]:
    if not report.get("fidelity_at_t"):
        return []
    lines = ["## Open-loop drift", "", f"Fidelity metric: `{report['fidelity_metric']}`.", ""]
    rows = []
    for method, diverged in report["first_divergence"].items():
        steps = [v for v in diverged.values() if v is not None]
        rows.append([method, f"{len(steps)}/{len(diverged)}",
                     f"{np.median(steps):.1f}" if steps else "–", _fmt(report["done_agreement"].get(method))])
    lines += _table(["method", "episodes that diverge", "median first divergence", "done-step agreement"], rows)
    if "fidelity_at_t" in plots:
        lines += ["![fidelity@t](plots/fidelity_at_t.png) ([interactive](plots/fidelity_at_t.html))", ""]
    return lines


def _world_to_real(report: dict[str, Any], plots: dict[str, list[str]]) -> list[str]:
    if not report.get("w2r"):
        return []
    rows = []
    for policy, entry in report["w2r"].items():
        for method, numbers in entry["methods"].items():
            rows.append([policy, method, _fmt({"mean": entry["real"], "low": entry["real_low"],
                                               "high": entry["real_high"]}),
                         _fmt({"mean": numbers["w2r"], "low": numbers["w2r_low"], "high": numbers["w2r_high"]}),
                         _fmt({"mean": numbers["consistency"], "low": numbers["consistency_low"],
                               "high": numbers["consistency_high"]}), str(numbers["n"])])
    lines = ["## World to real", "", *_table(["policy", "method", "Real", "W2R", "W2R / Real", "n"], rows)]
    if "w2r" in plots:
        lines += ["![w2r](plots/w2r.png)", ""]
    return lines


def _footer(report: dict[str, Any]) -> list[str]:
    """Excluded and dropped episodes, costs, the judge's valid verdicts and records with errors."""
    lines: list[str] = []
    dialogue = (report.get("excluded") or {}).get("dialogue_only")
    if dialogue:
        lines += [f"Excluded before the run: {dialogue} dialogue-only episodes (messages, no tool turn to predict).", ""]
    dropped = report["leakage"].get("dropped")
    if dropped:
        lines += ["## Dropped episodes (leaked)", ""]
        lines += _table(["episode", "why"], [[f"`{episode}`", "; ".join(why)]
                                             for episode, why in dropped["episodes"].items()])
    lines += ["## Cost (mean per record)", ""]
    lines += _table(["method", *COST_COLUMNS], [[m, *(f"{v:.4g}" if v is not None else "–" for v in row.values())]
                                                 for m, row in report["cost"].items()])
    if report.get("judge_stats"):
        stats = report["judge_stats"]
        lines += [f"Judge `{report['judge']}`: {stats['valid']} valid verdicts, {stats['invalid']} invalid "
                  f"(null scores) of {stats['records']} records.", ""]
    if any(report["errors"].values()):
        lines += ["Records with errors: " + ", ".join(f"{m} {n}" for m, n in report["errors"].items() if n), ""]
    return lines


def _markdown(report: dict[str, Any], plots: dict[str, list[str]]) -> str:
    return "\n".join([*_header(report), *_folds(report), *_methods(report, plots), *_scopes(report),
                      *_drift(report, plots), *_world_to_real(report, plots), *_footer(report)])


def write_report(report: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Write report.json, plots/ and report.md into a run folder; returns the report with `plots` listed."""
    folder = Path(folder)
    plots = _plots(report, folder / "plots")
    report = {**report, "plots": {name: [f"plots/{f}" for f in files] for name, files in plots.items()}}
    atomic_write_json(folder / "report.json", report)
    with atomic_write(folder / "report.md", "w") as handle:
        handle.write(_markdown(report, plots))
    return report
