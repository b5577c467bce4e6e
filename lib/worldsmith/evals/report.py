"""From records to the run's report: report.json (the run-store contract), report.md and plots/.

Every number in the report comes with its interval (the paired bootstrap over episodes) and its `n`;
pools are per environment and overall, and split by seen/unseen task. Next-obs, drift and live runs add
exact match on the knowable turns (those whose observation shows no novel value, `evals.novelty`: the
protocol's own definition, open loop for drift and live) and the novel share; open-loop protocols add the
teacher-forced ones beside them (`exact_match_knowable_tf`, `novel_share_tf`) for comparison. Records without
the flag (older runs) are unknown and count in neither. Drift and live runs add fidelity@t,
the first divergence of every episode and done-step agreement; W2R runs add Real, W2R and their
ratio per policy and method.

A run of several protocols (by default drift and next-obs) reports each apart: the top level is the primary
protocol's (open loop first), exactly as a run of that protocol alone writes it, and `by_protocol` holds every
protocol's block (`protocols` lists them in order); report.md shows them side by side, then each in full. Costs are means per record. A cross-fitted run pools its folds' records
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
from worldsmith.evals.misses import miss_headline
from worldsmith.evals.plots import Bar, Point, bars_figure, forest_figure, lines_figure
from worldsmith.evals.protocols import OPEN_LOOP
from worldsmith.evals.report_model import EvalReport
from worldsmith.evals.run_provenance import PROTOCOL_LABELS, eval_provenance
from worldsmith.llm.provenance import NumberProvenance
from worldsmith.util.atomic import atomic_write, atomic_write_json
from worldsmith.worldbook.leakage_report import LeakageReport

__all__ = ["COST_COLUMNS", "NOVELTY_METRICS", "PROTOCOL_LABELS", "REPORT_METRICS", "build_report", "write_report"]

NOVELTY_METRICS = ("exact_match_knowable", "novel_share", "exact_match_knowable_tf", "novel_share_tf")
SHARES = ("novel_share", "novel_share_tf")  # the same for every method: no pair differs on them
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
    frame = _with_novelty(records, protocol in OPEN_LOOP)
    plugins = [m for m in metric_names() if m not in REPORT_METRICS]  # `@metric`s registered beyond the built-ins
    return frame, [m for m in (*REPORT_METRICS, *plugins) if m in frame and frame[m].notna().any()]


def _with_novelty(records: pd.DataFrame, open_loop: bool) -> pd.DataFrame:
    """Adds exact match on knowable turns (null on novel and unknown ones) and the novel share (null where unknown);
    open loop also both by the teacher-forced definition (`novel_tf`), to compare."""
    def share(column: str) -> pd.Series:
        return records[column].map(lambda v: None if v is None or pd.isna(v) else float(bool(v))).astype(float)

    out = records
    if "novel" in records:
        novel = share("novel")
        out = out.assign(novel_share=novel, exact_match_knowable=records["exact_match"].where(novel == 0.0))
    if open_loop and "novel_tf" in records and records["novel_tf"].notna().any():
        novel_tf = share("novel_tf")
        out = out.assign(novel_share_tf=novel_tf, exact_match_knowable_tf=records["exact_match"].where(novel_tf == 0.0))
    return out


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


# The keys `_protocol_block` may write: a protocol's, not the run's.
_BLOCK_KEYS = frozenset({"metrics", "methods", "pairs", "per_env", "seen_unseen", "counts", "episodes", "errors", "cost",
                         "fidelity_metric", "fidelity_at_t", "first_divergence", "done_agreement", "w2r",
                         "judge_stats", "failures", "provenance"})


def _protocol_block(records: pd.DataFrame, protocol: str, methods: list[str], judge: str | None, resamples: int,
                    seed: int, confidence: float, fidelity_metric: str) -> dict[str, Any]:
    """Everything the report says about one protocol's records: methods, pairs, scopes, counts, costs and the
    protocol's own sections."""
    frame, metrics = _metric_frame(records, protocol)

    def pool(subset: pd.DataFrame) -> dict[str, Any]:
        present = [m for m in methods if (subset["method"] == m).any()]
        block = summarize(subset, metrics=metrics, methods=present, resamples=resamples, seed=seed,
                          confidence=confidence)
        for entry in block["pairs"].values():  # every method has the same novel turns: their difference is no news
            for name in SHARES:
                entry.pop(name, None)
        return block

    pooled = pool(frame)
    block: dict[str, Any] = {
        "metrics": metrics, "methods": pooled["methods"], "pairs": pooled["pairs"],
        "per_env": {str(env): pool(group) for env, group in frame.groupby(frame["env_id"].fillna("(none)"), sort=True)},
        "seen_unseen": {label: pool(frame[frame["task_seen"].fillna(False).astype(bool) == flag])
                        for label, flag in (("seen", True), ("unseen", False))},
        "counts": {m: int((frame["method"] == m).sum()) for m in methods},
        "episodes": int(frame["episode_id"].nunique()) if len(frame) else 0,
        "errors": {m: int(frame[(frame["method"] == m)]["error"].notna().sum()) for m in methods},
        "cost": {m: {c: _num(frame[frame["method"] == m][c].astype(float).mean())
                     for c in COST_COLUMNS} for m in methods if (frame["method"] == m).any()},
    }
    if protocol in OPEN_LOOP:
        block["fidelity_metric"] = fidelity_metric
        block["fidelity_at_t"] = _fidelity_at_t(frame, methods, fidelity_metric, resamples, seed, confidence)
        block["first_divergence"] = _first_divergence(frame, methods)
        block["done_agreement"] = _done_agreement(frame, methods, resamples, seed, confidence)
    if protocol == "w2r":
        block["w2r"] = _w2r(frame, methods, resamples, seed, confidence)
    else:  # the failure analysis's lead sentence per method: novel turns first, then the largest other cause
        block["failures"] = {m: miss_headline(frame, "exact_match", 1.0, method=m) for m in methods
                             if (frame["method"] == m).any()}
    if judge and protocol != "w2r":
        judged = frame["judge_total"]
        block["judge_stats"] = {"records": len(frame), "valid": int(judged.notna().sum()),
                                "invalid": int(judged.isna().sum())}
    return block


def build_report(records: pd.DataFrame, *, run: str, protocol: str, fingerprint: str, config: dict[str, Any],
                 methods: list[str], judge: str | None = None, leakage: LeakageReport | None = None,
                 resamples: int = 10_000, seed: int = 0, confidence: float = 0.95,
                 fidelity_metric: str = "exact_match", extra: dict[str, Any] | None = None,
                 protocols: list[str] | None = None) -> dict[str, Any]:
    """report.json's content for a run's records; with several `protocols` (the first, `protocol`, primary) each
    protocol's records are reported apart (`by_protocol`) and the top level is the primary's."""
    protocols = protocols or [protocol]
    blocks = {p: _protocol_block(records[records["protocol"] == p] if len(protocols) > 1 else records, p, methods,
                                 judge, resamples, seed, confidence, fidelity_metric) for p in protocols}
    models = (extra or {}).get("models") or {}  # without them, each method's model is unknown
    for p, block in blocks.items():  # what produced each method's numbers, per protocol
        block["provenance"] = {
            m: eval_provenance(run, config, m, p, model=(models.get(m) or {}).get("model"),
                               trained_on=(models.get(m) or {}).get("trained_on"), n=block["counts"].get(m),
                               episodes=block["episodes"]).model_dump(mode="json", exclude_defaults=True)
            for m in methods}
    report: dict[str, Any] = {
        "run": run, "protocol": protocols[0], "fingerprint": fingerprint, "config": config, "judge": judge,
        **blocks[protocols[0]],
        "leakage": leakage.to_json() if leakage is not None else {},
        "seeds": {"bootstrap": seed, "run": config.get("seed", seed)},
        "bootstrap": {"resamples": resamples, "seed": seed, "confidence": confidence},
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if len(protocols) > 1:
        report["protocols"] = protocols
        report["by_protocol"] = blocks
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


def _plots(report: dict[str, Any], folder: Path, prefix: str = "") -> dict[str, list[str]]:
    """The report's figures, each file named `prefix` + its name (a secondary protocol's are prefixed)."""
    metrics = report.get("metrics", [])
    written: dict[str, list[str]] = {}
    bars = [Bar(group=metric, series=method, mean=entry[metric]["mean"], low=entry[metric]["low"],
                high=entry[metric]["high"])
            for method, entry in report["methods"].items() for metric in metrics
            if metric in entry and entry[metric]["mean"] is not None and metric not in ("judge_total", *SHARES)]
    if bars:
        written["leaderboard"] = bars_figure(folder, f"{prefix}leaderboard", bars, title="Methods (95% bootstrap intervals)",
                                             y_label="score (0-1)")
    judge = [Bar(group="judge_total", series=method, mean=entry["judge_total"]["mean"],
                 low=entry["judge_total"]["low"], high=entry["judge_total"]["high"])
             for method, entry in report["methods"].items()
             if "judge_total" in entry and entry["judge_total"]["mean"] is not None]
    if judge:
        written["judge"] = bars_figure(folder, f"{prefix}judge", judge, title="LLM judge total", y_label="0-100")
    forest = [Bar(group=pair, series=metric, mean=entry[metric]["mean_diff"], low=entry[metric]["low"],
                  high=entry[metric]["high"])
              for pair, entry in report["pairs"].items() for metric in metrics
              if metric in entry and entry[metric]["mean_diff"] is not None and metric != "judge_total"]
    if forest:
        written["pairs"] = forest_figure(folder, f"{prefix}pairs", forest, title="Paired differences A - B (95% intervals)",
                                         x_label="mean paired difference")
    if report.get("fidelity_at_t"):
        points = [Point(series=method, x=row["t"], mean=row["mean"], low=row["low"], high=row["high"])
                  for method, rows in report["fidelity_at_t"].items() for row in rows if row["mean"] is not None]
        if points:
            written["fidelity_at_t"] = lines_figure(folder, f"{prefix}fidelity_at_t", points,
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
        written["w2r"] = bars_figure(folder, f"{prefix}w2r", [b for b in w2r_bars if b.mean is not None],
                                     title="Success: Real vs world-to-real", y_label="success rate")
    return written


def _knowable(report: dict[str, Any]) -> list[str]:
    """Exact match on all turns and on the knowable ones, and the novel share, pooled and per environment; open loop
    by both definitions."""
    scopes = [("all", report), *report["per_env"].items()] if len(report["per_env"]) > 1 else [("all", report)]
    open_loop = report["protocol"] in OPEN_LOOP
    shown = ["exact_match", *(NOVELTY_METRICS if "novel_share_tf" in report.get("metrics", []) else NOVELTY_METRICS[:2])]
    rows = [[scope, method, *(_fmt(block["methods"].get(method, {}).get(metric)) for metric in shown)]
            for scope, block in scopes for method in report["counts"] if block["methods"].get(method)]
    definition = ("Open loop the simulator was given only the task, the opening observation and the episode's own "
                  "actions: a value shown only by an earlier REAL observation is novel here (knowable teacher "
                  "forced: the `_tf` columns)." if open_loop else
                  "Teacher forced the simulator was given the real prefix: the task, the opening, and every earlier "
                  "action and observation.")
    header = ["environment", "method", "exact match (all)",
              f"exact match (knowable, {'open loop' if open_loop else 'teacher forced'})", "novel share"]
    if len(shown) > 3:
        header += ["exact match (knowable, teacher forced)", "novel share (teacher forced)"]
    return ["## Knowable turns", "",
            "A turn is novel when its observation shows a value (number, id, quoted string, JSON leaf, named entity) "
            "in neither what the simulator was given nor the book's evidence: no simulator could know it. "
            + definition, "", *_table(header, rows)]


def _both(report: dict[str, Any]) -> list[str]:
    """Every protocol side by side (open loop first): exact match, on knowable turns, and the paired differences."""
    columns = ("exact_match", "exact_match_knowable", "exact_match_knowable_tf", "novel_share")
    rows = [[PROTOCOL_LABELS.get(p, p), method, *(_fmt(entry.get(c)) for c in columns)]
            for p, block in report["by_protocol"].items() for method, entry in block["methods"].items()]
    pairs = [[PROTOCOL_LABELS.get(p, p), pair, *(_fmt(entry.get(c), "mean_diff") for c in columns[:3])]
             for p, block in report["by_protocol"].items() for pair, entry in block["pairs"].items()]
    return ["## Open loop and teacher forced", "",
            "Each protocol's knowable turns by its own definition (`evals.novelty`); `knowable (tf)` is the "
            "teacher-forced definition on the same records.", "",
            *_table(["protocol", "method", "exact match", "exact match (knowable)", "exact match (knowable, tf)",
                     "novel share"], rows),
            *(_table(["protocol", "pair", "exact match", "exact match (knowable)", "exact match (knowable, tf)"], pairs)
              if pairs else [])]


def _models_line(report: dict[str, Any]) -> str:
    """Each method's model (its spec, or none) and what it was trained on, where the model folder says."""
    models = EvalReport.model_validate({k: report[k] for k in ("models", "config", "counts") if k in report}
                                       ).method_models()
    return "; ".join(f"{method} `{entry.model}`" + (f" (trained on: {entry.trained_on})" if entry.trained_on else "")
                     + ("" if entry.recorded else " (inferred: not recorded by this run)")
                     for method, entry in models.items())


def _header(report: dict[str, Any]) -> list[str]:
    """The run in a few lines: protocol, books, dataset, methods, models, intervals, leakage."""
    config = report["config"]
    protocols = report.get("protocols") or [report["protocol"]]
    named = ", ".join(f"**{p}** ({PROTOCOL_LABELS.get(p, p)}{', primary' if i == 0 and len(protocols) > 1 else ''})"
                      for i, p in enumerate(protocols))
    dropped = report["leakage"].get("dropped")
    books = (f"cross-fitted, {config['folds']} folds by trajectory family (each fold's book built from the others)"
             if config.get("folds") else f"worldbook `{config.get('book')}@{config.get('book_version')}`")
    return [f"# Evaluation run `{report['run']}`", "",
            f"- protocol{'s' if len(protocols) > 1 else ''}: {named}; {books}; "
            f"dataset `{config.get('dataset')}`" + (f" split `{config['split']}`" if config.get("split") else ""),
            f"- methods: {', '.join(report['counts'])}; episodes: {report['episodes']}; "
            f"records per method: {', '.join(f'{m} {n}' for m, n in report['counts'].items())}",
            f"- model per method: {_models_line(report)}; judge: `{report.get('judge') or 'none'}`",
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


def _figure(name: str, plots: dict[str, list[str]]) -> list[str]:
    """A figure's markdown: the PNG, and its interactive HTML where written."""
    files = plots.get(name, [])
    png = next((f for f in files if f.endswith(".png")), None)
    html = next((f for f in files if f.endswith(".html")), None)
    if png is None:
        return []
    return [f"![{name}](plots/{png})" + (f" ([interactive](plots/{html}))" if html else ""), ""]


def _methods(report: dict[str, Any], plots: dict[str, list[str]]) -> list[str]:
    """The methods' table and the paired differences, with their plots."""
    metrics = report.get("metrics", [])
    lines = ["## Methods", "",
             *_table(["method", *metrics], [[m, *(_fmt(entry.get(x)) for x in metrics)]
                                            for m, entry in report["methods"].items()])]
    lines += _figure("leaderboard", plots)
    lines += _figure("judge", plots)
    if report["pairs"]:
        lines += ["## Paired differences (A - B, on the records both have)", ""]
        lines += _table(["pair", *metrics], [[p, *(_fmt(entry.get(x), "mean_diff") for x in metrics)]
                                              for p, entry in report["pairs"].items()])
        lines += _figure("pairs", plots)
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
    lines = [f"## {'Live open loop' if report['protocol'] == 'live' else 'Open-loop drift'}", "",
             f"Fidelity metric: `{report['fidelity_metric']}`.", ""]
    rows = []
    for method, diverged in report["first_divergence"].items():
        steps = [v for v in diverged.values() if v is not None]
        rows.append([method, f"{len(steps)}/{len(diverged)}",
                     f"{np.median(steps):.1f}" if steps else "–", _fmt(report["done_agreement"].get(method))])
    lines += _table(["method", "episodes that diverge", "median first divergence", "done-step agreement"], rows)
    lines += _figure("fidelity_at_t", plots)
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
    lines += _figure("w2r", plots)
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


def _failures(report: dict[str, Any]) -> list[str]:
    """Why each method missed, in one sentence (`evals.misses.miss_headline`); `worldsmith eval misses` details."""
    lines = [f"- `{method}`: {headline}" for method, headline in (report.get("failures") or {}).items() if headline]
    if not lines:
        return []
    return ["## Failures (exact match below 1)", "", *lines, "",
            "Novel turns show values nothing before them showed: no simulator could know them. The breakdowns: "
            "`worldsmith eval misses` and the Evaluate page's Failures tab.", ""]


def _provenance(report: dict[str, Any]) -> list[str]:
    """What produced this section's numbers, per method: model, dataset, split, n and the run, and its command."""
    records = {m: NumberProvenance.model_validate(entry) for m, entry in (report.get("provenance") or {}).items()}
    if not records:
        return []
    columns = ("method", "model", "dataset", "split", "n", "run")
    rows = [[record.fields()[column] for column in columns] for record in records.values()]
    commands = sorted({record.command for record in records.values() if record.command})
    protocol = PROTOCOL_LABELS.get(report["protocol"], report["protocol"])
    return [f"## Provenance ({protocol})", "", *_table(list(columns), rows),
            *(f"Produced by: `{command}`" for command in commands), *([""] if commands else [])]


def _sections(report: dict[str, Any], plots: dict[str, list[str]]) -> list[str]:
    return [*_methods(report, plots), *_provenance(report), *_failures(report), *_scopes(report),
            *_drift(report, plots), *_world_to_real(report, plots)]


def _view(report: dict[str, Any], protocol: str) -> dict[str, Any]:
    """The report as a run of `protocol` alone would have written it (none of the primary's own sections)."""
    block = report["by_protocol"][protocol]
    return {**{k: v for k, v in report.items() if k not in _BLOCK_KEYS}, **block, "protocol": protocol}


def _markdown(report: dict[str, Any], plots: dict[str, dict[str, list[str]]]) -> str:
    protocols = report.get("protocols") or [report["protocol"]]
    if len(protocols) == 1:
        return "\n".join([*_header(report), *_folds(report), *_sections(report, plots[protocols[0]]),
                          *_footer(report)])
    lines = [*_header(report), *_folds(report), *_both(report)]
    for protocol in protocols:
        lines += [f"# {PROTOCOL_LABELS.get(protocol, protocol)}", "",
                  *_sections(_view(report, protocol), plots[protocol])]
    return "\n".join([*lines, *_footer(report)])


def write_report(report: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Write report.json, plots/ and report.md into a run folder; returns the report with `plots` listed (a
    secondary protocol's under `<protocol>:<name>`, its files prefixed with `<protocol>-`)."""
    folder = Path(folder)
    protocols = report.get("protocols") or [report["protocol"]]
    plots = {p: _plots(_view(report, p) if len(protocols) > 1 else report, folder / "plots",
                       "" if i == 0 else f"{p}-") for i, p in enumerate(protocols)}
    listed = {(name if i == 0 else f"{p}:{name}"): [f"plots/{f}" for f in files]
              for i, p in enumerate(protocols) for name, files in plots[p].items()}
    report = {**report, "plots": listed}
    atomic_write_json(folder / "report.json", report)
    with atomic_write(folder / "report.md", "w") as handle:
        handle.write(_markdown(report, plots))
    return report
