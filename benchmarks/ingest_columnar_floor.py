"""How fast could ingest be without per-turn Python objects? A sizing measurement, not a feature.

    python benchmarks/ingest_columnar_floor.py [--turns 200000] [--repeats 3]

Converts the same generated OpenAI-format JSONL as `ingest.py` straight into turn columns
(tool call/result alignment by id, context, pointers, per-turn and per-episode hashes) and
writes them as one lz4 Parquet file, on one core. It skips what the real importer must also do
(rejects, adjacency fallback, extras, episode rows), so it is a lower bound on the cost of a
columnar fast path: the evidence for whether the 50,000 turns/s target is reachable in Python.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from ingest import generate  # the same generated file as benchmarks/ingest.py

COLUMNS = ("episode_id", "turn_index", "action_name", "action_arguments", "action_raw", "action_call_id",
           "observation", "context", "prov_pointer", "prov_hash")


def convert(source: Path, out: Path) -> int:
    columns: dict[str, list] = {name: [] for name in COLUMNS}
    append = {name: columns[name].append for name in COLUMNS}
    episode_hashes: set[str] = set()
    with open(source, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            record = orjson.loads(line)
            episode_id = f"{source.stem}-{number}"
            pending: dict[str | None, tuple] = {}
            context: list[tuple] = []
            index = 0
            digest = hashlib.blake2b(digest_size=16)
            for position, message in enumerate(record["messages"]):
                role = message.get("role")
                if role == "tool":
                    call = pending.pop(message.get("tool_call_id"), None)
                    if call is None:
                        continue
                    name, raw, call_id, pointer, call_context = call
                    text = message.get("content")
                    try:
                        orjson.loads(raw)
                    except orjson.JSONDecodeError:
                        pass
                    append["episode_id"](episode_id)
                    append["turn_index"](index)
                    append["action_name"](name)
                    append["action_arguments"](raw)
                    append["action_raw"](raw)
                    append["action_call_id"](call_id)
                    append["observation"](text)
                    append["context"](orjson.dumps(call_context).decode() if call_context else None)
                    append["prov_pointer"](pointer)
                    append["prov_hash"](hashlib.blake2b(f"{name}\x1f{raw}\x1f{text}".encode(), digest_size=8).hexdigest())
                    digest.update(orjson.dumps((name, raw, call_id, text)))
                    index += 1
                elif role == "assistant":
                    if message.get("content"):
                        context.append(("assistant", message["content"], None))
                    for number_in_message, tool_call in enumerate(message.get("tool_calls") or ()):
                        function = tool_call["function"]
                        pending[tool_call.get("id")] = (
                            function["name"], function.get("arguments"), tool_call.get("id"),
                            f"/messages/{position}/tool_calls/{number_in_message}", context,
                        )
                        context = []
                else:
                    context.append((role, message.get("content"), None))
            episode_hashes.add(digest.hexdigest())
    pq.write_table(pa.Table.from_pydict(columns), out, compression="lz4")
    return len(columns["episode_id"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "ingest_columnar_floor.json"))
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    with tempfile.TemporaryDirectory(prefix="columnar-floor-") as folder:
        source = Path(folder) / "openai.jsonl"
        generate(source, args.turns)
        rates = []
        for repeat in range(args.repeats):
            started = time.process_time()
            turns = convert(source, Path(folder) / "turns.parquet")
            seconds = time.process_time() - started
            rates.append(turns / seconds)
            print(f"run {repeat + 1}: {turns:,} turns, {seconds / turns * 1e6:.1f} us/turn CPU = {turns / seconds:,.0f} turns/s")
    result = {"benchmark": "ingest_columnar_floor", "turns": args.turns, "median_turns_per_s": statistics.median(rates),
              "runs_turns_per_s": rates}
    print(f"median {result['median_turns_per_s']:,.0f} turns/s (CPU time, one core)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
