"""What the exploring policy costs per step: `assess` per candidate and `act` per exploring step, real envs.

    python benchmarks/exploring_cost.py [--episodes 3] [--games-dir DIR] [--out benchmarks/results/exploring_cost.json]

TextWorld: the book built from `data_samples/collected/textworld_curious.jsonl`, episodes of a tw-make cooking
game (its admissible list is the candidate pool, ~20-35 actions); toolshop: the book from
`data_samples/toolshop/expert.jsonl`, its first tasks (the probing components propose the candidates). Each env
is played with `ExploringPolicy` (TextWorld explore=0.5, so the expert reaches the kitchen's long admissible
lists; toolshop explore=1.0) for at most `--steps` steps, the policy's `act` on exploring steps timed apart from
the environment's step; prints and writes the median and p90 milliseconds per exploring
step, per assessed candidate, and the candidates per step (CPU time beside wall time: a shared machine's other
tenants disturb it less).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
COOKING = "cooking:recipe=2,take=1,go=6,open,cut:seed=11"


class _Timed:
    """A policy wrapper that times `act` on exploring steps (wall and CPU), and `rank_actions` over the whole
    admissible list at every step where the environment lists one."""

    def __init__(self, policy: Any) -> None:
        self.policy, self.name = policy, policy.name
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.ranked: list[tuple[int, float]] = []  # (admissible actions, ms to rank them all)
        self.env: Any = None

    def reset(self, env: Any, observation: Any, info: dict[str, Any]) -> None:
        self.env = env
        self.policy.reset(env, observation, info)

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        from worldsmith.sim import rank_actions

        admissible = self.env.admissible_actions()
        if admissible:  # the harness is one step behind here (it observes in `act`): the cost is the same
            began = time.perf_counter()
            rank_actions(self.policy.harness, admissible)
            self.ranked.append((len(admissible), 1000 * (time.perf_counter() - began)))
        before = len(self.policy.candidate_counts)
        began, cpu = time.perf_counter(), time.process_time()
        action = self.policy.act(observation, info)
        if len(self.policy.candidate_counts) > before:  # an exploring step
            self.wall.append(time.perf_counter() - began)
            self.cpu.append(time.process_time() - cpu)
        return action


def _summary(timed: _Timed, candidates: list[int]) -> dict[str, Any]:
    wall = sorted(1000 * s for s in timed.wall)
    per = [1000 * s / max(1, n) for s, n in zip(timed.wall, candidates, strict=False)]
    ranked = {}
    if timed.ranked:
        ranked = {"rank_admissible_actions_median": statistics.median(n for n, _ in timed.ranked),
                  "rank_admissible_actions_max": max(n for n, _ in timed.ranked),
                  "rank_admissible_ms_median": round(statistics.median(ms for _, ms in timed.ranked), 2),
                  "rank_admissible_ms_max": round(max(ms for _, ms in timed.ranked), 2)}
    return {**ranked, "steps": len(wall), "ms_per_step_median": round(statistics.median(wall), 2),
            "ms_per_step_p90": round(wall[int(0.9 * (len(wall) - 1))], 2),
            "cpu_ms_per_step_median": round(1000 * statistics.median(timed.cpu), 2),
            "candidates_per_step_median": statistics.median(candidates) if candidates else 0,
            "ms_per_candidate_median": round(statistics.median(per), 3) if per else None}


def _run(env: Any, book: Any, tasks: list[str], steps: int, explore: float) -> dict[str, Any]:
    from worldsmith.envs import record_episode
    from worldsmith.sim import ExploringPolicy

    timed: _Timed | None = None
    candidates: list[int] = []
    for seed, task in enumerate(tasks):
        policy = ExploringPolicy(book, seed=seed, explore=explore)
        if timed is None:
            timed = _Timed(policy)
        timed.policy = policy
        record_episode(env, timed, task, max_steps=steps, seed=0)
        candidates += policy.candidate_counts
    assert timed is not None
    return _summary(timed, candidates)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--games-dir", default=None, help="tw-make cache (default: a temporary folder)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "exploring_cost.json"))
    args = parser.parse_args(argv)

    from benchmarks.fidelity import _read

    from worldsmith.envs import make
    from worldsmith.traces import Episode
    from worldsmith.worldbook import build_worldbook

    def sample(path: Path) -> list[Episode]:
        return [Episode.model_validate({k: v for k, v in json.loads(line).items() if k != "format"})
                for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch:
        tw = make("textworld", games_dir=args.games_dir or scratch)
        tw.game_path(COOKING)
        book = build_worldbook(sample(ROOT / "data_samples" / "collected" / "textworld_curious.jsonl"), name="tw").book
        results["textworld"] = _run(tw, book, [COOKING] * args.episodes, args.steps, 0.5)
        tw.close()
    shop_book = build_worldbook(_read(str(ROOT / "data_samples" / "toolshop" / "expert.jsonl")), name="shop").book
    results["toolshop"] = _run(make("toolshop"), shop_book, [f"db=0:task={i}" for i in range(args.episodes)],
                               args.steps, 1.0)
    report = {"benchmark": "exploring_cost", "when": datetime.now(UTC).isoformat(timespec="seconds"),
              "host": platform.node(), "python": platform.python_version(), "episodes": args.episodes,
              "steps": args.steps, "results": results}
    print(json.dumps(report, indent=2))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    main()
