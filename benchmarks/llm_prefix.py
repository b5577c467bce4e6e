"""Prefix reuse in the hf backend: act, then rehearse on the same history.

    OMP_NUM_THREADS=1 python benchmarks/llm_prefix.py [--model data_samples/models/tiny] [--repeats 7]

EnvACE asks the model for an action on a history, then asks again on that history plus the
action (to rehearse its outcome). With prefix reuse the second call only runs the new tokens.
This times the pair on a real agent history of about 1,000 tokens (from the sample traces) with
the key/value prefix cache on, and on a backend with it off (two independent calls), and reports
the median of each and their ratio (target <= 0.6). Greedy answers must be identical both ways.
Writes benchmarks/results/llm_prefix.json.
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from worldsmith.llm import make_llm  # noqa: E402
from worldsmith.llm.hf import HFLLM  # noqa: E402
from worldsmith.llm.tiny import agent_messages  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
REHEARSE = "Rehearse: what will the environment show after that action?"


def history(llm: HFLLM, target: int, room: int) -> list[dict[str, str]]:
    """The longest sample agent conversation, cut at a turn so its prompt is near `target` tokens."""
    from worldsmith import Workspace
    from worldsmith.traces.files import sample_trace_files

    with tempfile.TemporaryDirectory() as tmp:
        workspace = Workspace(tmp)
        folder = REPO / "data_samples"
        traces = sample_trace_files(folder)
        workspace.ingest(traces, "samples")
        conversations = [agent_messages(e) for e in workspace.dataset("samples").iter_episodes()]
    best: list[dict[str, str]] = []
    best_tokens = 0
    for messages in conversations:
        for end in range(2, len(messages) + 1, 2):  # end on a user message: the agent answers next
            candidate = messages[:end]
            tokens = len(llm.encode(candidate))
            if tokens > min(target, llm.context_window - room):
                break
            if tokens > best_tokens:
                best, best_tokens = candidate, tokens
    return best


def act_then_rehearse(llm: HFLLM, messages: list[dict[str, str]], max_tokens: int) -> dict[str, Any]:
    started = time.perf_counter()
    [act] = llm.chat(messages, max_tokens=max_tokens)
    middle = time.perf_counter()
    follow = [*messages, {"role": "assistant", "content": act.text}, {"role": "user", "content": REHEARSE}]
    [rehearse] = llm.chat(follow, max_tokens=max_tokens)
    ended = time.perf_counter()
    return {
        "seconds": ended - started,
        "act_s": middle - started,
        "rehearse_s": ended - middle,
        "texts": [act.text, rehearse.text],
        "prompt_tokens": [act.prompt_tokens, rehearse.prompt_tokens],
        "cached_tokens": [act.cached_tokens, rehearse.cached_tokens],
        "completion_tokens": [act.completion_tokens, rehearse.completion_tokens],
    }


def measure(reuse: HFLLM, cold: HFLLM, messages: list[dict[str, str]], max_tokens: int, repeats: int) -> dict[str, Any]:
    """Median act-then-rehearse seconds with the prefix cache (cleared before each pair) and without."""
    act_then_rehearse(reuse, messages, max_tokens)  # warm up both (allocator, kernels)
    act_then_rehearse(cold, messages, max_tokens)
    with_reuse: list[dict[str, Any]] = []
    without: list[dict[str, Any]] = []
    for _ in range(repeats):
        reuse.clear_prefix_cache()  # every pair starts cold: only the rehearse call may reuse
        with_reuse.append(act_then_rehearse(reuse, messages, max_tokens))
        without.append(act_then_rehearse(cold, messages, max_tokens))
    median_reuse = statistics.median(r["seconds"] for r in with_reuse)
    median_without = statistics.median(r["seconds"] for r in without)
    return {
        "prompt_tokens": with_reuse[0]["prompt_tokens"],
        "cached_tokens": with_reuse[0]["cached_tokens"],
        "completion_tokens": with_reuse[0]["completion_tokens"],
        "median_s_with_reuse": round(median_reuse, 4),
        "median_s_two_independent_calls": round(median_without, 4),
        "median_act_s": round(statistics.median(r["act_s"] for r in with_reuse), 4),
        "median_rehearse_s_with_reuse": round(statistics.median(r["rehearse_s"] for r in with_reuse), 4),
        "median_rehearse_s_without": round(statistics.median(r["rehearse_s"] for r in without), 4),
        "ratio": round(median_reuse / median_without, 3),
        "match": all(r["texts"] == w["texts"] for r, w in zip(with_reuse, without, strict=True)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(REPO / "data_samples" / "models" / "tiny"))
    parser.add_argument("--tokens", type=int, default=1000, help="history length to aim for (prompt tokens)")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "llm_prefix.json"))
    args = parser.parse_args(argv)

    import torch

    reuse = make_llm(f"tiny:{args.model}")
    cold = make_llm(f"tiny:{args.model}?prefix_cache=0")
    assert isinstance(reuse, HFLLM) and isinstance(cold, HFLLM)
    messages = history(reuse, args.tokens, room=2 * args.max_tokens + 40)
    answers = measure(reuse, cold, messages, args.max_tokens, args.repeats)
    prompt_only = measure(reuse, cold, messages, 1, args.repeats)  # one token each: the prompt side alone
    result = {
        "benchmark": "llm_prefix",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": os.path.relpath(args.model, REPO) if Path(args.model).resolve().is_relative_to(REPO) else args.model,
        "history_tokens": answers["prompt_tokens"][0],
        "rehearse_prompt_tokens": answers["prompt_tokens"][1],
        "rehearse_cached_tokens": answers["cached_tokens"][1],
        "completion_tokens": answers["completion_tokens"],
        "max_tokens": args.max_tokens,
        "repeats": args.repeats,
        **{key: answers[key] for key in answers if key.startswith("median")},
        "ratio": answers["ratio"],
        "target_ratio": 0.6,
        "prompt_only_ratio": prompt_only["ratio"],
        "prompt_only_median_s_with_reuse": prompt_only["median_s_with_reuse"],
        "prompt_only_median_s_two_independent_calls": prompt_only["median_s_two_independent_calls"],
        "greedy_outputs_match": answers["match"] and prompt_only["match"],
        "threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    print(json.dumps(result, indent=1))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0 if result["greedy_outputs_match"] else 1


if __name__ == "__main__":
    sys.exit(main())
