"""Ingest throughput and peak memory on a generated 1,000,000-turn OpenAI-format file.

    python benchmarks/ingest.py [--turns 1000000] [--repeats 3] [--out benchmarks/results/ingest.json]

The file is generated once (JSONL, one conversation of 20 tool calls per line, realistic
tool-agent content); each repeat imports it into a fresh workspace in a child process pinned
to one core, so peak RSS is the import's own. Prints and writes the median turns/s (wall clock,
and per CPU-second, which other tenants of a shared machine disturb less) and the peak RSS. Target (issue 2): >= 50,000 turns/s on one core, peak RSS < 1.5 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import orjson

TURNS_PER_CONVERSATION = 20


def generate(path: Path, turns: int, seed: int = 0) -> int:
    """Write `turns` tool calls as OpenAI conversations (JSONL); returns the file size."""
    rng = random.Random(seed)
    tools = ["get_user_details", "search_direct_flight", "get_reservation_details", "cancel_reservation",
             "update_reservation_baggages", "calculate", "list_all_airports"]
    with open(path, "wb") as handle:
        conversations = (turns + TURNS_PER_CONVERSATION - 1) // TURNS_PER_CONVERSATION
        written = 0
        for index in range(conversations):
            n = min(TURNS_PER_CONVERSATION, turns - written)
            messages = [
                {"role": "system", "content": "# Airline Agent Policy\nYou can book, modify or cancel flights."},
                {"role": "user", "content": f"Hi, I am user_{index}. I need help with reservation R{index:06d}."},
            ]
            for step in range(n):
                tool = rng.choice(tools)
                call_id = f"call_{index}_{step}"
                arguments = {"user_id": f"user_{index}", "reservation_id": f"R{rng.randrange(10**6):06d}",
                             "amount": rng.randrange(1000)}
                messages.append({"role": "assistant", "content": None, "tool_calls": [
                    {"id": call_id, "type": "function",
                     "function": {"name": tool, "arguments": orjson.dumps(arguments).decode()}}]})
                result = {"status": "ok", "flight_number": f"HAT{rng.randrange(1000):03d}", "price": rng.randrange(90, 900),
                          "seats": {"economy": rng.randrange(20), "business": rng.randrange(5)}}
                messages.append({"role": "tool", "tool_call_id": call_id, "name": tool,
                                 "content": orjson.dumps(result).decode()})
            messages.append({"role": "assistant", "content": "Your request is complete."})
            handle.write(orjson.dumps({"task_id": index, "reward": float(index % 2), "messages": messages}) + b"\n")
            written += n
    return path.stat().st_size


def child(path: str, workspace: str) -> None:
    """Import `path` on one core; print seconds and counts as JSON."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    import pyarrow as pa

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    from worldsmith import Workspace

    started, cpu_started = time.perf_counter(), time.process_time()
    report = Workspace(workspace).ingest([path], "bench")
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds, "turns": report.turns,
                      "episodes": report.episodes, "rejected": report.rejected}))


def run_once(path: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="ws-bench-") as workspace:
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        output = subprocess.run([sys.executable, __file__, "--child", str(path), workspace], env=env,
                                capture_output=True, text=True, check=True).stdout
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        result = json.loads(output.strip().splitlines()[-1])
        result["peak_rss_mb"] = max(peak_kb, before) / 1024  # ru_maxrss: KiB on Linux, max over children so far
        result["turns_per_s"] = result["turns"] / result["seconds"]
        result["turns_per_cpu_s"] = result["turns"] / result["cpu_seconds"]
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "ingest.json"))
    parser.add_argument("--child", nargs=2, metavar=("PATH", "WORKSPACE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    with tempfile.TemporaryDirectory(prefix="ingest-bench-") as folder:
        path = Path(folder) / "openai_1m.jsonl"
        started = time.perf_counter()
        size = generate(path, args.turns)
        print(f"generated {args.turns:,} turns, {size / 1e6:.0f} MB in {time.perf_counter() - started:.1f}s")
        runs = []
        for repeat in range(args.repeats):
            result = run_once(path)
            runs.append(result)
            print(f"run {repeat + 1}: {result['turns']:,} turns in {result['seconds']:.2f}s = "
                  f"{result['turns_per_s']:,.0f} turns/s wall, {result['turns_per_cpu_s']:,.0f} turns/CPU-s, "
                  f"peak RSS {result['peak_rss_mb']:.0f} MB")
    summary = {
        "benchmark": "ingest_openai_jsonl",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()},
        "turns": args.turns, "file_mb": size / 1e6, "repeats": args.repeats,
        "median_turns_per_s": statistics.median(r["turns_per_s"] for r in runs),
        "median_turns_per_cpu_s": statistics.median(r["turns_per_cpu_s"] for r in runs),
        "median_seconds": statistics.median(r["seconds"] for r in runs),
        "max_peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "target": {"turns_per_s": 50_000, "peak_rss_mb": 1536},
        "runs": runs,
    }
    print(f"median {summary['median_turns_per_s']:,.0f} turns/s wall ({summary['median_turns_per_cpu_s']:,.0f} per "
          f"CPU-second); peak RSS {summary['max_peak_rss_mb']:.0f} MB "
          f"(target >= 50,000 turns/s, < 1536 MB)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
