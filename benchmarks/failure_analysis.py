"""What the failure analysis costs: bootstrap intervals on the miss breakdowns, and fitting tool-API prompts.

    python benchmarks/failure_analysis.py [--episodes 200] [--turns 10] [--resamples 2000] [--repeats 3]
                                          [--out benchmarks/results/failure_analysis.json]

1. `why_missed` of one method without and with per-row intervals, and `paired_miss_differences` of two methods,
   on a constructed run (`--episodes` x `--turns` records per method, 12 actions, 3 sources): the median seconds,
   what the Failures tab and `worldsmith eval misses` add per method shown.
2. `fit_simulator_messages` on every turn of the toolshop OpenAI conversations (their system prompt and 23 tool
   schemas) with the bundled tiny model's tokenizer and window: the median milliseconds per prompt, the summary
   levels chosen and the largest prompt sent against the limit.
Prints and writes the JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]


def _median_s(run: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _records(episodes: int, turns: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for episode in range(episodes):
        for turn in range(turns):
            action = f"tool{rng.integers(12)} {{}}"
            for method, base in (("harness", 0.2), ("nearest", 0.4)):
                rows.append(
                    {
                        "method": method,
                        "episode_id": f"e{episode}",
                        "turn": turn,
                        "protocol": "next-obs",
                        "env_id": "bench",
                        "action": action,
                        "exact_match": float(rng.random() > base),
                        "source": ["rule", "nearest_evidence", "state_projection"][int(rng.integers(3))],
                        "route": None,
                        "rules": [],
                        "unseen_action": bool(action.startswith("tool1 ")),
                        "novel": bool(rng.random() < 0.1),
                        "error": None,
                    }
                )
    return pd.DataFrame(rows)


def bench_intervals(episodes: int, turns: int, resamples: int, repeats: int) -> dict[str, Any]:
    from worldsmith.evals.misses import paired_miss_differences, why_missed

    records = _records(episodes, turns)
    return {
        "records_per_method": episodes * turns,
        "episodes": episodes,
        "resamples": resamples,
        "why_missed_no_intervals_s": _median_s(lambda: why_missed(records, method="harness", resamples=None), repeats),
        "why_missed_with_intervals_s": _median_s(
            lambda: why_missed(records, method="harness", resamples=resamples), repeats
        ),
        "paired_differences_s": _median_s(
            lambda: paired_miss_differences(records, "harness", "nearest", resamples=resamples), repeats
        ),
    }


def bench_prompt_fit() -> dict[str, Any]:
    from worldsmith.llm import open_llm, prompt_budget
    from worldsmith.sim.base import HistoryItem
    from worldsmith.sim.prompts import episode_preamble, fit_simulator_messages
    from worldsmith.traces import action_line
    from worldsmith.traces.importers.openai_chat import OpenAIChatImporter

    episodes = list(OpenAIChatImporter().read(REPO / "data_samples" / "toolshop" / "conversations.openai.jsonl"))
    with tempfile.TemporaryDirectory() as folder:
        llm = open_llm(f"tiny:{REPO / 'data_samples' / 'models' / 'tiny'}", Path(folder), component="bench")
        budget = prompt_budget(llm, reply_tokens=64)
        assert budget is not None
        times, levels, largest, cut = [], Counter(), 0, 0
        for episode in episodes:
            preamble = episode_preamble(episode)
            for position, turn in enumerate(episode.turns):
                history = [
                    HistoryItem(action=t.action, observation=t.observation.text) for t in episode.turns[:position]
                ]
                started = time.perf_counter()
                _, fit = fit_simulator_messages(
                    env=episode.env_id,
                    task=episode.task,
                    initial_observation="",
                    history=history,
                    action=action_line(turn.action),
                    budget=budget,
                    preamble=preamble,
                )
                times.append(time.perf_counter() - started)
                levels[f"{fit.system_prompt_level}/{fit.tools_level}"] += 1
                largest = max(largest, fit.tokens or 0)
                cut += bool(fit.steps_cut_by_tokens)
        llm.close()
    return {
        "prompts": len(times),
        "window": budget.window,
        "limit": budget.limit,
        "median_ms": 1000 * statistics.median(times),
        "max_ms": 1000 * max(times),
        "largest_prompt_tokens": largest,
        "levels (system/tools)": dict(levels),
        "prompts_with_history_cut": cut,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "failure_analysis.json")
    args = parser.parse_args()
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "intervals": bench_intervals(args.episodes, args.turns, args.resamples, args.repeats),
        "prompt_fit": bench_prompt_fit(),
    }
    text = json.dumps(result, indent=2)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    temporary = args.out.with_suffix(".json.tmp")
    temporary.write_text(text + "\n", encoding="utf-8")
    temporary.replace(args.out)


if __name__ == "__main__":
    main()
