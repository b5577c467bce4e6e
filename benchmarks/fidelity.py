"""Next-observation fidelity of the no-model harness against nearest evidence, held out, per environment.

    OMP_NUM_THREADS=1 python benchmarks/fidelity.py \
        --env 'textworld=tw.jsonl@seed=[1-8]$:tw.jsonl@seed=10[1-8]$' \
        --env 'bfcl=bfcl.jsonl@multi_turn_base:bfcl.jsonl@multi_turn_long_context' \
        --env alfworld=alf.jsonl [--resamples 10000] [--out benchmarks/results/fidelity.json] \
        [--split-by family|task] [--per-tool]

Each `--env NAME=CONSTRUCTION[:EVALUATION]` names JSONL files of recorded episodes (`worldsmith
export --format jsonl`), each optionally `FILE@REGEX` to keep the episodes whose task id matches.
With one part, its trajectory families are split 75/25 (by a hash of the family, as `cross_fit`
orders them; `--split-by task`: by task id instead, so construction and evaluation share no task). The worldbook is built from the construction episodes with the
default deterministic builder (its route table included); both world models then run the next-obs
protocol (`evals.protocols.next_obs_records`: every turn predicted from its real prefix) on the
evaluation episodes. Reported per environment: exact match on all turns and on knowable turns (no
novel value, `evals.novelty`), the novel share, the paired difference harness - nearest with its 95%
cluster-bootstrap interval (clusters = episodes) on both, the harness's routes, each model's `done`
recall (ending turns predicted to end) and false alarms (other turns predicted to end), and its
median predict latency; and per tool (action name) the turns, knowable turns and each model's exact match on
them (`--per-tool` prints that table too). Prints a Markdown table and writes JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import re
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from worldsmith.evals.bootstrap import bootstrap_mean
from worldsmith.evals.eval_records import EvalRecord
from worldsmith.evals.novelty import NoveltyIndex
from worldsmith.evals.protocols import Scorer, next_obs_records
from worldsmith.sim.baselines import NearestEvidence
from worldsmith.sim.harness import Harness
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.traces import Episode
from worldsmith.worldbook.build import trajectory_family

OUT = Path(__file__).resolve().parent / "results" / "fidelity.json"


def load(spec: str) -> list[Episode]:
    """The episodes of a JSONL file; `FILE@REGEX` keeps those whose task id (else episode id) matches REGEX."""
    path, _, pattern = spec.partition("@")
    episodes = _read(path)
    if pattern:
        episodes = [e for e in episodes if re.search(pattern, e.task_id or e.id)]
        if not episodes:
            raise SystemExit(f"{spec}: no episode's task id matches {pattern!r}")
    return episodes


def _read(path: str) -> list[Episode]:
    episodes = []
    for number, line in enumerate(Path(path).read_bytes().splitlines(), 1):
        if line.strip():
            try:
                episodes.append(Episode.model_validate({k: v for k, v in orjson.loads(line).items() if k != "format"}))
            except ValueError as error:
                raise SystemExit(f"{path}:{number}: not an episode: {error}") from None
    return episodes


def _task(episode: Episode) -> str:
    return episode.task_id or episode.task or episode.id


def split_by_family(episodes: list[Episode], share: float = 0.75,
                    key: Callable[[Episode], str] = trajectory_family) -> tuple[list[Episode], list[Episode]]:
    families = sorted({key(e) for e in episodes}, key=lambda f: hashlib.sha256(f.encode()).hexdigest())
    kept = set(families[: max(1, int(len(families) * share))])
    return [e for e in episodes if key(e) in kept], [e for e in episodes if key(e) not in kept]


def env_episodes(spec: str, split_by: str) -> tuple[str, list[str], list[Episode], list[Episode]]:
    """(name, files, construction, evaluation) of one `--env NAME=CONSTRUCTION[:EVALUATION]`; one file is split by
    trajectory family, or by task with `split_by="task"`."""
    name, _, files = spec.partition("=")
    parts = files.split(":")
    if len(parts) == 1:
        construction, evaluation = split_by_family(load(parts[0]),
                                                   key=trajectory_family if split_by == "family" else _task)
    else:
        construction, evaluation = load(parts[0]), load(parts[1])
    return name, parts, construction, evaluation


def write_results(path: Path, results: dict[str, Any]) -> None:
    """The results as JSON, with when and on what they were measured."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"when": datetime.now(UTC).isoformat(timespec="seconds"),
                                "machine": f"{platform.machine()} {platform.python_version()}",
                                "numpy": np.__version__, "results": results}, indent=2) + "\n")


def _interval(clusters: list[str], values: list[float], resamples: int) -> dict[str, Any]:
    if not values:
        return {"mean": None, "low": None, "high": None, "n": 0}
    interval = bootstrap_mean(clusters, values, resamples=resamples)
    return {key: round(value, 4) if isinstance(value, float) else value for key, value in interval.to_json().items()}


def evaluate(name: str, construction: list[Episode], evaluation: list[Episode], resamples: int) -> dict[str, Any]:
    started = time.perf_counter()
    book = build_simulator_book(construction, name=name).book
    build_s = time.perf_counter() - started
    novelty = NoveltyIndex.for_book(book)
    models = {"harness": Harness(book), "nearest": NearestEvidence(book)}
    rows: dict[str, list[EvalRecord]] = {method: [] for method in models}
    novel: list[bool] = []
    clusters: list[str] = []
    tools: list[str] = []
    for episode in evaluation:
        marks = novelty.episode(episode)
        novel += [bool(values) for values in marks]
        clusters += [episode.id] * len(marks)
        tools += [turn.action.name for turn in episode.turns]
        for method, model in models.items():
            rows[method] += next_obs_records(model, episode, Scorer())
    exact = {m: [float(r.exact_match or 0.0) for r in rows[m]] for m in models}
    known = [i for i, flag in enumerate(novel) if not flag]
    diff = [h - n for h, n in zip(exact["harness"], exact["nearest"], strict=True)]
    result: dict[str, Any] = {
        "construction": {"episodes": len(construction), "turns": sum(len(e.turns) for e in construction)},
        "evaluation": {"episodes": len(evaluation), "turns": len(novel)},
        "book": {"rules": len(book.rules), "supported": len(book.supported_rules()), "build_s": round(build_s, 2),
                 "route_folds": book.routes.folds if book.routes else 0},
        "novel_share": round(sum(novel) / len(novel), 4) if novel else None,
        "routes": dict(Counter(r.route for r in rows["harness"]).most_common()),
    }
    for method in models:
        ended = [bool(r.done_pred) for r in rows[method] if r.done_real]
        running = [bool(r.done_pred) for r in rows[method] if not r.done_real]
        result[method] = {
            "all": _interval(clusters, exact[method], resamples),
            "knowable": _interval([clusters[i] for i in known], [exact[method][i] for i in known], resamples),
            "done_recall": round(sum(ended) / len(ended), 4) if ended else None,
            "done_false_alarms": round(sum(running) / len(running), 4) if running else None,
            "p50_predict_ms": round(statistics.median(r.latency_s or 0.0 for r in rows[method]) * 1000, 3),
        }
    result["harness - nearest"] = {
        "all": _interval(clusters, diff, resamples),
        "knowable": _interval([clusters[i] for i in known], [diff[i] for i in known], resamples)}
    result["per_tool"] = per_tool(tools, novel, exact)
    return result


def per_tool(tools: list[str], novel: list[bool], exact: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    """Per tool (action name): turns, knowable turns, and each model's exact match on all and on knowable turns."""
    turns: dict[str, list[int]] = defaultdict(list)
    for index, tool in enumerate(tools):
        turns[tool].append(index)
    out: dict[str, dict[str, Any]] = {}
    for tool, indexes in sorted(turns.items(), key=lambda item: (-len(item[1]), item[0])):
        known = [i for i in indexes if not novel[i]]
        row: dict[str, Any] = {"turns": len(indexes), "knowable": len(known)}
        for method, values in exact.items():
            row[f"{method} all"] = round(sum(values[i] for i in indexes) / len(indexes), 4)
            row[f"{method} knowable"] = round(sum(values[i] for i in known) / len(known), 4) if known else None
        out[tool] = row
    return out


def tool_table(results: dict[str, dict[str, Any]], limit: int = 30) -> str:
    lines = ["| env | tool | turns | knowable | harness knowable | nearest knowable | harness all | nearest all |",
             "|---|---|---|---|---|---|---|---|"]
    for env, r in results.items():
        for tool, row in list(r["per_tool"].items())[:limit]:
            cells = ["-" if row[k] is None else f"{row[k]:.3f}" for k in
                     ("harness knowable", "nearest knowable", "harness all", "nearest all")]
            lines.append(f"| {env} | {tool} | {row['turns']} | {row['knowable']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(entry: dict[str, Any]) -> str:
    if entry["mean"] is None:
        return "-"
    return f"{entry['mean']:+.3f} [{entry['low']:+.3f}, {entry['high']:+.3f}]"


def table(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| env | eval episodes / turns | novel | harness all / knowable | nearest all / knowable "
             "| harness - nearest, all | harness - nearest, knowable |", "|---|---|---|---|---|---|---|"]
    for env, r in results.items():
        h, n, d = r["harness"], r["nearest"], r["harness - nearest"]
        knowable = "-" if h["knowable"]["mean"] is None else f"{h['knowable']['mean']:.3f}"
        knowable_n = "-" if n["knowable"]["mean"] is None else f"{n['knowable']['mean']:.3f}"
        lines.append(f"| {env} | {r['evaluation']['episodes']} / {r['evaluation']['turns']} | {r['novel_share']:.2f} "
                     f"| {h['all']['mean']:.3f} / {knowable} | {n['all']['mean']:.3f} / {knowable_n} "
                     f"| {_cell(d['all'])} | {_cell(d['knowable'])} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", action="append", required=True, metavar="NAME=CONSTRUCTION[:EVALUATION]")
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--split-by", choices=["family", "task"], default="family",
                        help="with one file per env: what construction and evaluation must not share")
    parser.add_argument("--per-tool", action="store_true", help="also print the per-tool table")
    args = parser.parse_args()
    results: dict[str, dict[str, Any]] = {}
    for spec in args.env:
        name, parts, construction, evaluation = env_episodes(spec, args.split_by)
        results[name] = {"sources": parts, **evaluate(name, construction, evaluation, args.resamples)}
        print(f"{name}: {json.dumps(results[name]['harness - nearest'])}", flush=True)
    print(table(results))
    if args.per_tool:
        print(tool_table(results))
    write_results(args.out, results)


if __name__ == "__main__":
    main()
