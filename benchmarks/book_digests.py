"""The worldbook of every bundled sample, as JSON: a before/after check that a speed-up changed no book.

    OMP_NUM_THREADS=1 python benchmarks/book_digests.py OUT_DIR [--route-folds N] [--only NAME ...]
        [--extra EPISODES.jsonl --extra-sizes 100 300]
    diff -r BEFORE_DIR AFTER_DIR

Builds, with the default `BuildConfig` (or `--route-folds`), the book of each `data_samples/collected/*.jsonl` and of
each other `data_samples/*.jsonl|txt` read through its detected importer, and writes `OUT_DIR/<sample>.json`: every
rule (id, action, template, outcome, conditions, effects, status, support, confidence, provenance, counterexamples),
the route table, the state schema and the termination, sorted keys. A sample no importer reads is skipped, named.
`--extra` adds larger recordings (a collected BFCL dataset, exported): the book of its first N episodes for each of
`--extra-sizes`, written as `OUT_DIR/<file stem>-<N>.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

from worldsmith.sim import build_simulator_book  # noqa: E402
from worldsmith.traces import Episode, read_traces  # noqa: E402
from worldsmith.traces.import_report import TraceFormatError  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "data_samples"
_BOOK_FIELDS = ("rules", "routes", "state_schema", "termination")


def sample_paths() -> list[Path]:
    collected = sorted((SAMPLES / "collected").glob("*.jsonl"))
    others = sorted(p for p in SAMPLES.iterdir() if p.is_file() and p.suffix in (".jsonl", ".txt"))
    return collected + others


def read_episodes(path: Path) -> list[Episode]:
    return [item for item in read_traces([path]) if isinstance(item, Episode)]


def book_json(episodes: list[Episode], name: str, route_folds: int) -> dict[str, Any]:
    book = build_simulator_book(episodes, name=name, route_folds=route_folds).book.model_dump(mode="json")
    return {key: book.get(key) for key in _BOOK_FIELDS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--route-folds", type=int, default=5)
    parser.add_argument("--only", nargs="*", default=None, help="sample file stems to build (default: all)")
    parser.add_argument("--extra", nargs="*", type=Path, default=[], help="more episode files (native JSONL)")
    parser.add_argument("--extra-sizes", nargs="*", type=int, default=[100])
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    builds: list[tuple[str, Path, int | None]] = [
        (path.name.rsplit(".", 1)[0], path, None) for path in sample_paths()
        if args.only is None or path.name.rsplit(".", 1)[0] in args.only]
    builds += [(f"{path.name.split('.', 1)[0]}-{size}", path, size) for path in args.extra for size in args.extra_sizes]
    for name, path, size in builds:
        try:
            episodes = read_episodes(path)[:size]
        except TraceFormatError as error:
            print(f"{path.name}: skipped ({error})", file=sys.stderr)
            continue
        if not episodes:
            print(f"{path.name}: skipped (no episodes)", file=sys.stderr)
            continue
        started = time.process_time()
        digest = book_json(episodes, name, args.route_folds)
        (args.out / f"{name}.json").write_text(json.dumps(digest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"{name}: {len(episodes)} episodes, {len(digest['rules'])} rules, "
              f"{time.process_time() - started:.1f} cpu s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
