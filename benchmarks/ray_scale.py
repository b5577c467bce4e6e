"""Collect and eval wall time: in this process / local workers against Ray with 1 and 2 workers.

    OMP_NUM_THREADS=1 python benchmarks/ray_scale.py [--repeats 3] [--tasks 18] [--copies 4]
        [--out benchmarks/results/ray_scale.json]

Collect: the expert on the first `--tasks` shell chores (a real bash in a sandbox), into a fresh
workspace each repeat, with `workers=1` (one local environment process), `workers=2`, and as Ray
tasks on a local Ray started with 1 and with 2 CPUs. Eval: `harness,nearest` next-obs on the
bundled ALFWorld expert episodes (book built from one half of the families, evaluated on the other,
each held-out episode `--copies` times under new ids so there are enough units to share),
in this process, in a 2-process pool, and on Ray with 1 and 2 CPUs. Every arm runs `--repeats`
times and reports the median; Ray's start-up is measured apart (it is paid once per run from the
CLI, not per unit). Ray keeps its worker processes between runs, so after the first repeat its
workers are warm (imports done); the local process workers are spawned afresh by every run. Each arm's outputs are checked equal to the first arm's (modulo timing) so a
fast wrong arm cannot win. Writes benchmarks/results/ray_scale.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import orjson  # noqa: E402

from worldsmith import Workspace  # noqa: E402
from worldsmith.envs.collect import CollectConfig, collect, list_tasks, run_dir  # noqa: E402
from worldsmith.evals import EvalConfig, run_eval  # noqa: E402
from worldsmith.sim.route_learning import build_simulator_book  # noqa: E402
from worldsmith.traces import Episode, read_traces  # noqa: E402
from worldsmith.util.executors import ray_session  # noqa: E402
from worldsmith.worldbook.build import trajectory_family  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data_samples" / "collected" / "alfworld_expert.jsonl"
TIMING = {"seconds", "latency_s", "run"}


def _median_run(repeats: int, run: Callable[[Path], Any]) -> tuple[float, list[float], Any]:
    times, last = [], None
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="ray-scale-") as folder:
            began = time.perf_counter()
            out = run(Path(folder))
            times.append(round(time.perf_counter() - began, 3))
            last = out
    return statistics.median(times), times, last


def _collect_arm(tasks: list[str], workers: int, ray: bool) -> Callable[[Path], Any]:
    def run(folder: Path) -> Any:
        config = CollectConfig(env="shell", tasks=tasks, workers=workers, ray_address="local" if ray else None)
        report = collect(Workspace(folder / "ws"), "chores", config)
        if report.counts() != {"ok": len(tasks)}:
            raise SystemExit(f"collect arm failed: {report.counts()}")
        lines = (run_dir(folder / "ws", "chores") / "episodes.jsonl").read_bytes().splitlines()
        return sorted(lines, key=lambda line: orjson.loads(line)["id"])
    return run


def _eval_split(copies: int) -> tuple[Any, list[Episode], list[Episode]]:
    """Book from half the families; the other half evaluated, each episode `copies` times under new ids."""
    episodes = [e for e in read_traces([SAMPLE]) if isinstance(e, Episode)]
    families = sorted({trajectory_family(e) for e in episodes})
    held_families = set(families[1::2])
    held = [e for e in episodes if trajectory_family(e) in held_families]
    built = [e for e in episodes if trajectory_family(e) not in held_families]
    copied = [e.model_copy(update={"id": f"{e.id}-c{k}"}) for k in range(copies) for e in held]
    return build_simulator_book(built, name="alfworld").book, built, copied


def _eval_arm(split: tuple[Any, list[Episode], list[Episode]], workers: int, ray: bool) -> Callable[[Path], Any]:
    book, built, held = split

    def run(folder: Path) -> Any:
        config = EvalConfig(name="bench", book="alfworld", dataset="samples", methods=["harness", "nearest"],
                            resamples=1000, workers=workers, ray_address="local" if ray else None)
        result = run_eval(config, folder / "ws", book=book, episodes=held, construction=built)
        return result.records[[c for c in result.records.columns if c not in TIMING]]
    return run


def _arms(args: argparse.Namespace) -> dict[str, Any]:
    import ray

    tasks = list_tasks("shell")[: args.tasks]
    split = _eval_split(args.copies)
    results: dict[str, Any] = {"collect": {}, "eval": {}, "ray_start_s": {}}
    reference: dict[str, Any] = {}

    def measure(kind: str, name: str, run: Callable[[Path], Any]) -> None:
        median, times, out = _median_run(args.repeats, run)
        same = True
        if kind in reference:
            same = bool(out.equals(reference[kind])) if hasattr(out, "equals") else out == reference[kind]
        else:
            reference[kind] = out
        if not same:
            raise SystemExit(f"{kind} arm {name}: outputs differ from the first arm's")
        results[kind][name] = {"median_s": round(median, 3), "runs_s": times}
        print(f"{kind:8s} {name:22s} median {median:7.2f} s  runs {times}", flush=True)

    measure("collect", "local workers=1", _collect_arm(tasks, 1, ray=False))
    measure("collect", "local workers=2", _collect_arm(tasks, 2, ray=False))
    measure("eval", "in-process", _eval_arm(split, 0, ray=False))
    measure("eval", "process pool 2", _eval_arm(split, 2, ray=False))
    for cpus in (1, 2):
        began = time.perf_counter()
        ray_session("local", num_cpus=cpus)
        results["ray_start_s"][str(cpus)] = round(time.perf_counter() - began, 2)
        try:
            measure("collect", f"ray {cpus} worker(s)", _collect_arm(tasks, 0, ray=True))
            measure("eval", f"ray {cpus} worker(s)", _eval_arm(split, 0, ray=True))
        finally:
            ray.shutdown()
    results["sizes"] = {"collect_items": len(tasks), "eval_units": len(split[2]) * 2,
                        "eval_turns": sum(len(e.turns) for e in split[2])}
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=18, help="shell chores to collect (at most 18)")
    parser.add_argument("--copies", type=int, default=4, help="copies of each held-out episode (more eval units)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "ray_scale.json")
    args = parser.parse_args(argv)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = os.getloadavg()
    results = _arms(args)
    out = {"benchmark": "ray_scale", "started": started, "repeats": args.repeats,
           "host": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": sys.version.split()[0],
                    "load_before": [round(x, 2) for x in load_before],
                    "load_after": [round(x, 2) for x in os.getloadavg()]},
           **results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
