"""Seconds one curation-loop delta takes on the bundled samples: cold, after an edit, after an undo.

    OMP_NUM_THREADS=1 python benchmarks/heldout_delta.py [--samples alfworld_expert shell ...] [--repeats 3]
        [--out benchmarks/results/heldout_delta.json]

For each `data_samples/collected/<name>.jsonl`: a fresh workspace, the episodes split train/test 75/25 by
trajectory family, a book built on train only; then `evals.heldout_delta` of the book against an edit that
breaks its best-supported rule's template, timed three ways (median of R repeats, each in a new workspace so
the cache starts empty): **cold** (both versions predicted), **edit** (the base version cached, only the edited
one predicted: what the Worldbook page does after each save) and **undo** (both cached). Prints a table and
writes JSON with the machine's description.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import orjson  # noqa: E402

from worldsmith.evals import HeldOut  # noqa: E402
from worldsmith.evals.heldout import heldout_delta, score_version  # noqa: E402
from worldsmith.sim.route_learning import build_simulator_book  # noqa: E402
from worldsmith.traces import Episode  # noqa: E402
from worldsmith.workspace import Workspace  # noqa: E402
from worldsmith.worldbook import Worldbook  # noqa: E402

SAMPLES = Path(__file__).resolve().parents[1] / "data_samples" / "collected"
DEFAULT = ("alfworld_expert", "alfworld", "shell", "bfcl", "scienceworld", "textworld")


def _episodes(name: str) -> list[Episode]:
    lines = (SAMPLES / f"{name}.jsonl").read_bytes().splitlines()
    return [Episode.model_validate({k: v for k, v in orjson.loads(line).items() if k != "format"})
            for line in lines if line.strip()]


def _broken(book: Worldbook) -> Worldbook:
    target = max(book.rules, key=lambda r: r.support).id
    return book.model_copy(update={"rules": [r.model_copy(update={"template": "Nothing happens here."})
                                             if r.id == target else r for r in book.rules]})


def _one(name: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as root:
        ws = Workspace(root)
        ws.add_episodes(name, _episodes(name))
        ws.split(name, {"train": 0.75, "test": 0.25})
        book = build_simulator_book(ws.dataset(name).iter_episodes("train"), name=name).book
        heldout = HeldOut(dataset=name, split="test")
        edited = _broken(book)
        started = time.perf_counter()
        cold = heldout_delta(book, edited, heldout, ws)
        cold_s = time.perf_counter() - started
        other = edited.model_copy(update={"description": "a second edit"})
        started = time.perf_counter()
        heldout_delta(edited, other, heldout, ws)
        edit_s = time.perf_counter() - started
        started = time.perf_counter()
        heldout_delta(edited, book, heldout, ws)
        undo_s = time.perf_counter() - started
        scored = score_version(book, heldout, ws)
        return {"cold_s": cold_s, "edit_s": edit_s, "undo_s": undo_s, "turns": cold.turns, "episodes": cold.episodes,
                "predict_s": scored.seconds, "exact_match_before": cold.metrics["exact_match"].before,
                "exact_match_diff": cold.metrics["exact_match"].diff, "broken": len(cold.broken)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", nargs="+", default=list(DEFAULT))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "heldout_delta.json")
    args = parser.parse_args()
    rows = []
    print(f"{'sample':<18}{'episodes':>9}{'turns':>7}{'cold s':>9}{'edit s':>9}{'undo s':>9}{'EM':>7}{'dEM':>8}"
          f"{'broken':>8}")
    for name in args.samples:
        runs = [_one(name) for _ in range(args.repeats)]
        row = {"sample": name, **{k: runs[0][k] for k in ("episodes", "turns", "exact_match_before",
                                                         "exact_match_diff", "broken")},
               **{k: round(statistics.median(r[k] for r in runs), 4) for k in ("cold_s", "edit_s", "undo_s",
                                                                               "predict_s")}}
        rows.append(row)
        print(f"{name:<18}{row['episodes']:>9}{row['turns']:>7}{row['cold_s']:>9.3f}{row['edit_s']:>9.3f}"
              f"{row['undo_s']:>9.3f}{row['exact_match_before']:>7.3f}{row['exact_match_diff']:>+8.3f}"
              f"{row['broken']:>8}")
    result = {"created": datetime.now(UTC).isoformat(timespec="seconds"), "repeats": args.repeats,
              "machine": {"python": platform.python_version(), "processor": platform.machine(),
                          "cpus": os.cpu_count(), "omp_threads": os.environ.get("OMP_NUM_THREADS")},
              "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
