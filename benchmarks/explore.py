"""Active collection at equal real-step budgets: explore vs random vs expert vs mix, books built from scratch.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/explore.py [--envs textworld toolshop] [--seeds 0 1 2]
        [--strategies explore random expert mix] [--scale 1.0] [--workspace /tmp/explore-bench]
        [--out benchmarks/results/explore.json]

For each environment, each strategy and each seed, `evals.explore.explore` spends the large budget in `rounds`
rounds into a fresh dataset and book (from scratch), rebuilding and scoring the book after every round; the small
budget is a round boundary of the same run (the book after that many real steps), so one run gives both budgets
and the whole curve. Construction tasks and held-out tasks never meet:

- TextWorld: `custom` games (tw-make seeds 1..N) to collect on; unseen games (seeds 1001..) held out;
- toolshop: tasks 0..N of database 0 to collect on; tasks 10000.. held out (other customers and goals).

Two held-out sets per environment, recorded once on the unseen tasks: by the expert (on-path turns only: the turns
expert collection sees by construction) and by an exploratory policy (TextWorld: `curious`; toolshop: `probing`:
re-reads, empty queries, failing calls). A simulator that trains or evaluates agents must answer the turns agents
take off the expert's path, so the exploratory set is the primary one; the expert set shows what exploring costs
on-path. Metric: held-out next-observation exact match of the no-model harness under teacher forcing. Paired
difference explore - baseline: per held-out turn, the mean over seeds of the difference, with a 95%
cluster-bootstrap interval over held-out episodes (`evals.bootstrap.bootstrap_mean`). Prints Markdown, writes JSON.
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

from worldsmith.envs.collect import CollectConfig, collect  # noqa: E402
from worldsmith.envs.textworld import TextWorldEnv  # noqa: E402
from worldsmith.evals.bootstrap import bootstrap_mean  # noqa: E402
from worldsmith.evals.explore import ExploreConfig, ExploreReport, explore  # noqa: E402
from worldsmith.evals.heldout import HeldOut, load_heldout, score_version  # noqa: E402
from worldsmith.workspace import Workspace  # noqa: E402
from worldsmith.worldbook.store import WorldbookStore  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "explore.json"
# Series beyond the four strategies: a name for a strategy at another weight.
VARIANTS: dict[str, dict[str, Any]] = {  # ExploreConfig fields of each
    "greedy": {"strategy": "explore", "explore": 1.0},  # pure uncertainty-greedy exploration, no expert steps
    "greedy-writes": {"strategy": "explore", "explore": 1.0, "policy_options": {"write_weight": 1.0}},  # writes too
    "anneal": {"strategy": "explore", "explore_schedule": [1.0, 0.75, 0.5]},  # greedy while the book is small
    "anneal-writes": {"strategy": "explore", "explore_schedule": [1.0, 0.75, 0.5],
                      "policy_options": {"write_weight": 1.0}},  # the schedule, writes not held back
}
TW_KIND = "custom:world_size=6,nb_objects=12,quest_length=10"

# Per environment: construction and held-out tasks, budgets (small is a round boundary of the large run),
# the step cap per episode and the exploratory policy that records the off-path held-out set.
SETUPS: dict[str, dict[str, Any]] = {
    "textworld": {"tasks": [f"{TW_KIND}:seed={s}" for s in range(1, 25)],
                  "heldout": [f"{TW_KIND}:seed={s}" for s in range(1001, 1009)],
                  "small": 100, "large": 200, "rounds": 4, "max_steps": 30, "explorer": "curious"},
    "toolshop": {"tasks": [f"db=0:task={i}" for i in range(60)],
                 "heldout": [f"db=0:task={i}" for i in range(10_000, 10_016)],
                 "small": 100, "large": 200, "rounds": 4, "max_steps": 20, "explorer": "probing"},
}


def heldout_sets(workspace: Workspace, env: str, setup: dict[str, Any], env_kwargs: dict[str, Any]) -> dict[str, HeldOut]:
    """The expert and the exploratory held-out sets, each its own dataset, recorded once."""
    out = {}
    for recorder in ("expert", setup["explorer"]):
        dataset = f"{env}-heldout-{recorder}"
        if dataset not in workspace.list_datasets():
            collect(workspace, dataset, CollectConfig(env=env, tasks=setup["heldout"], policy=recorder, workers=0,
                                                      keep="all", max_steps=40, env_kwargs=env_kwargs))
        ids = tuple(e.id for e in workspace.dataset(dataset).iter_episodes() if e.turns)
        out[recorder if recorder == "expert" else "exploratory"] = HeldOut(dataset=dataset, episodes=ids)
    return out


def turn_scores(workspace: Workspace, book: str, version: str, heldout: HeldOut,
                held: tuple[list[Any], int]) -> dict[tuple[str, int], float]:
    """Exact match per held-out turn of one book version (cached by `score_version`)."""
    loaded = WorldbookStore(workspace.root / "worldbooks").load(book, version)
    scores = score_version(loaded, heldout, workspace, episodes=held[0], revision=held[1])
    return {(t.episode_id, t.turn): t.exact_match for t in scores.turns}


def paired(a: list[dict[tuple[str, int], float]], b: list[dict[tuple[str, int], float]]) -> dict[str, float]:
    """Mean over seeds of a - b per turn, with its cluster-bootstrap interval over held-out episodes."""
    keys = sorted(set.intersection(*(set(s) for s in a + b)))
    diffs = [sum(sa[k] - sb[k] for sa, sb in zip(a, b, strict=True)) / len(a) for k in keys]
    interval = bootstrap_mean([k[0] for k in keys], diffs, resamples=2000, seed=0)
    return {"diff": round(interval.mean, 4), "low": round(interval.low, 4), "high": round(interval.high, 4),
            "turns": len(keys), "episodes": interval.trajectories}


def run_env(workspace: Workspace, env: str, args: argparse.Namespace) -> dict[str, Any]:
    setup = dict(SETUPS[env])
    for key in ("small", "large"):
        setup[key] = max(setup["rounds"], round(setup[key] * args.scale))
    env_kwargs = {"games_dir": str(args.games_dir)} if env == "textworld" else {}
    if env == "textworld":
        games = TextWorldEnv(games_dir=str(args.games_dir))
        for task in setup["tasks"] + setup["heldout"]:
            games.game_path(task)
    sets = heldout_sets(workspace, env, setup, env_kwargs)
    held = {name: load_heldout(h, workspace) for name, h in sets.items()}
    small_round = setup["rounds"] * setup["small"] // setup["large"]
    reports: dict[str, dict[int, ExploreReport]] = {}
    seconds: dict[str, float] = {}
    for strategy in args.strategies:
        for seed in args.seeds:
            name = f"{env}-{strategy}-s{seed}"
            started = time.perf_counter()
            fields = {"strategy": strategy, "explore": args.explore, **VARIANTS.get(strategy, {})}
            config = ExploreConfig(env=env, budget=setup["large"], rounds=setup["rounds"], tasks=setup["tasks"],
                                   seed=seed, max_steps=setup["max_steps"], heldout=sets["exploratory"],
                                   env_kwargs=env_kwargs, **fields)
            report = explore(workspace, name, config)
            reports.setdefault(strategy, {})[seed] = report
            seconds[name] = round(sum(v for r in report.rounds for v in r.seconds.values()), 1)  # resumed ones too
            print(f"  {name}: {[r.exact_match for r in report.rounds]} ({seconds[name]} s; this call "
                  f"{time.perf_counter() - started:.0f} s)", flush=True)
    out: dict[str, Any] = {"setup": {k: v for k, v in setup.items() if k not in ("tasks", "heldout")},
                           "construction_tasks": len(setup["tasks"]), "heldout_tasks": setup["heldout"],
                           "heldout_sets": {n: {"label": h.label(), "turns": sum(len(e.turns) for e in held[n][0])}
                                            for n, h in sets.items()},
                           "seconds": seconds, "budgets": {}, "curves": {}}
    budget_rounds = {"small": small_round - 1, "large": setup["rounds"] - 1}
    for set_name, heldout in sets.items():
        # The primary (exploratory) set is scored after every round (the curve); the expert set at the two budgets.
        wanted = range(setup["rounds"]) if set_name == "exploratory" else sorted(budget_rounds.values())
        scores = {s: {seed: {i: turn_scores(workspace, r.book, r.rounds[i].version, heldout, held[set_name])
                             for i in wanted} for seed, r in by_seed.items()} for s, by_seed in reports.items()}
        curve = {}
        for strategy, by_seed in scores.items():
            points = []
            for index in wanted:
                means = [sum(rows[index].values()) / len(rows[index]) for rows in by_seed.values()]
                steps = reports[strategy][args.seeds[0]].rounds[index].total_steps
                points.append({"steps": steps, "exact_match": round(sum(means) / len(means), 4),
                               "per_seed": [round(m, 4) for m in means],
                               "rules": [reports[strategy][s].rounds[index].rules for s in args.seeds]})
            curve[strategy] = points
        out["curves"][set_name] = curve
        for label, index in budget_rounds.items():
            point = list(wanted).index(index)
            entry: dict[str, Any] = {"steps": reports[args.strategies[0]][args.seeds[0]].rounds[index].total_steps,
                                     "exact_match": {s: curve[s][point]["exact_match"] for s in curve},
                                     "per_seed": {s: curve[s][point]["per_seed"] for s in curve}, "explore_minus": {}}
            explorers = [s for s in scores if VARIANTS.get(s, {"strategy": s})["strategy"] == "explore"]
            for mine in explorers:
                for other in scores:
                    if other not in explorers:
                        key = other if mine == "explore" else f"{mine} - {other}"
                        entry["explore_minus"][key] = paired([scores[mine][seed][index] for seed in args.seeds],
                                                             [scores[other][seed][index] for seed in args.seeds])
            out["budgets"].setdefault(set_name, {})[label] = entry
    return out


def markdown(results: dict[str, Any]) -> str:
    lines = []
    for env, result in results["envs"].items():
        for set_name, budgets in result["budgets"].items():
            lines.append(f"\n**{env}, held-out set {set_name}** ({result['heldout_sets'][set_name]['turns']} turns)\n")
            strategies = list(next(iter(budgets.values()))["exact_match"])
            pairs = list(next(iter(budgets.values()))["explore_minus"])
            lines.append("| budget (real steps) | " + " | ".join(strategies) + " | "
                         + " | ".join(f"{p if ' - ' in p else 'explore - ' + p} [95% CI]" for p in pairs) + " |")
            lines.append("|---" * (1 + len(strategies) + len(pairs)) + "|")
            for label, entry in budgets.items():
                cells = [f"{entry['exact_match'][s]:.3f}" for s in strategies]
                cells += [f"{d['diff']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"
                          for d in entry["explore_minus"].values()]
                lines.append(f"| {label} ({entry['steps']}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=list(SETUPS), choices=list(SETUPS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--strategies", nargs="+", default=["explore", "random", "expert", "mix", "greedy"],
                        help=f"strategies, and variants of explore: {', '.join(VARIANTS)}")
    parser.add_argument("--explore", type=float, default=0.5, help="the exploring policy's weight; mix's expert share")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply both budgets (a pilot: 0.2)")
    parser.add_argument("--workspace", type=Path, default=Path("/tmp/explore-bench"))
    parser.add_argument("--games-dir", type=Path, default=Path("/tmp/explore-bench-games"))
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--merge", nargs="+", type=Path, metavar="JSON",
                        help="combine the results of runs over other environments (run in parallel) into --out")
    args = parser.parse_args()
    if args.merge:
        parts = [json.loads(path.read_text(encoding="utf-8")) for path in args.merge]
        merged = {**parts[0], "envs": {env: r for part in parts for env, r in part["envs"].items()},
                  "wall_s": max(part["wall_s"] for part in parts), "merged_from": [str(p) for p in args.merge]}
        print(markdown(merged))
        args.out.write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
        return
    workspace = Workspace(args.workspace)
    started = time.perf_counter()
    results: dict[str, Any] = {
        "benchmark": "explore", "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": "2-core shared CPU host", "python": platform.python_version(), "seeds": args.seeds,
        "strategies": args.strategies, "explore_weight": args.explore, "scale": args.scale, "envs": {},
    }
    for env in args.envs:
        print(f"{env}:", flush=True)
        results["envs"][env] = run_env(workspace, env, args)
    results["wall_s"] = round(time.perf_counter() - started, 1)
    table = markdown(results)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out} in {results['wall_s']} s")


if __name__ == "__main__":
    main()
