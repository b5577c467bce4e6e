"""Direct prompting with the dataset's own tiny model against the bundled (ALFWorld-trained) default.

    OMP_NUM_THREADS=1 python benchmarks/tiny_in_domain.py --workspace W --dataset shop --split test --book shop \
        [--in-domain tiny:W/models/tiny-shop] [--default tiny:data_samples/models/tiny] [--protocol next-obs] \
        [--max-episodes N] [--max-turns N] [--out benchmarks/results/tiny_in_domain.json]

Runs `worldsmith eval` (the library's `run_eval`, so the runs land in W/runs/eval/ like any other) with method
`direct` once per model on the same held-out episodes, pairs the two runs' records turn by turn, and reports
each model's exact match and token F1 and the in-domain minus default difference, all with 95% cluster-bootstrap
intervals over episodes (the difference paired: one resample draws the same episodes for both). The in-domain
model defaults to what `worldsmith eval` would pick for the dataset (`llm.indomain.model_for_dataset`). Prints a
Markdown table and writes JSON, with each model's training report (steps, seconds, what it was trained on).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pandas as pd  # noqa: E402

from worldsmith import Workspace  # noqa: E402
from worldsmith._resources import tiny_model_dir  # noqa: E402
from worldsmith.evals.bootstrap import bootstrap_mean  # noqa: E402
from worldsmith.evals.config import EvalConfig  # noqa: E402
from worldsmith.evals.run import run_eval  # noqa: E402
from worldsmith.llm import indomain  # noqa: E402
from worldsmith.llm.tiny import REPORT_FILE  # noqa: E402

METRICS = ("exact_match", "token_f1")
KEY = ["episode_id", "turn"]


def _training(spec: str) -> dict[str, Any]:
    """The model folder's training report, less its loss curve and config."""
    folder = Path(spec.partition(":")[2])
    try:
        report = json.loads((folder / REPORT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    keep = ("parameters", "steps", "planned_steps", "first_loss", "last_loss", "tokens_trained", "train_seconds",
            "threads", "stopped_early", "data")
    return {**{key: report.get(key) for key in keep}, "seq_len": report.get("config", {}).get("seq_len"),
            "trained_on": indomain.trained_on_label(indomain.trained_on(spec))}


def _run(args: argparse.Namespace, name: str, spec: str) -> tuple[pd.DataFrame, float]:
    config = EvalConfig(name=name, book=args.book, dataset=args.dataset, split=args.split, methods=["direct"],
                        protocol=args.protocol, llm=spec, max_episodes=args.max_episodes, max_turns=args.max_turns,
                        resamples=args.resamples, seed=args.seed)
    started = time.perf_counter()

    def show(done: int, total: int, what: str) -> None:
        print(f"  {name} [{done}/{total}] {what}", file=sys.stderr, flush=True)

    run = run_eval(config, Workspace(args.workspace), progress=show)
    frame = run.records
    frame = frame[(frame["method"] == "direct") & (frame["protocol"] == args.protocol)]
    return frame[[*KEY, *METRICS]].copy(), time.perf_counter() - started


def _interval(clusters: Any, values: Any, args: argparse.Namespace) -> dict[str, float]:
    found = bootstrap_mean(list(clusters), list(values), resamples=args.resamples, seed=args.seed)
    return {"mean": round(found.mean, 4), "low": round(found.low, 4), "high": round(found.high, 4)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workspace", required=True, type=Path)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--split", default="test")
    parser.add_argument("--book", required=True, help="worldbook the runs name (direct prompting does not read it)")
    parser.add_argument("--in-domain", help="spec of the in-domain model (default: what `worldsmith eval` picks)")
    parser.add_argument("--default", default=f"tiny:{tiny_model_dir()}", help="spec of the default model")
    parser.add_argument("--protocol", default="next-obs")
    parser.add_argument("--max-episodes", type=int)
    parser.add_argument("--max-turns", type=int)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs-prefix", default="tiny-in-domain", help="the eval runs' names start with this")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "tiny_in_domain.json")
    args = parser.parse_args(argv)

    choice = indomain.model_for_dataset(args.workspace, args.dataset, split=args.split, given=args.in_domain)
    if choice is None or choice.source == "bundled":
        print(f"no in-domain model for {args.dataset}: train one first "
              f"(worldsmith llm train-tiny --dataset {args.dataset} --split train)", file=sys.stderr)
        return 2
    specs = {"in-domain": choice.spec, "default": args.default}
    frames, seconds = {}, {}
    for label, spec in specs.items():
        name = f"{args.runs_prefix}-{label}-{args.split}-e{args.max_episodes or 'all'}-t{args.max_turns or 'all'}"
        frames[label], seconds[label] = _run(args, name, spec)
    paired = frames["in-domain"].merge(frames["default"], on=KEY, suffixes=("_in", "_default"))
    result: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"), "host": platform.node(),
        "threads": int(os.environ.get("OMP_NUM_THREADS", "0") or 0), "dataset": args.dataset, "split": args.split,
        "protocol": args.protocol, "turns": len(paired), "episodes": int(paired["episode_id"].nunique()),
        "models": {label: {"spec": spec, "eval_seconds": round(seconds[label], 1), "training": _training(spec)}
                   for label, spec in specs.items()},
        "metrics": {},
    }
    for metric in METRICS:
        inside, default = paired[f"{metric}_in"].astype(float), paired[f"{metric}_default"].astype(float)
        result["metrics"][metric] = {
            "in-domain": _interval(paired["episode_id"], inside, args),
            "default": _interval(paired["episode_id"], default, args),
            "difference": _interval(paired["episode_id"], inside - default, args),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"{args.dataset}/{args.split}, {args.protocol}: {result['turns']} turns of {result['episodes']} episodes")
    print("| metric | in-domain | bundled default | in-domain - default (paired) |")
    print("|---|---|---|---|")
    for metric, cells in result["metrics"].items():
        shown = [f"{c['mean']:.3f} [{c['low']:.3f}, {c['high']:.3f}]" for c in cells.values()]
        print(f"| {metric} | " + " | ".join(shown) + " |")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
