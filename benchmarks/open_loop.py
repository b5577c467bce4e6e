"""Held-out fidelity teacher-forced and open loop, harness against nearest evidence, per environment and tool.

    OMP_NUM_THREADS=1 python benchmarks/open_loop.py --split-by task \
        --env toolshop-scripted=/tmp/ts/scripted.jsonl --env bfcl=bfcl.jsonl [--resamples 2000] [--out FILE]

The same books and episodes as `benchmarks/fidelity.py` (its `--env` syntax and splits), run under both
protocols: teacher-forced (`next_obs_records`: each turn after the real prefix) and open loop
(`drift_records`: each recorded action predicted and committed after the simulator's own answers, which is
how an agent meets a simulator). Knowable turns, per protocol: teacher-forced, a turn is knowable when its
observation shows no value absent from the book's evidence and the real prefix; open loop, when it shows no
value absent from the book's evidence and the episode's task, opening and own actions (`evals.novelty`,
`open_loop=True`: the real observations of earlier turns are not given). Prints a Markdown table per protocol and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from fidelity import _interval, env_episodes, per_tool, write_results  # type: ignore[import-not-found]

from worldsmith.evals.eval_records import EvalRecord
from worldsmith.evals.novelty import NoveltyIndex
from worldsmith.evals.protocols import Scorer, drift_records, next_obs_records
from worldsmith.sim.baselines import NearestEvidence
from worldsmith.sim.harness import Harness
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.traces import Episode

OUT = Path(__file__).resolve().parent / "results" / "open_loop.json"
PROTOCOLS = {"teacher-forced": next_obs_records, "open-loop": drift_records}


def evaluate(name: str, construction: list[Episode], evaluation: list[Episode], resamples: int) -> dict[str, Any]:
    started = time.perf_counter()
    book = build_simulator_book(construction, name=name).book
    build_s = time.perf_counter() - started
    novelty = NoveltyIndex.for_book(book)
    models = {"harness": Harness(book), "nearest": NearestEvidence(book)}
    novel: dict[str, list[bool]] = {"teacher-forced": [], "open-loop": []}
    clusters: list[str] = []
    tools: list[str] = []
    for episode in evaluation:
        novel["teacher-forced"] += [bool(v) for v in novelty.episode(episode)]
        novel["open-loop"] += [bool(v) for v in novelty.episode(episode, open_loop=True)]
        clusters += [episode.id] * len(episode.turns)
        tools += [turn.action.name for turn in episode.turns]
    result: dict[str, Any] = {
        "construction": {"episodes": len(construction), "turns": sum(len(e.turns) for e in construction)},
        "evaluation": {"episodes": len(evaluation), "turns": len(clusters)},
        "book": {"rules": len(book.rules), "supported": len(book.supported_rules()), "build_s": round(build_s, 2)},
    }
    for protocol, run in PROTOCOLS.items():
        rows: dict[str, list[EvalRecord]] = {m: [] for m in models}
        started = time.perf_counter()
        for episode in evaluation:
            for method, model in models.items():
                rows[method] += run(model, episode, Scorer())
        exact = {m: [float(r.exact_match or 0.0) for r in rows[m]] for m in models}
        known = [i for i, flag in enumerate(novel[protocol]) if not flag]
        diff = [h - n for h, n in zip(exact["harness"], exact["nearest"], strict=True)]
        entry: dict[str, Any] = {"novel_share": round(sum(novel[protocol]) / len(clusters), 4) if clusters else None,
                                 "seconds": round(time.perf_counter() - started, 1),
                                 "sources": dict(Counter(r.source or "-" for r in rows["harness"]).most_common())}
        for method in models:
            entry[method] = {"all": _interval(clusters, exact[method], resamples),
                             "knowable": _interval([clusters[i] for i in known], [exact[method][i] for i in known],
                                                   resamples)}
        entry["harness - nearest"] = {
            "all": _interval(clusters, diff, resamples),
            "knowable": _interval([clusters[i] for i in known], [diff[i] for i in known], resamples)}
        entry["per_tool"] = per_tool(tools, novel[protocol], exact)
        result[protocol] = entry
    return result


def _cell(entry: dict[str, Any]) -> str:
    return "-" if entry["mean"] is None else f"{entry['mean']:+.3f} [{entry['low']:+.3f}, {entry['high']:+.3f}]"


def _mean(entry: dict[str, Any]) -> str:
    return "-" if entry["mean"] is None else f"{entry['mean']:.3f}"


def table(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| env | protocol | turns | novel | harness all / knowable | nearest all / knowable "
             "| harness - nearest, all | harness - nearest, knowable |", "|---|---|---|---|---|---|---|---|"]
    for env, r in results.items():
        for protocol in PROTOCOLS:
            p = r[protocol]
            h, n, d = p["harness"], p["nearest"], p["harness - nearest"]
            lines.append(f"| {env} | {protocol} | {r['evaluation']['turns']} | {p['novel_share']:.2f} "
                         f"| {_mean(h['all'])} / {_mean(h['knowable'])} | {_mean(n['all'])} / {_mean(n['knowable'])} "
                         f"| {_cell(d['all'])} | {_cell(d['knowable'])} |")
    return "\n".join(lines)


def tool_table(results: dict[str, dict[str, Any]], protocol: str = "open-loop", limit: int = 30) -> str:
    lines = [f"| env | tool ({protocol}) | turns | knowable | harness knowable | nearest knowable | harness all "
             "| nearest all |", "|---|---|---|---|---|---|---|---|"]
    for env, r in results.items():
        for tool, row in list(r[protocol]["per_tool"].items())[:limit]:
            cells = ["-" if row[k] is None else f"{row[k]:.3f}" for k in
                     ("harness knowable", "nearest knowable", "harness all", "nearest all")]
            lines.append(f"| {env} | {tool} | {row['turns']} | {row['knowable']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", action="append", required=True, metavar="NAME=CONSTRUCTION[:EVALUATION]")
    parser.add_argument("--resamples", type=int, default=2_000)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--split-by", choices=["family", "task"], default="task")
    parser.add_argument("--per-tool", action="store_true", help="also print the open-loop per-tool table")
    args = parser.parse_args()
    results: dict[str, dict[str, Any]] = {}
    for spec in args.env:
        name, parts, construction, evaluation = env_episodes(spec, args.split_by)
        results[name] = {"sources": parts, **evaluate(name, construction, evaluation, args.resamples)}
        print(f"{name}: " + json.dumps({p: results[name][p]["harness - nearest"] for p in PROTOCOLS}), flush=True)
    print(table(results))
    if args.per_tool:
        print(tool_table(results))
    write_results(args.out, results)


if __name__ == "__main__":
    main()
