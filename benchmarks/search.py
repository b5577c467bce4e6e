"""Full-text search over turns: index build time and size, query latency per kind of query, against the scan.

    python benchmarks/search.py [--sizes 100000,1000000] [--repeats 5] [--scan-repeats 1] [--scan-max 1000000]
                                [--workspace /tmp/ws_search] [--out benchmarks/results/search.json]

For each size a dataset is written with the generator of benchmarks/scale_turns.py (parts of up to 1M turns in
the real storage layout, JSON observations of 150-900 characters, tool-call arguments), then its index is built
from scratch (`build_index`, as `worldsmith traces index --rebuild` does) and timed, and a mixed query set is run:
three queries of each kind (`QUERIES`: common word, rare word, phrase, prefix, several terms, no hit). A query's
latency is the median over `--repeats` runs (`search_turns`, top 20 with snippets, no refresh); reported are the
median of each kind and of the whole set. The scan (the fallback without an index) is timed on the same queries
up to `--scan-max` turns. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "lib"))
sys.path.insert(0, str(REPO / "benchmarks"))

from scale_turns import median_seconds, write_parts  # noqa: E402

from worldsmith.workspace import Dataset, build_index, search_turns  # noqa: E402
from worldsmith.workspace.search import parse_query, scan_turns  # noqa: E402

QUERIES = {  # kind -> queries; every term a case-insensitive substring (workspace.textmatch)
    "common_word": ["reservation", "passenger", "kitchen"],
    "rare_word": ["HAT123", "user_4242", "637658"],
    "phrase": ['"refund policy"', '"apple mug"', '"economy business"'],
    "prefix": ["tak*", "passeng*", "mu*"],  # a trailing * changes nothing; "mu" is below a trigram
    "multi_term": ["kitchen HAT123", "reservation user_4242", "cancel_reservation refund"],
    "no_hit": ["zebra", "reservation xylophone", "HAT1234"],  # HAT numbers stop at 999: common trigrams, no hit
}


def write_dataset(path: Path, turns: int, seed: int = 0) -> None:
    """A dataset of `turns` turns, part by part, in the layout the real ingest commits (no index yet)."""
    write_parts(path, turns, seed, "search")


def run_size(root: Path, turns: int, repeats: int, scan_repeats: int, scan_max: int) -> dict[str, Any]:
    path = root / f"d{turns}"
    scan_repeats = scan_repeats if turns <= scan_max else 0
    shutil.rmtree(path, ignore_errors=True)
    started = time.perf_counter()
    write_dataset(path, turns)
    generated = time.perf_counter() - started
    dataset = Dataset(path)
    parquet_bytes = sum(f.stat().st_size for f in (path / "parts").iterdir())
    cpu = time.process_time()
    stats = build_index(dataset)
    out: dict[str, Any] = {"turns": turns, "generate_s": generated, "build_s": stats.seconds,
                           "build_cpu_s": time.process_time() - cpu,
                           "index_bytes": stats.bytes, "parquet_bytes": parquet_bytes, "queries": {}}
    print(f"{turns:>10,} turns: index built in {stats.seconds:.1f} s ({out['build_cpu_s']:.0f} CPU s), "
          f"{stats.bytes / 1e6:.0f} MB "
          f"(parts {parquet_bytes / 1e6:.0f} MB)", flush=True)
    for kind, queries in QUERIES.items():
        for query in queries:
            seconds, result = median_seconds(lambda q=query: search_turns(Dataset(path), q, refresh=False), repeats)
            scan_s, scanned = (median_seconds(lambda q=query: scan_turns(Dataset(path), parse_query(q), limit=20),
                                              scan_repeats) if scan_repeats else (None, []))
            out["queries"][query] = {"kind": kind, "index_s": seconds, "hits": len(result.hits),
                                     "ranked": result.ranked, "scan_s": scan_s, "scan_hits": len(scanned)}
            scan_text = f"{scan_s * 1000:9.0f} ms" if scan_s is not None else "        -"
            print(f"  {kind:<12} {query:<28} index {seconds * 1000:8.1f} ms  scan {scan_text}  "
                  f"({len(result.hits)} hits{', ranked' if result.ranked else ''})", flush=True)
    measured = out["queries"].values()
    out["median_index_s_by_kind"] = {kind: statistics.median(q["index_s"] for q in measured if q["kind"] == kind)
                                     for kind in QUERIES}
    out["median_index_s"] = statistics.median(q["index_s"] for q in measured)
    if scan_repeats:
        out["median_scan_s"] = statistics.median(q["scan_s"] for q in measured)
    kinds = ", ".join(f"{kind} {s * 1000:.1f}" for kind, s in out["median_index_s_by_kind"].items())
    print(f"  medians (ms): {kinds}; whole set: index {out['median_index_s'] * 1000:.1f} ms"
          + (f", scan {out['median_scan_s'] * 1000:.0f} ms" if scan_repeats else ""), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--scan-repeats", type=int, default=1)
    parser.add_argument("--scan-max", type=int, default=1_000_000, help="skip the scan above this many turns")
    parser.add_argument("--workspace", default="/tmp/ws_search")
    parser.add_argument("--keep", action="store_true", help="keep the generated datasets")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "search.json"))
    args = parser.parse_args()
    root = Path(args.workspace)
    root.mkdir(parents=True, exist_ok=True)
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        results.append(run_size(root, size, args.repeats, args.scan_repeats, args.scan_max))
        if not args.keep:
            shutil.rmtree(root / f"d{size}", ignore_errors=True)
    record = {"at": datetime.now(UTC).isoformat(timespec="seconds"), "machine": platform.platform(),
              "python": platform.python_version(), "queries": QUERIES, "sizes": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
