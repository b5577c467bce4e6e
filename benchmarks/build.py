"""Worldbook build cost vs number of trajectories, and replay-validation quality per environment.

    OMP_NUM_THREADS=1 python benchmarks/build.py [--sizes 10 100 1000] [--repeats 3]
        [--workspace WS --dataset NAME] [--out benchmarks/results/build.json]

Scaling: the default simulator build (`build_simulator_book`: routes included, no validation, no cache) on N ALFWorld
trajectories, median wall and CPU seconds of R repeats per size and the median seconds of every
stage, and the growth exponent (log-log slope) between consecutive sizes and end to end. The source
trajectories are the expert episodes in `data_samples/collected/alfworld.jsonl` plus, with
`--workspace/--dataset`, that dataset's ALFWorld expert episodes (duplicates by content dropped).
Sizes beyond the source count are reached by RESAMPLING: copies of source episodes under new ids
(`<id>-r<k>`, turn ids renumbered), so the larger sizes measure how the builder scales with
evidence, not how its rules generalize.

Validation: for each `data_samples/collected/<env>.jsonl` and the workspace dataset, `cross_fit`
with min(3, families) folds by trajectory family; prints the pooled held-out totals (coverage,
coverage with conditions checked, exact match) and the same over the common actions.
Writes benchmarks/results/build.json.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import math
import os
import platform
import statistics
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

from worldsmith.sim.route_learning import build_simulator_book  # noqa: E402
from worldsmith.traces import Episode, read_traces  # noqa: E402
from worldsmith.traces.model import turn_id  # noqa: E402
from worldsmith.workspace import Workspace  # noqa: E402
from worldsmith.worldbook.build import cross_fit, trajectory_family  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "data_samples" / "collected"
SAMPLE_ENVS = ("alfworld", "textworld", "bfcl", "shell", "scienceworld")


# ----------------------------------------------------------------------------------- trajectories
def read_sample(env: str) -> list[Episode]:
    """The bundled expert episodes of one environment."""
    path = SAMPLES / f"{env}.jsonl"
    items = list(read_traces([path]))
    bad = [item for item in items if not isinstance(item, Episode)]
    if bad:
        raise SystemExit(f"{path}: {len(bad)} records are not episodes: {bad[:1]}")
    return items  # type: ignore[return-value]


def read_dataset(workspace: Path, dataset: str) -> list[Episode]:
    """A workspace dataset's episodes, without ground-truth state."""
    return list(Workspace(workspace).dataset(dataset).iter_episodes())


def alfworld_sources(workspace: Path | None, dataset: str | None) -> list[Episode]:
    """ALFWorld expert episodes from the sample and the dataset, one per distinct trajectory, in a stable
    order that mixes task types (sorted by a hash of the id)."""
    candidates = read_sample("alfworld") + (read_dataset(workspace, dataset) if workspace and dataset else [])
    seen: set[str] = set()
    sources: list[Episode] = []
    for episode in candidates:
        if not (episode.env_id or "").startswith("alfworld") or episode.metadata.get("policy", "expert") != "expert":
            continue
        digest = episode.content_hash()
        if digest not in seen:
            seen.add(digest)
            sources.append(episode)
    return sorted(sources, key=lambda e: hashlib.sha256(e.id.encode()).hexdigest())


def renamed(episode: Episode, new_id: str) -> Episode:
    """A copy under another id; turn ids (`<episode>#<index>`) follow it (model_copy runs no validator)."""
    turns = [turn.model_copy(update={"id": turn_id(new_id, turn.index)}) for turn in episode.turns]
    return episode.model_copy(update={"id": new_id, "turns": turns})


def resample(sources: Sequence[Episode], size: int) -> list[Episode]:
    """`size` trajectories: the sources in order, then copies `<id>-r<k>` cycling through them."""
    out: list[Episode] = []
    for index in range(size):
        episode = sources[index % len(sources)]
        copy_number = index // len(sources)
        out.append(episode if copy_number == 0 else renamed(episode, f"{episode.id}-r{copy_number}"))
    return out


# ------------------------------------------------------------------------------------------ scaling
def measure_size(sources: Sequence[Episode], size: int, repeats: int) -> dict[str, Any]:
    episodes = resample(sources, size)
    runs: list[dict[str, Any]] = []
    for _ in range(repeats):
        gc.collect()
        started, cpu_started = time.perf_counter(), time.process_time()
        result = build_simulator_book(episodes, name=f"bench-{size}")
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
        runs.append({"seconds": round(seconds, 4), "cpu_seconds": round(cpu_seconds, 4), "timings_s": result.timings,
                     "rules": len(result.book.rules), "statuses": result.report()["statuses"]})
    stages = list(runs[0]["timings_s"])
    median = statistics.median(run["seconds"] for run in runs)
    turns = sum(len(e.turns) for e in episodes)
    return {"trajectories": size, "distinct": min(size, len(sources)), "resampled": max(0, size - len(sources)),
            "turns": turns, "median_s": round(median, 4), "us_per_turn": round(median / turns * 1e6, 1),
            "median_cpu_s": round(statistics.median(run["cpu_seconds"] for run in runs), 4),
            "stages_median_s": {s: round(statistics.median(run["timings_s"][s] for run in runs), 4) for s in stages},
            "rules": runs[-1]["rules"], "statuses": runs[-1]["statuses"], "runs": [run["seconds"] for run in runs]}


def slope(a: dict[str, Any], b: dict[str, Any], key: str = "trajectories", seconds: str = "median_s") -> float:
    """The log-log slope of build seconds between two sizes (1.0 is linear)."""
    return round(math.log(max(b[seconds], 1e-6) / max(a[seconds], 1e-6)) / math.log(b[key] / a[key]), 3)


def scaling(sources: Sequence[Episode], sizes: Sequence[int], repeats: int, budget_s: float) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    skipped: list[int] = []
    for size in sizes:
        if rows and rows[-1]["median_s"] * size / rows[-1]["trajectories"] * repeats > budget_s:
            skipped.append(size)  # a linear extrapolation already exceeds the budget
            continue
        row = measure_size(sources, size, repeats)
        rows.append(row)
        print(f"{row['trajectories']:>6} {row['turns']:>7} {row['resampled']:>9} {row['median_s']:>9.3f} "
              f"{row['median_cpu_s']:>8.3f} "
              f"{row['us_per_turn']:>8.0f}  " + " ".join(f"{s}={t:.3f}" for s, t in row["stages_median_s"].items()),
              flush=True)
    exponents = [{"from": a["trajectories"], "to": b["trajectories"], "exponent": slope(a, b),
                  "exponent_by_turns": slope(a, b, "turns"), "exponent_cpu": slope(a, b, seconds="median_cpu_s")}
                 for a, b in zip(rows, rows[1:], strict=False)]
    overall = slope(rows[0], rows[-1]) if len(rows) > 1 else None
    overall_cpu = slope(rows[0], rows[-1], seconds="median_cpu_s") if len(rows) > 1 else None
    return {"sizes": rows, "exponents": exponents, "exponent_first_to_last": overall,
            "exponent_first_to_last_cpu": overall_cpu, "skipped_sizes": skipped}


# --------------------------------------------------------------------------------------- validation
def validation_row(label: str, episodes: Sequence[Episode]) -> dict[str, Any]:
    families = len({trajectory_family(e) for e in episodes})
    folds = min(3, families)
    row: dict[str, Any] = {"source": label, "episodes": len(episodes), "turns": sum(len(e.turns) for e in episodes),
                           "families": families, "folds": folds}
    if folds < 2:
        return {**row, "error": f"{families} trajectory family: cross-fitting needs 2"}
    started = time.perf_counter()
    summary = cross_fit(list(episodes), name=f"bench-{label.replace(':', '-')}", folds=folds).summary()
    pooled = summary["pooled"]
    return {**row, "seconds": round(time.perf_counter() - started, 3), "totals": pooled["totals"],
            "common_actions": pooled["common_actions"],
            "leakage_ok": all(fold["leakage_ok"] for fold in summary["per_fold"]),
            "per_action": {action: {k: stats[k] for k in ("turns", "covered_rate", "verified_rate", "exact_rate")}
                           for action, stats in pooled["per_action"].items()}}


def print_validation(row: dict[str, Any]) -> None:
    head = f"{row['source']:<22} {row['episodes']:>4} {row['turns']:>5} {row['folds']:>5}"
    if "error" in row:
        print(f"{head}  {row['error']}")
        return
    totals, common = row["totals"], row["common_actions"]
    print(f"{head} {totals['coverage']:>8.1%} {totals['coverage_verified']:>8.1%} {totals['exact_match']:>7.1%}  "
          f"{common['coverage']:>7.1%} {common['coverage_verified']:>7.1%} {common['exact_match']:>7.1%}  "
          f"{','.join(common['actions'])}")


# -------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[10, 100, 1000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workspace", type=Path, help="a workspace with an ALFWorld expert dataset")
    parser.add_argument("--dataset", help="that dataset's name (with --workspace)")
    parser.add_argument("--envs", nargs="+", default=list(SAMPLE_ENVS), help="sample files to cross-fit")
    parser.add_argument("--budget-s", type=float, default=180.0,
                        help="skip a size whose linearly extrapolated repeats would take longer")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "build.json")
    options = parser.parse_args(argv)
    if bool(options.workspace) != bool(options.dataset):
        parser.error("--workspace and --dataset go together")

    sources = alfworld_sources(options.workspace, options.dataset)
    print(f"build scaling on ALFWorld: {len(sources)} distinct expert trajectories "
          f"(sample{' + ' + options.dataset if options.dataset else ''}); sizes above that are RESAMPLED copies "
          f"under new ids: this measures scaling with evidence, not generalization. Median of {options.repeats}.")
    print(f"{'trajs':>6} {'turns':>7} {'resampled':>9} {'median s':>9} {'CPU s':>8} {'us/turn':>8}  stages (median s)")
    scale = scaling(sources, options.sizes, options.repeats, options.budget_s)
    for step in scale["exponents"]:
        print(f"growth exponent {step['from']} -> {step['to']}: {step['exponent']:.2f} "
              f"(by turns {step['exponent_by_turns']:.2f}, CPU time {step['exponent_cpu']:.2f})")
    if scale["exponent_first_to_last"] is not None:
        print(f"growth exponent end to end: {scale['exponent_first_to_last']:.2f} "
              f"(CPU time {scale['exponent_first_to_last_cpu']:.2f}; 1.0 = linear)")
    if scale["skipped_sizes"]:
        print(f"skipped sizes (over the {options.budget_s:.0f} s budget): {scale['skipped_sizes']}")

    print("\nreplay validation, cross-fitting by trajectory family (pooled over held-out folds)")
    print(f"{'source':<22} {'eps':>4} {'turns':>5} {'folds':>5} {'coverage':>8} {'checked':>8} {'exact':>7}  "
          f"{'com.cov':>7} {'checked':>7} {'exact':>7}  common actions (>= 5% of turns)")
    rows = [validation_row(f"sample:{env}", read_sample(env)) for env in options.envs]
    if options.workspace:
        rows.append(validation_row(f"workspace:{options.dataset}", read_dataset(options.workspace, options.dataset)))
    for row in rows:
        print_validation(row)

    result = {
        "benchmark": "worldbook_build", "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()},
        "sources": {"alfworld_distinct": len(sources), "workspace": str(options.workspace or ""),
                    "dataset": options.dataset, "resampling": "copies under new ids <id>-r<k>; measures scaling, "
                                                              "not generalization"},
        "repeats": options.repeats, "scaling": scale, "validation": rows,
    }
    options.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = options.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(options.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
