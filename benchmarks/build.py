"""Worldbook build cost at scale: CPU seconds, peak memory and per-stage shares vs the number of trajectories.

    OMP_NUM_THREADS=1 nice -n 5 python benchmarks/build.py [--envs toolshop bfcl textworld]
        [--sizes 100 300 1000 3000 10000] [--repeats 1] [--route-folds 5] [--budget-s 900]
        [--data-dir /tmp/worldsmith-build-data] [--bfcl FILE.jsonl ...] [--out benchmarks/results/build.json]

Every build is `sim.build_simulator_book` (the book's stages and the route table; no validation, no stage cache) in
its own process (`python benchmarks/build.py --child FILE SIZE FOLDS`), which reads the first SIZE trajectories of
FILE, builds, and reports its CPU seconds (`time.process_time` around the build), its peak RSS
(`getrusage(RUSAGE_SELF).ru_maxrss`; the episodes are streamed into the build, as `build_dataset` reads a
workspace) and the CPU seconds of every stage (taken at the
pipeline's `StageProgress` events). The parent prints, per environment and size, the median of the repeats, each
stage's share of the build, and the log-log slope of CPU seconds between consecutive sizes (1.0 is linear); a size
whose linear extrapolation from the last one would exceed `--budget-s` is skipped and listed.

Trajectories are distinct, never duplicated copies, and generated once into `--data-dir` (reused by later runs; a
file is extended when a larger size is asked for, its first N lines never change):

- `toolshop.jsonl`: our stateful tool API (`envs.toolshop`, one seeded database shared by every task of a seed:
  cross-episode entities), collected in-process. Trajectory i plays task `db=<i // 40000>:task=<(i // 2) % 20000>`
  with the expert (even i) or the probing policy (odd i), seed 0 — 20,000 tasks per database, so 10,000
  trajectories are 5,000 tasks on database 0, each played by both policies.
- `bfcl.jsonl`: the `--bfcl` collections (default `/tmp/data/bfcl-curious.jsonl` and `/tmp/data/bfcl-expert.jsonl`:
  BFCL's 800 multi-turn tasks under the curious and the expert policy, `worldsmith collect bfcl` + `export`), pooled
  in a hash-of-id order; sizes beyond the pool (1,600) are skipped.
- `textworld.jsonl`: TextWorld games from `tw-make` (`custom:world_size=5,nb_objects=10,quest_length=5:seed=<g>`,
  g = 1..50, generated into `--data-dir/tw-games`) played by the curious policy: trajectory i is game i % 50 under
  policy seed i // 50, at most 30 steps; a trajectory equal to an earlier one is dropped (the next seed is played).

The older ALFWorld mode (36 expert games resampled under new ids up to 1,000) is gone: copies measure how the build
scales with repeated evidence, which the distinct sets above measure on real growth, and its cross-fitted validation
of the bundled samples is `benchmarks/fidelity.py`'s job. Writes `--out` (JSON).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
ENVS = ("toolshop", "bfcl", "textworld")
DEFAULT_BFCL = [Path("/tmp/data/bfcl-curious.jsonl"), Path("/tmp/data/bfcl-expert.jsonl")]
TW_GAMES = 50
TW_GAME = "custom:world_size=5,nb_objects=10,quest_length=5:seed={}"
TOOLSHOP_TASKS = 20_000


# ------------------------------------------------------------------------------------------- data
def _lines(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as handle:
        return sum(1 for _ in handle)


def _extend(path: Path, size: int, episodes: Callable[[int], Iterator[Any]]) -> int:
    """Append trajectories from `episodes(start)` until `path` holds `size` lines; the lines it holds stay."""
    have = _lines(path)
    if have >= size:
        return have
    with path.open("a", encoding="utf-8") as handle:
        for episode in episodes(have):
            handle.write(episode.model_dump_json(exclude_defaults=True) + "\n")
            handle.flush()
            have += 1
            if have % 500 == 0:
                print(f"  {path.name}: {have} / {size}", file=sys.stderr, flush=True)
            if have >= size:
                break
    return have


def _toolshop(start: int) -> Iterator[Any]:
    from worldsmith.envs.policies import make_policy
    from worldsmith.envs.recorder import episode_id_for, record_episode
    from worldsmith.envs.toolshop import ToolshopEnv

    envs: dict[int, Any] = {}
    index = start
    while True:
        db, task_index, policy = index // (2 * TOOLSHOP_TASKS), (index // 2) % TOOLSHOP_TASKS, ("expert", "probing")[index % 2]
        env = envs.setdefault(db, ToolshopEnv(dbs=[db]))
        task = f"db={db}:task={task_index}"
        yield record_episode(env, make_policy(policy, seed=0), task, seed=0, record_state=False,
                             episode_id=episode_id_for("toolshop", task, policy, 0))
        index += 1


def _textworld(data_dir: Path, path: Path) -> Callable[[int], Iterator[Any]]:
    def episodes(start: int) -> Iterator[Any]:
        from worldsmith.envs.policies import make_policy
        from worldsmith.envs.recorder import episode_id_for, record_episode
        from worldsmith.envs.textworld import TextWorldEnv
        from worldsmith.traces import Episode

        seen = {hashlib.sha256(json.dumps(_transitions(Episode.model_validate_json(line))).encode()).hexdigest()
                for line in path.read_text(encoding="utf-8").splitlines()} if path.exists() else set()
        env = TextWorldEnv(games_dir=str(data_dir / "tw-games"))
        attempt = int((data_dir / "textworld.next").read_text()) if start and (data_dir / "textworld.next").exists() \
            else start
        while True:
            game, seed = TW_GAME.format(1 + attempt % TW_GAMES), attempt // TW_GAMES
            episode = record_episode(env, make_policy("curious", seed=seed), game, seed=seed, record_state=False,
                                     max_steps=30, episode_id=episode_id_for("textworld", game, "curious", seed))
            attempt += 1
            (data_dir / "textworld.next").write_text(str(attempt))
            key = hashlib.sha256(json.dumps(_transitions(episode)).encode()).hexdigest()
            if key not in seen:
                seen.add(key)
                yield episode
    return episodes


def _transitions(episode: Any) -> list[tuple[str, str]]:
    return [(turn.action.raw or turn.action.name, turn.observation.text) for turn in episode.turns]


def _bfcl(files: list[Path], path: Path, size: int) -> int:
    from worldsmith.traces import Episode, read_traces

    missing = [str(f) for f in files if not f.exists()]
    if missing:
        raise SystemExit(f"BFCL collections not found: {', '.join(missing)} (pass --bfcl FILE ...)")
    if not path.exists():
        episodes = [item for item in read_traces(files) if isinstance(item, Episode)]
        episodes.sort(key=lambda e: hashlib.sha256(e.id.encode()).hexdigest())
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(e.model_dump_json(exclude_defaults=True) + "\n" for e in episodes), encoding="utf-8")
        tmp.replace(path)
    return _lines(path)


def prepare(env: str, size: int, data_dir: Path, bfcl: list[Path]) -> tuple[Path, int]:
    """The data file of `env` with at least `size` trajectories when it can have them, and how many it has."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / f"{env}.jsonl"
    if env == "toolshop":
        return path, _extend(path, size, _toolshop)
    if env == "textworld":
        return path, _extend(path, size, _textworld(data_dir, path))
    if env == "bfcl":
        return path, _bfcl(bfcl, path, size)
    raise SystemExit(f"unknown environment {env!r} (choose from {', '.join(ENVS)})")


# ------------------------------------------------------------------------------------------ child
def child(path: Path, size: int, folds: int) -> dict[str, Any]:
    """One build in this process: CPU seconds, peak RSS and every stage's CPU seconds."""
    from worldsmith.sim import build_simulator_book
    from worldsmith.traces import Episode
    from worldsmith.worldbook.pipeline import StageProgress

    def episodes() -> Iterator[Episode]:  # a stream, as `build_dataset` reads a workspace: the build keeps its views
        with path.open(encoding="utf-8") as handle:
            for line, _ in zip(handle, range(size), strict=False):
                yield Episode.model_validate_json(line)

    stage_cpu: dict[str, float] = {}
    started_at: dict[str, float] = {}

    def progress(event: StageProgress) -> None:
        if event.state == "started":
            started_at[event.stage] = time.process_time()
        elif event.state == "finished":
            stage_cpu[event.stage] = round(time.process_time() - started_at[event.stage], 4)

    cpu = time.process_time()
    result = build_simulator_book(episodes(), name=f"bench-{size}", route_folds=folds, progress=progress)
    cpu = time.process_time() - cpu
    report = result.report()
    assert result.artifacts is not None
    built = result.artifacts["episodes"]
    return {"trajectories": len(built), "turns": sum(len(e.turns) for e in built), "cpu_s": round(cpu, 3),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "stage_cpu_s": stage_cpu, "rules": report["rules"],
            "statuses": report["statuses"], "tool_rules": len(result.book.tool_rules)}


def run_child(path: Path, size: int, folds: int) -> dict[str, Any]:
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO / "lib"), str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, __file__, "--child", str(path), str(size), str(folds)], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the build of {size} from {path} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------------------- parent
def slope(a: dict[str, Any], b: dict[str, Any]) -> float:
    """The log-log slope of CPU seconds between two sizes (1.0 is linear)."""
    return round(math.log(max(b["cpu_s"], 1e-6) / max(a["cpu_s"], 1e-6)) / math.log(b["trajectories"]
                                                                                    / a["trajectories"]), 3)


def measure(path: Path, size: int, folds: int, repeats: int) -> dict[str, Any]:
    runs = [run_child(path, size, folds) for _ in range(repeats)]
    row = dict(runs[len(runs) // 2])
    row["cpu_s"] = round(statistics.median(run["cpu_s"] for run in runs), 3)
    row["peak_rss_mb"] = max(run["peak_rss_mb"] for run in runs)
    stages = runs[0]["stage_cpu_s"]
    median = {s: statistics.median(run["stage_cpu_s"][s] for run in runs) for s in stages}
    total = sum(median.values()) or 1.0
    row["stage_cpu_s"] = {s: round(v, 3) for s, v in median.items()}
    row["stage_share"] = {s: round(v / total, 3) for s, v in median.items()}
    row["runs_cpu_s"] = [run["cpu_s"] for run in runs]
    return row


def print_row(env: str, row: dict[str, Any], previous: dict[str, Any] | None) -> None:
    growth = f"{slope(previous, row):>6.2f}" if previous else f"{'':>6}"
    top = sorted(row["stage_share"].items(), key=lambda item: -item[1])[:4]
    print(f"{env:<10} {row['trajectories']:>6} {row['turns']:>7} {row['cpu_s']:>9.2f} {row['peak_rss_mb']:>8.0f} "
          f"{growth} {row['rules']:>5}  " + " ".join(f"{s} {v:.0%}" for s, v in top), flush=True)


def scaling(env: str, path: Path, available: int, sizes: list[int], folds: int, repeats: int,
            budget_s: float) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    for size in sizes:
        if size > available:
            skipped.append({"size": size, "why": f"only {available} trajectories"})
            continue
        if rows and rows[-1]["cpu_s"] * size / rows[-1]["trajectories"] * repeats > budget_s:
            skipped.append({"size": size, "why": f"linear extrapolation over the {budget_s:.0f} s budget"})
            continue
        rows.append(measure(path, size, folds, repeats))
        print_row(env, rows[-1], rows[-2] if len(rows) > 1 else None)
    slopes = [{"from": a["trajectories"], "to": b["trajectories"], "slope": slope(a, b)}
              for a, b in zip(rows, rows[1:], strict=False)]
    return {"env": env, "data": str(path), "sizes": rows, "slopes": slopes,
            "slope_first_to_last": slope(rows[0], rows[-1]) if len(rows) > 1 else None, "skipped": skipped}


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["--child"]:
        path, size, folds = sys.argv[2:5]
        print(json.dumps(child(Path(path), int(size), int(folds))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", choices=ENVS, default=list(ENVS))
    parser.add_argument("--sizes", nargs="+", type=int, default=[100, 300, 1000, 3000, 10000])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--route-folds", type=int, default=5, help="0: the book's stages only, no route table")
    parser.add_argument("--budget-s", type=float, default=900.0,
                        help="skip a size whose linearly extrapolated CPU seconds (all repeats) exceed this")
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/worldsmith-build-data"))
    parser.add_argument("--bfcl", nargs="+", type=Path, default=DEFAULT_BFCL, help="BFCL collections to pool")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "build.json")
    options = parser.parse_args(argv)
    sizes = sorted(set(options.sizes))

    print(f"sim.build_simulator_book, route_folds={options.route_folds}, one process per build, median of "
          f"{options.repeats}; CPU seconds, peak RSS, log-log slope of CPU seconds from the previous size")
    print(f"{'env':<10} {'trajs':>6} {'turns':>7} {'CPU s':>9} {'RSS MB':>8} {'slope':>6} {'rules':>5}  stage shares")
    results = []
    for env in options.envs:
        path, available = prepare(env, max(sizes), options.data_dir, options.bfcl)
        results.append(scaling(env, path, available, sizes, options.route_folds, options.repeats, options.budget_s))
        for skip in results[-1]["skipped"]:
            print(f"{env:<10} {skip['size']:>6}  skipped: {skip['why']}")

    result = {"benchmark": "worldbook_build_scale", "date": datetime.now(UTC).isoformat(timespec="seconds"),
              "machine": {"platform": platform.platform(), "python": platform.python_version(),
                          "cpus": os.cpu_count()},
              "route_folds": options.route_folds, "repeats": options.repeats, "envs": results}
    options.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = options.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(options.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
