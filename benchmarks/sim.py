"""Simulator step cost: the harness's fast path against the real environments, and what each world model spends.

    OMP_NUM_THREADS=1 python benchmarks/sim.py [--envs alfworld scienceworld bfcl] [--repeats 5]
        [--real-repeats 1] [--model-steps 20] [--no-real] [--no-models]

For each environment's bundled expert episodes (ALFWorld: all 36 games; ScienceWorld and BFCL: the
samples) worldbooks are built by cross-fitting (`worldbook.build.cross_fit`, k = min(3, families)
folds by trajectory family), so every episode is replayed through a book built without it:

1. **Harness latency** — each episode's recorded actions go through `Harness(book)` (no model):
   `predict` timed, then `commit`. p50/p99 (and mean) over all steps and over fast-path steps, p50
   per route, steps/s (steps / their predict+commit time, all and fast-path); medians of `--repeats`
   passes after a warm-up pass. The same on a book built from all episodes and replayed on them
   (in-sample: the upper bound of the fast path).
2. **Real environment** — the same actions in the real environment (`worldsmith.envs.make`), reset
   on the episode's task (not timed), every `step` timed; median of `--real-repeats` passes (one by
   default: resets dominate the run, ~0.5-2 s each). Ratio = real median step / harness median predict.
3. **Per world model** — harness and harness-schema without and with the tiny model, nearest
   evidence, direct prompting, trace RAG and worldbook prompting on the tiny model (max_tokens 32,
   no response cache): model calls, tokens, failed calls per step and the p50 step latency, on the
   first `--model-steps` held-out steps.

Prints tables and writes benchmarks/results/sim.json. An environment that cannot start is reported.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import orjson  # noqa: E402

from worldsmith.sim.harness import Harness  # noqa: E402
from worldsmith.sim.registry import make_world_model, needs_llm  # noqa: E402
from worldsmith.sim.route_learning import build_simulator_book  # noqa: E402
from worldsmith.traces import Episode, trajectory_family  # noqa: E402
from worldsmith.worldbook import Worldbook  # noqa: E402
from worldsmith.worldbook.build import cross_fit  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "data_samples" / "collected"
SOURCES = {"alfworld": "alfworld_expert.jsonl", "scienceworld": "scienceworld.jsonl", "bfcl": "bfcl.jsonl"}
TINY = "tiny:data_samples/models/tiny"
# (label, world-model kind, with the tiny model)
METHODS = [("harness", "harness", False), ("harness+tiny", "harness+llm", True),
           ("harness-schema", "harness-no-book", False), ("harness-schema+tiny", "harness-no-book+llm", True),
           ("nearest", "nearest", False), ("direct+tiny", "direct", True), ("rag+tiny", "rag", True),
           ("book+tiny", "worldbook-prompt", True)]


@dataclass(frozen=True)
class StepTime:
    route: str
    predict_s: float
    commit_s: float
    exact: bool


def load_episodes(path: Path) -> list[Episode]:
    return [Episode.model_validate({k: v for k, v in orjson.loads(line).items() if k != "format"})
            for line in path.read_bytes().splitlines() if line.strip()]


def opening(episode: Episode) -> Episode:
    return episode.model_copy(update={"turns": []})


def held_out_pairs(episodes: list[Episode], name: str) -> tuple[list[tuple[Worldbook, Episode]], dict[str, Any]]:
    """(book built without the episode, episode) for every episode, by cross-fitting over trajectory families."""
    families = {trajectory_family(e) for e in episodes}
    folds = min(3, len(families))
    started = time.perf_counter()
    result = cross_fit(episodes, name=name, folds=folds)
    build_s = time.perf_counter() - started
    fold_of = {family: index for index, names in enumerate(result.families) for family in names}
    pairs = [(result.folds[fold_of[trajectory_family(e)]].book, e) for e in episodes]
    return pairs, {"folds": folds, "families": len(families), "build_s": round(build_s, 3),
                   "rules": [len(fold.book.rules) for fold in result.folds]}


def harness_pass(harnesses: dict[int, Harness], pairs: Sequence[tuple[Worldbook, Episode]]) -> list[StepTime]:
    """Replay every episode's actions through its book's harness (predict timed, then commit)."""
    steps = []
    clock = time.perf_counter
    for book, episode in pairs:
        harness = harnesses[id(book)]
        harness.start(opening(episode))
        for turn in episode.turns:
            began = clock()
            prediction = harness.predict(turn.action)
            predicted = clock()
            harness.commit()
            steps.append(StepTime(prediction.audit.route, predicted - began, clock() - predicted,
                                  prediction.observation == turn.observation.text))
    return steps


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 4)


def harness_latency(pairs: Sequence[tuple[Worldbook, Episode]], repeats: int) -> dict[str, Any]:
    """p50/p99 of predict over all and fast-path steps, steps/s; medians over `repeats` timed passes."""
    harnesses = {id(book): Harness(book) for book, _ in pairs}
    harness_pass(harnesses, pairs)  # warm-up: first-use costs (regexes, imports) are not a step's cost
    runs = []
    for _ in range(repeats):
        gc.collect()
        steps = harness_pass(harnesses, pairs)
        fast = [s.predict_s for s in steps if s.route == "fast_path"]
        every = [s.predict_s for s in steps]
        by_route: dict[str, list[float]] = {}
        for step in steps:
            by_route.setdefault(step.route, []).append(step.predict_s)
        runs.append({"p50": percentile(every, 0.5), "p99": percentile(every, 0.99), "mean": statistics.fmean(every),
                     "fast_p50": percentile(fast, 0.5) if fast else None,
                     "fast_p99": percentile(fast, 0.99) if fast else None,
                     "fast_mean": statistics.fmean(fast) if fast else None,
                     "commit_p50": percentile([s.commit_s for s in steps], 0.5),
                     "routes_p50": {route: percentile(times, 0.5) for route, times in by_route.items()},
                     "steps_per_s": len(steps) / sum(s.predict_s + s.commit_s for s in steps),
                     "fast_steps_per_s": len(fast) / sum(s.predict_s + s.commit_s for s in steps
                                                          if s.route == "fast_path") if fast else None})
    routes = Counter(s.route for s in steps)

    def median_of(key: str) -> float | None:
        values = [run[key] for run in runs if run[key] is not None]
        return statistics.median(values) if values else None

    return {"steps": len(steps), "fast_path_steps": routes["fast_path"],
            "fast_path_share": round(routes["fast_path"] / len(steps), 3),
            "exact_share": round(sum(s.exact for s in steps) / len(steps), 3), "routes": dict(routes.most_common()),
            "p50_ms": _ms(median_of("p50")), "p99_ms": _ms(median_of("p99")), "mean_ms": _ms(median_of("mean")),
            "fast_p50_ms": _ms(median_of("fast_p50")), "fast_p99_ms": _ms(median_of("fast_p99")),
            "fast_mean_ms": _ms(median_of("fast_mean")),
            "commit_p50_ms": _ms(median_of("commit_p50")),
            "route_p50_ms": {route: _ms(statistics.median(run["routes_p50"][route] for run in runs
                                                          if route in run["routes_p50"])) for route in routes},
            "steps_per_s": round(median_of("steps_per_s") or 0.0, 1),
            "fast_steps_per_s": _round(median_of("fast_steps_per_s"), 1), "repeats": repeats,
            "runs_p50_ms": [_ms(run["p50"]) for run in runs]}


def real_env_steps(name: str, episodes: Sequence[Episode], repeats: int) -> dict[str, Any]:
    """Median and p99 of the real environment's `step` for the recorded actions (reset excluded)."""
    from worldsmith.envs import make, registry

    spec = registry().get(name)
    if spec is None or spec.missing():
        return {"error": f"not installed: {', '.join(spec.missing()) if spec else name}"}
    env = make(name)
    runs, reproduced, steps, resets = [], 0, 0, []
    try:
        for repeat in range(repeats):
            seconds = []
            for episode in episodes:
                began = time.perf_counter()
                try:
                    env.reset(episode.task_id, seed=0)
                except Exception as error:  # noqa: BLE001 - a benchmark reports, it does not stop
                    print(f"  {name} {episode.task_id}: reset failed: {error}", file=sys.stderr)
                    continue
                resets.append(time.perf_counter() - began)
                for turn in episode.turns:
                    began = time.perf_counter()
                    result = env.step(turn.action)
                    seconds.append(time.perf_counter() - began)
                    if repeat == 0:
                        steps += 1
                        reproduced += result.observation.text == turn.observation.text
                    if result.terminated or result.truncated:
                        break
            if seconds:
                runs.append({"p50": percentile(seconds, 0.5), "p99": percentile(seconds, 0.99)})
    finally:
        env.close()
    if not runs:
        return {"error": "no steps measured"}
    median = statistics.median(run["p50"] for run in runs)
    return {"steps": steps, "reproduced": reproduced, "median_ms": _ms(median),
            "p99_ms": _ms(statistics.median(run["p99"] for run in runs)), "steps_per_s": round(1 / median, 1),
            "median_reset_s": round(statistics.median(resets), 3), "repeats": len(runs),
            "runs_median_ms": [_ms(run["p50"]) for run in runs]}


def method_steps(kind: str, llm: Any, pairs: Sequence[tuple[Worldbook, Episode]], limit: int,
                 max_tokens: int) -> dict[str, Any]:
    """Model calls, tokens, failed calls and latency per step of one world model on the first `limit` steps."""
    models: dict[int, Any] = {}
    latencies, calls, tokens, failed, exact = [], 0, 0, 0, 0
    routes: Counter[str] = Counter()
    for book, episode in pairs:
        if len(latencies) >= limit:
            break
        options = {} if kind == "nearest" else {"max_tokens": max_tokens}
        if id(book) not in models:
            models[id(book)] = make_world_model(kind, book, llm=llm, **options)
        model = models[id(book)]
        model.start(opening(episode))
        for turn in episode.turns[: limit - len(latencies)]:
            began = time.perf_counter()
            prediction = model.predict(turn.action)
            latencies.append(time.perf_counter() - began)
            model.commit()
            audit = prediction.audit
            calls += audit.model_calls
            tokens += audit.tokens
            failed += sum("model call failed" in note for note in audit.notes)
            routes[audit.route] += 1
            exact += prediction.observation == turn.observation.text
    count = len(latencies)
    return {"steps": count, "calls_per_step": round(calls / count, 2), "tokens_per_step": round(tokens / count, 1),
            "failed_calls_per_step": round(failed / count, 2), "p50_ms": _ms(percentile(latencies, 0.5)),
            "p99_ms": _ms(percentile(latencies, 0.99)), "exact_share": round(exact / count, 3),
            "routes": dict(routes.most_common())}


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=list(SOURCES), choices=list(SOURCES))
    parser.add_argument("--repeats", type=int, default=5, help="timed harness passes (after a warm-up)")
    parser.add_argument("--real-repeats", type=int, default=1, help="passes through the real environment")
    parser.add_argument("--model-steps", type=int, default=20, help="held-out steps per world model and env")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--llm", default=TINY, help="the model spec of the model-backed world models")
    parser.add_argument("--no-real", action="store_true", help="skip the real environments")
    parser.add_argument("--no-models", action="store_true", help="skip the per-world-model table")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "sim.json")
    options = parser.parse_args(argv)
    started = time.perf_counter()
    load_before = os.getloadavg()

    llm = None
    if not options.no_models:
        from worldsmith.llm import open_llm

        llm = open_llm(options.llm, tempfile.mkdtemp(prefix="bench-sim-"), component="bench-sim", cache=False,
                       log=False)
        llm.chat([{"role": "user", "content": "> look"}], max_tokens=4)  # load and warm the model

    results: dict[str, Any] = {}
    for name in options.envs:
        phase = time.perf_counter()
        phases: dict[str, float] = {}
        episodes = load_episodes(SAMPLES / SOURCES[name])
        pairs, books = held_out_pairs(episodes, name)
        row: dict[str, Any] = {"episodes": len(episodes), "turns": sum(len(e.turns) for e in episodes),
                               "books": books, "phases_s": phases}
        row["harness"] = harness_latency(pairs, options.repeats)
        own = build_simulator_book(episodes, name=f"{name}-all").book
        row["harness_in_sample"] = harness_latency([(own, e) for e in episodes], options.repeats)
        phases["books_and_harness"] = round(time.perf_counter() - phase, 1)
        if not options.no_real:
            phase = time.perf_counter()
            row["real"] = real_env_steps(name, episodes, options.real_repeats)
            phases["real_env"] = round(time.perf_counter() - phase, 1)
            real = row["real"].get("median_ms")
            if real:
                h = row["harness"]
                row["ratio_median"] = round(real / h["p50_ms"], 1)
                row["ratio_fast_path"] = round(real / h["fast_p50_ms"], 1) if h["fast_p50_ms"] else None
                row["ratio_in_sample"] = round(real / row["harness_in_sample"]["p50_ms"], 1)
        if llm is not None:
            phase = time.perf_counter()
            row["methods"] = {}
            for label, kind, with_model in METHODS:
                if needs_llm(kind) and not with_model:
                    continue
                row["methods"][label] = method_steps(kind, llm if with_model else None, pairs, options.model_steps,
                                                     options.max_tokens)
            phases["methods"] = round(time.perf_counter() - phase, 1)
        results[name] = row
        h, i = row["harness"], row["harness_in_sample"]
        print(f"\n{name}: {row['episodes']} episodes, {row['turns']} turns; {books['folds']} folds by family "
              f"(built in {books['build_s']} s)")
        print(f"  harness held-out: p50 {_fmt(h['p50_ms'])} ms  p99 {_fmt(h['p99_ms'])} ms  mean {_fmt(h['mean_ms'])} ms"
              f"  fast-path p50 "
              f"{_fmt(h['fast_p50_ms'])} ms  p99 {_fmt(h['fast_p99_ms'])} ms ({h['fast_path_steps']}/{h['steps']} fast)"
              f"  {h['steps_per_s']:,.0f} steps/s (fast path {_fmt(h['fast_steps_per_s'], 0)})  exact {h['exact_share']:.1%}")
        print(f"  harness in-sample: p50 {_fmt(i['p50_ms'])} ms  fast-path p50 {_fmt(i['fast_p50_ms'])} ms "
              f"({i['fast_path_steps']}/{i['steps']} fast)  {i['steps_per_s']:,.0f} steps/s  exact {i['exact_share']:.1%}")
        if "real" in row:
            r = row["real"]
            if "error" in r:
                print(f"  real env: {r['error']}")
            else:
                print(f"  real env: median step {_fmt(r['median_ms'])} ms  p99 {_fmt(r['p99_ms'])} ms  "
                      f"({r['steps']} steps, {r['reproduced']} observations reproduced)  ratio real/harness: "
                      f"{row['ratio_median']}x (fast path {row['ratio_fast_path']}x, in-sample {row['ratio_in_sample']}x)")
        for label, m in row.get("methods", {}).items():
            print(f"  {label:<20} calls/step {m['calls_per_step']:>5.2f}  tokens/step {m['tokens_per_step']:>7.1f}  "
                  f"failed/step {m['failed_calls_per_step']:.2f}  p50 {_fmt(m['p50_ms'], 2):>9} ms  "
                  f"exact {m['exact_share']:.0%}  ({m['steps']} steps)")
    if llm is not None:
        llm.close()
    total = time.perf_counter() - started
    load_after = os.getloadavg()
    print(f"\ntotal {total:.0f} s; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    out = {"benchmark": "sim_steps", "date": datetime.now(UTC).isoformat(timespec="seconds"),
           "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
                       "processor": platform.processor(), "load_average_before": [round(x, 2) for x in load_before],
                       "load_average_after": [round(x, 2) for x in load_after]},
           "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(options).items()},
           "total_s": round(total, 1), "results": results}
    options.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = options.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(out, indent=2) + "\n")
    tmp.replace(options.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
