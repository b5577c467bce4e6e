"""Does measuring the route table on a sample of held-out turns cost fidelity? Full cross-fit vs the default sample.

    OMP_NUM_THREADS=1 nice -n 5 python benchmarks/route_sample.py DATA.jsonl [--sizes 1000 3000]
        [--evaluation 9000:10000] [--resamples 2000] [--out benchmarks/results/route_sample.json]

For each size N, two simulator books are built from the first N trajectories of DATA (`build_simulator_book`): the
route table cross-fitted on every held-out turn (`route_turns=None`, five folds over all families) and on the default
sample (`sim.route_learning.ROUTE_TURNS`). Both harnesses then predict every turn of the evaluation trajectories (lines
`--evaluation A:B` of DATA, which must share no task with the first N: `benchmarks/build.py`'s toolshop file plays
task i // 2 at line i) from its real prefix (`evals.protocols.next_obs_records`). Reported: each build's CPU seconds,
the route table's folds and turns, how many (action, source) rows decide differently, each book's exact match on all
and on knowable turns, and the paired difference sample - full with its 95% cluster-bootstrap interval (clusters =
episodes). Prints a Markdown table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

from worldsmith.evals.bootstrap import bootstrap_mean  # noqa: E402
from worldsmith.evals.novelty import NoveltyIndex  # noqa: E402
from worldsmith.evals.protocols import Scorer, next_obs_records  # noqa: E402
from worldsmith.sim.harness import Harness  # noqa: E402
from worldsmith.sim.route_learning import ROUTE_TURNS, build_simulator_book  # noqa: E402
from worldsmith.traces import Episode  # noqa: E402
from worldsmith.worldbook.model import Worldbook  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "route_sample.json"


def _lines(path: Path, start: int, stop: int) -> list[Episode]:
    with path.open(encoding="utf-8") as handle:
        return [Episode.model_validate_json(line) for index, line in enumerate(handle) if start <= index < stop]


def _decisions(book: Worldbook) -> dict[tuple[str, str], bool | None]:
    """Per (action, source) row of the table: whether it trusts the source, None where the row has too few turns
    to decide (the pooled row does)."""
    table = book.routes
    if table is None:
        return {}
    return {(row["action"], row["source"]): bool(row["trusted"]) if row["decides"] else None for row in table.rows()}


def _interval(clusters: list[str], values: list[float], resamples: int) -> dict[str, Any]:
    return {k: round(v, 4) if isinstance(v, float) else v
            for k, v in bootstrap_mean(clusters, values, resamples=resamples).to_json().items()}


def compare(data: Path, size: int, evaluation: list[Episode], resamples: int) -> dict[str, Any]:
    construction = _lines(data, 0, size)
    books: dict[str, Worldbook] = {}
    result: dict[str, Any] = {"trajectories": size, "turns": sum(len(e.turns) for e in construction)}
    for label, turns in (("full", None), ("sample", ROUTE_TURNS)):
        started = time.process_time()
        books[label] = build_simulator_book(construction, name=f"{label}-{size}", route_turns=turns).book
        table = books[label].routes
        result[label] = {"cpu_s": round(time.process_time() - started, 2),
                         "folds": table.folds if table else 0, "held_out_turns": table.turns if table else 0}
    full, sample = _decisions(books["full"]), _decisions(books["sample"])
    shared = full.keys() & sample.keys()
    result["rows"] = {"full": len(full), "sample": len(sample), "shared": len(shared),
                      "decide_differently": sorted(f"{a} / {s}" for a, s in shared if full[(a, s)] != sample[(a, s)])}
    novelty = NoveltyIndex.for_book(books["full"])
    exact: dict[str, list[float]] = {"full": [], "sample": []}
    clusters: list[str] = []
    novel: list[bool] = []
    harnesses = {label: Harness(book) for label, book in books.items()}  # set up once: it learns its trackers
    for episode in evaluation:
        marks = novelty.episode(episode)
        clusters += [episode.id] * len(marks)
        novel += [bool(values) for values in marks]
        for label, harness in harnesses.items():
            exact[label] += [float(r.exact_match or 0.0) for r in next_obs_records(harness, episode, Scorer())]
    known = [i for i, flag in enumerate(novel) if not flag]
    diff = [s - f for s, f in zip(exact["sample"], exact["full"], strict=True)]
    for label in exact:
        result[label]["exact_all"] = _interval(clusters, exact[label], resamples)
        result[label]["exact_knowable"] = _interval([clusters[i] for i in known], [exact[label][i] for i in known],
                                                    resamples)
    result["sample - full"] = {"all": _interval(clusters, diff, resamples),
                               "knowable": _interval([clusters[i] for i in known], [diff[i] for i in known], resamples)}
    return result


def _ci(entry: dict[str, Any]) -> str:
    return f"{entry['mean']:+.3f} [{entry['low']:+.3f}, {entry['high']:+.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--sizes", nargs="+", type=int, default=[1000, 3000])
    parser.add_argument("--evaluation", default="9000:10000", help="A:B, the lines of DATA evaluated on")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    start, stop = (int(part) for part in args.evaluation.split(":"))
    if max(args.sizes) > start:
        raise SystemExit(f"a construction size ({max(args.sizes)}) reaches into the evaluation lines {args.evaluation}")
    evaluation = _lines(args.data, start, stop)
    results = []
    print("| trajectories | full: CPU s, folds, turns | sample: CPU s, folds, turns | rows differing | "
          "exact all full / sample | sample - full, all | sample - full, knowable |")
    print("|---|---|---|---|---|---|---|")
    for size in args.sizes:
        row = compare(args.data, size, evaluation, args.resamples)
        results.append(row)
        full, sample = row["full"], row["sample"]
        print(f"| {size} | {full['cpu_s']}, {full['folds']}, {full['held_out_turns']} | {sample['cpu_s']}, "
              f"{sample['folds']}, {sample['held_out_turns']} | {len(row['rows']['decide_differently'])} of "
              f"{row['rows']['shared']} | {full['exact_all']['mean']:.3f} / {sample['exact_all']['mean']:.3f} | "
              f"{_ci(row['sample - full']['all'])} | {_ci(row['sample - full']['knowable'])} |", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"date": datetime.now(UTC).isoformat(timespec="seconds"), "data": str(args.data),
                                    "evaluation": args.evaluation, "machine": platform.platform(),
                                    "route_turns": ROUTE_TURNS, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
