"""The tool-API answer sources (`query`, `query_empty`, `precondition`, `precondition_enum`) held out: per tool, with and without them.

    OMP_NUM_THREADS=1 python benchmarks/tool_sources.py --episodes toolshop.jsonl [--episodes more.jsonl] \
        [--share 0.75] [--out benchmarks/results/tool_sources.json]

Construction and evaluation are split by trajectory family (the task: `fidelity.split_by_family`). One worldbook
is built from the construction episodes (route table included); on the evaluation episodes, teacher-forced,
three world models answer every turn after its real prefix: the harness, the same harness with the four sources emptied (before),
and nearest evidence. Reported per tool and in all: exact match on all turns and on knowable turns (no novel
value, `evals.novelty`), and how often each of the four sources answered.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from benchmarks.fidelity import _read, split_by_family

from worldsmith.evals.novelty import NoveltyIndex
from worldsmith.sim.baselines import NearestEvidence
from worldsmith.sim.harness import Harness
from worldsmith.sim.scoring import exact_match
from worldsmith.traces import Episode
from worldsmith.worldbook import build_worldbook

OUT = Path(__file__).resolve().parent / "results" / "tool_sources.json"
_MINE = ("state:query", "state:query_empty", "state:precondition", "state:precondition_enum")


def _without_tool_sources(harness: Harness) -> Harness:
    harness.queries.rules = {}
    harness.preconditions.rules = {}
    return harness


def _teacher_forced(model: Harness | NearestEvidence, episode: Episode) -> list[dict[str, Any]]:
    """Each turn predicted after the real prefix, the prefix taken in turn by turn (`Harness.observe`: the same
    state `next_obs_records` rebuilds from scratch per turn, in linear time; nearest evidence reads no history)."""
    model.start(episode.model_copy(update={"turns": []}))
    out = []
    for turn in episode.turns:
        prediction = model.predict(turn.action)
        out.append({"exact_match": bool(exact_match(prediction.observation, turn.observation.text)),
                    "route": prediction.audit.route})
        if isinstance(model, Harness):
            model.observe(turn.action, turn.observation.text)
    return out


def measure(construction: list[Episode], evaluation: list[Episode]) -> dict[str, Any]:
    started = time.process_time()
    book = build_worldbook(construction, name="tool-sources").book
    build_s = time.process_time() - started
    novelty = NoveltyIndex.for_book(book)
    models = {"harness": Harness(book), "before": _without_tool_sources(Harness(book)),
              "nearest": NearestEvidence(book)}
    rows: dict[str, list[dict[str, Any]]] = {m: [] for m in models}
    novel: list[bool] = []
    tools: list[str] = []
    for episode in evaluation:
        novel += [bool(values) for values in novelty.episode(episode)]
        tools += [turn.action.name for turn in episode.turns]
        for method, model in models.items():
            rows[method] += _teacher_forced(model, episode)
    per_tool: dict[str, dict[str, Any]] = defaultdict(lambda: {"turns": 0, "knowable": 0})
    totals: dict[str, Any] = {"turns": len(tools), "knowable": novel.count(False)}
    for at, tool in enumerate(tools):
        for bucket in (per_tool[tool], totals):
            bucket["turns"] += bucket is per_tool[tool]
            bucket["knowable"] += (bucket is per_tool[tool]) and not novel[at]
            for method in models:
                hit = float(rows[method][at]["exact_match"])
                bucket[f"{method} all"] = bucket.get(f"{method} all", 0.0) + hit
                if not novel[at]:
                    bucket[f"{method} knowable"] = bucket.get(f"{method} knowable", 0.0) + hit
            route = rows["harness"][at]["route"]
            if route in _MINE:
                bucket[route] = bucket.get(route, 0) + 1
    for bucket in [*per_tool.values(), totals]:
        for method in models:
            for part, n in (("all", bucket["turns"]), ("knowable", bucket["knowable"])):
                key = f"{method} {part}"
                bucket[key] = round(bucket.get(key, 0.0) / n, 4) if n else None
    return {"construction": len(construction), "evaluation": len(evaluation), "build_cpu_s": round(build_s, 2),
            "routes": dict(Counter(r["route"] for r in rows["harness"]).most_common()), "totals": totals,
            "per_tool": dict(sorted(per_tool.items(), key=lambda pair: -pair[1]["turns"])),
            "tool_rules": {"queries": sorted(models["harness"].queries.rules),
                           "preconditions": models["harness"].preconditions.snapshot()["preconditions"]}}


def table(result: dict[str, Any]) -> str:
    lines = ["| tool | turns | knowable | harness all / knowable | before | nearest | query / empty / precondition / enum |",
             "|---|---|---|---|---|---|---|"]

    def row(name: str, b: dict[str, Any]) -> str:
        def cell(method: str) -> str:
            k = b[f"{method} knowable"]
            return f"{b[f'{method} all']:.3f} / {'-' if k is None else f'{k:.3f}'}"
        used = " / ".join(str(b.get(r, 0)) for r in _MINE)
        return f"| {name} | {b['turns']} | {b['knowable']} | {cell('harness')} | {cell('before')} | " \
               f"{cell('nearest')} | {used} |"

    lines.append(row("**all**", result["totals"]))
    lines += [row(tool, b) for tool, b in result["per_tool"].items()]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", action="append", required=True, type=Path)
    parser.add_argument("--share", type=float, default=0.75, help="construction share of the task families")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    episodes = [e for path in args.episodes for e in _read(str(path))]
    construction, evaluation = split_by_family(episodes, args.share)
    result = measure(construction, evaluation)
    print(table(result))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"sources": [str(p) for p in args.episodes], **result}, indent=2) + "\n")


if __name__ == "__main__":
    main()
