"""Throughput of `chat_many` per backend: completions/s and generated tokens/s on a fixed batch.

    OMP_NUM_THREADS=1 python benchmarks/llm.py [--specs tiny:data_samples/models/tiny vllm:... openai:M@URL]
        [--batch 16] [--max-tokens 32] [--repeats 3]

Every spec gets the same prompts (environment-simulation style, from the bundled samples), greedy,
no response cache; the first call is a warm-up. Writes benchmarks/results/llm.json. A backend that
cannot start here (vllm not installed, no server) is reported and skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from worldsmith.llm import LLMError, default_model_spec, make_llm  # noqa: E402

PROMPTS = [
    "You are in the kitchen. You see a fridge, a counter and a sink.\n> open fridge",
    "agent@sandbox:~$ ls notes\n",
    "Call: ls(a=True)\nReturn the tool's output.",
    "You arrive at cabinet 3. The cabinet 3 is closed.\n> open cabinet 3",
]


def _batch(size: int) -> list[list[dict[str, str]]]:
    return [[{"role": "system", "content": "You simulate the environment: answer with its next observation."},
             {"role": "user", "content": f"{PROMPTS[i % len(PROMPTS)]} (#{i})"}] for i in range(size)]


def measure(spec: str, batch: int, max_tokens: int, repeats: int) -> dict[str, Any]:
    try:
        started = time.perf_counter()
        llm = make_llm(spec)
        load_s = time.perf_counter() - started
    except (LLMError, ValueError, ImportError, OSError) as error:
        return {"spec": spec, "error": f"{type(error).__name__}: {error}"}
    try:
        conversations = _batch(batch)
        llm.chat_many(conversations[:2], max_tokens=max_tokens)  # warm-up
        seconds, tokens = [], []
        for _ in range(repeats):
            started = time.perf_counter()
            out = llm.chat_many(conversations, max_tokens=max_tokens)
            seconds.append(time.perf_counter() - started)
            tokens.append(sum(c[0].completion_tokens for c in out))
    finally:
        llm.close()
    median = statistics.median(seconds)
    return {"spec": spec, "load_s": round(load_s, 2), "batch": batch, "max_tokens": max_tokens,
            "median_s": round(median, 3), "completions_per_s": round(batch / median, 2),
            "generated_tokens_per_s": round(statistics.median(tokens) / median, 1), "runs_s": [round(s, 3) for s in seconds]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--specs", nargs="+", default=[s for s in [default_model_spec()] if s])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "llm.json")
    options = parser.parse_args(argv)
    rows = []
    for spec in options.specs:
        row = measure(spec, options.batch, options.max_tokens, options.repeats)
        rows.append(row)
        if "error" in row:
            print(f"{spec}: {row['error']}")
        else:
            print(f"{spec}: {row['completions_per_s']} completions/s, {row['generated_tokens_per_s']} tokens/s "
                  f"(batch {row['batch']}, median {row['median_s']} s, load {row['load_s']} s)")
    result = {"benchmark": "llm_chat_many", "date": datetime.now(UTC).isoformat(timespec="seconds"),
              "machine": {"platform": platform.platform(), "python": platform.python_version(),
                          "cpus": os.cpu_count()}, "results": rows}
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
