"""Evaluation run folders written by hand per the run-store contract, for page tests that need exact contents.

The numbers are chosen so every view has something to show and tests can count: harness is right
on every turn except 'look' turns of odd episodes; nearest is wrong on every 'take' and 'open'
turn. Intervals are mean ± 0.05 (clipped): the page must show what the report says, not recompute it.
With `novelty`, the 'open' turn (2) is novel in every episode; without it the run is one made before the flag.
With `why`, records name their answer source (harness: 'rule', but the rule-less 'look' turns: the
'nearest_evidence' fallback) and flag 'look' as an unseen action; without it the run predates both columns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

ACTIONS = ["go to desk 1", "take mug 1 from desk 1", "open drawer 1", "put mug 1 in/on drawer 1", "look"]
REFERENCES = ["You arrive at desk 1. On the desk 1, you see a mug 1.", "You pick up the mug 1 from the desk 1.",
              "You open the drawer 1. The drawer 1 is open. In it, you see nothing.",
              "You put the mug 1 in/on the drawer 1.", "You are facing the drawer 1. Next to it, you see nothing."]
WRONG = {"nearest": {1: "Nothing happens.", 2: "You open the drawer 2. The drawer 2 is open. In it, you see a pen 1."},
         "harness": {4: "You are facing the desk 1. Next to it, you see nothing."}}
RULES = {0: ["go.arrive"], 1: ["take.from"], 2: ["open.container"], 3: ["put.in"], 4: []}
EPISODES = [f"ep-{i}" for i in range(4)]
ENV = "alfworld/pick"


def _prediction(method: str, episode: int, turn: int) -> str:
    wrong = WRONG.get(method, {}).get(turn)
    if wrong is not None and (method == "nearest" or episode % 2 == 1):
        return wrong
    return REFERENCES[turn]


NOVEL_TURN = 2


def make_records(run: str, methods: list[str], protocol: str = "next-obs", judge: bool = False,
                 novelty: bool = False, why: bool = False) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for method in methods:
        for e, episode in enumerate(EPISODES):
            diverged = False
            for turn, (action, reference) in enumerate(zip(ACTIONS, REFERENCES, strict=True)):
                prediction = _prediction(method, e, turn)
                exact = float(prediction == reference)
                diverged = diverged or (protocol == "drift" and not exact)
                score = 5.0 if exact else 2.0
                rows.append({
                    "run": run, "protocol": protocol, "method": method, "env_id": ENV, "episode_id": episode,
                    "family": f"family-{e // 2}", "task_seen": e < 2, "turn": turn, "action": action,
                    "reference": reference, "prediction": prediction, "exact_match": exact,
                    "edit_similarity": 1.0 if exact else 0.4, "token_f1": 1.0 if exact else 0.3, "json_f1": None,
                    "judge_total": (100.0 if exact else 25.0) if judge else None,
                    **{f"judge_{d}": (score if judge else None)
                       for d in ("format", "factuality", "consistency", "realism", "quality")},
                    "route": "fast_path" if method == "harness" else "nearest", "rules":
                    RULES[turn] if method == "harness" else [], "model_calls": 0, "prompt_tokens": 0,
                    "completion_tokens": 0, "latency_s": 0.001, "cost_usd": 0.0, "diverged": diverged,
                    "outcome": "success", "done_pred": False, "done_real": turn == len(ACTIONS) - 1,
                    **({"novel": turn == NOVEL_TURN, "novel_values": ["drawer 1"] if turn == NOVEL_TURN else []}
                       if novelty else {}),
                })
                if why:
                    look = action == "look"
                    harness = method == "harness"
                    rows[-1].update(
                        source=("nearest_evidence" if look else "rule") if harness else "nearest",
                        route="fallback:nearest_evidence" if harness and look else rows[-1]["route"],
                        unseen_action=look)
    return pd.DataFrame(rows)


def _cell(values: pd.Series) -> dict[str, float | int]:
    mean = float(values.mean())
    return {"mean": mean, "low": max(0.0, mean - 0.05), "high": min(1.0, mean + 0.05) if mean <= 1 else mean + 5,
            "n": int(values.notna().sum())}


def _block(records: pd.DataFrame, metrics: list[str]) -> dict[str, Any]:
    methods = {m: {k: _cell(g[k]) for k in metrics} for m, g in records.groupby("method")}
    names = list(methods)
    pairs = {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            pairs[f"{a} vs {b}"] = {k: {"mean_diff": methods[a][k]["mean"] - methods[b][k]["mean"],
                                        "low": methods[a][k]["mean"] - methods[b][k]["mean"] - 0.05,
                                        "high": methods[a][k]["mean"] - methods[b][k]["mean"] + 0.05,
                                        "n": methods[a][k]["n"]} for k in metrics}
    return {"methods": methods, "pairs": pairs}


def write_run(root: Path, run: str, methods: list[str], *, protocol: str = "next-obs", judge: bool = False,
              dataset: str = "samples", book: str = "alfworld", novelty: bool = False, why: bool = False) -> Path:
    """A complete run folder under `<root>/runs/eval/<run>` (config, records, report, progress)."""
    folder = root / "runs" / "eval" / run
    folder.mkdir(parents=True, exist_ok=True)
    records = make_records(run, methods, protocol, judge, novelty, why)
    records.to_parquet(folder / "records.parquet", index=False)
    metrics = ["exact_match", "edit_similarity", "token_f1"] + (["judge_total"] if judge else [])
    if novelty:
        records = records.assign(novel_share=records["novel"].astype(float),
                                 exact_match_knowable=records["exact_match"].where(~records["novel"]))
        metrics += ["exact_match_knowable", "novel_share"]
    config = {"book": book, "book_version": "v1", "dataset": dataset, "split": None, "methods": methods,
              "protocol": protocol, "llm": None, "judge": "tiny:judge" if judge else None, "seeds": [0],
              "bootstrap_resamples": 10000}
    report: dict[str, Any] = {
        "run": run, "protocol": protocol, "fingerprint": f"fp-{run}", "config": config,
        "judge": config["judge"], **_block(records, metrics),
        "per_env": {ENV: _block(records, metrics)},
        "seen_unseen": {"seen": _block(records[records["task_seen"]], metrics),
                        "unseen": _block(records[~records["task_seen"]], metrics)},
        "cost": {m: {"model_calls": 0.0, "prompt_tokens": 0.0, "completion_tokens": 0.0, "latency_s": 0.001,
                     "cost_usd": 0.0} for m in methods},
        "leakage": {"ok": True}, "seeds": {"bootstrap": 0}, "created": "2025-01-01T00:00:00Z",
    }
    if protocol == "drift":
        report["fidelity_at_t"] = {m: [{"t": t, **_cell(g[g["turn"] == t]["exact_match"])} for t in range(5)]
                                   for m, g in records.groupby("method")}
        report["first_divergence"] = {
            m: {e: (int(h["turn"].min()) if len(h := g[(g["episode_id"] == e) & g["diverged"]]) else None)
                for e in EPISODES} for m, g in records.groupby("method")}
    (folder / "config.json").write_text(json.dumps({**config, "fingerprint": f"fp-{run}"}), encoding="utf-8")
    (folder / "report.json").write_text(json.dumps(report), encoding="utf-8")
    (folder / "progress.json").write_text(json.dumps({"done": len(records), "total": len(records)}), encoding="utf-8")
    return folder
