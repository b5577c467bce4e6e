"""Real-environment step cost: steps per second of each adapter under its expert policy.

    OMP_NUM_THREADS=1 python benchmarks/envs.py [--envs alfworld textworld ...] [--episodes 3]

For each environment, plays the expert on the first N tasks (reset excluded from the timing),
times every `step()` and reports the median step time, steps/s (1 / median) and the mean reset
time; writes benchmarks/results/envs.json. Unavailable environments are reported, not fatal.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

from worldsmith.envs import ExpertPolicy, make, registry  # noqa: E402


def measure(name: str, episodes: int, tasks: list[str] | None) -> dict[str, Any]:
    env_spec = registry()[name]
    if env_spec.missing():
        return {"env": name, "error": f"not installed: {', '.join(env_spec.missing())}"}
    env = make(name)
    step_seconds: list[float] = []
    reset_seconds: list[float] = []
    wins = played = 0
    try:
        chosen = tasks or env.tasks()[:episodes]
        for task in chosen[:episodes]:
            started = time.perf_counter()
            try:
                observation, info = env.reset(task, seed=0)
            except Exception as error:  # noqa: BLE001 - a benchmark reports, it does not stop
                print(f"  {name} {task}: reset failed: {error}", file=sys.stderr)
                continue
            reset_seconds.append(time.perf_counter() - started)
            policy = ExpertPolicy()
            policy.reset(env, observation, info)
            final: dict[str, Any] = info
            for _ in range(env_spec.max_steps):
                action = policy.act(observation, final)
                if action is None:
                    break
                started = time.perf_counter()
                result = env.step(action)
                step_seconds.append(time.perf_counter() - started)
                observation, final = result.observation, result.info
                if result.terminated or result.truncated:
                    break
            played += 1
            wins += bool(final.get("won"))
    finally:
        env.close()
    if not step_seconds:
        return {"env": name, "error": "no steps measured"}
    median = statistics.median(step_seconds)
    return {
        "env": name, "episodes": played, "won": wins, "steps": len(step_seconds),
        "median_step_ms": round(median * 1000, 3), "steps_per_s": round(1 / median, 1),
        "p90_step_ms": round(sorted(step_seconds)[int(0.9 * (len(step_seconds) - 1))] * 1000, 3),
        "mean_reset_s": round(statistics.fmean(reset_seconds), 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=["alfworld", "textworld", "scienceworld", "bfcl", "shell",
                                                       "agentdojo-workspace", "agentdojo-slack", "agentdojo-travel"])
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--tasks", nargs="+", help="task ids (with a single --envs)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "envs.json")
    options = parser.parse_args(argv)
    rows = []
    for name in options.envs:
        row = measure(name, options.episodes, options.tasks)
        rows.append(row)
        if "error" in row:
            print(f"{name:<20} {row['error']}")
        else:
            print(f"{name:<20} {row['steps_per_s']:>9,.1f} steps/s  median {row['median_step_ms']:.2f} ms  "
                  f"p90 {row['p90_step_ms']:.2f} ms  reset {row['mean_reset_s']:.2f} s  "
                  f"({row['steps']} steps, {row['won']}/{row['episodes']} won)")
    result = {
        "benchmark": "env_steps", "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()},
        "results": rows,
    }
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
