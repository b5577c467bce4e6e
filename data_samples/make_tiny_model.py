"""Retrain the shipped tiny model (data_samples/models/tiny) from the sample traces.

    OMP_NUM_THREADS=2 .venv/bin/python data_samples/make_tiny_model.py
        # [--out DIR] [--steps N] [--seed S] [--max-minutes M: the safety stop, on a busy host]

Ingests data_samples/ into a temporary workspace and calls `worldsmith.llm.tiny.train_tiny` with
its default configuration, so the committed folder is exactly what the library builds. Takes a few
minutes on CPU (torch uses OMP_NUM_THREADS threads); deterministic for a seed and thread count.
The folder records how it was made in `worldsmith_tiny.json`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from worldsmith import Workspace  # noqa: E402
from worldsmith.llm.tiny import TinyConfig, TrainProgress, train_tiny  # noqa: E402
from worldsmith.traces.files import sample_trace_files  # noqa: E402

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(HERE / "models" / "tiny"))
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps (default: TinyConfig's)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--max-minutes", type=float, default=None, help="safety stop (default: TinyConfig's)")
    args = parser.parse_args(argv)
    given = (("steps", args.steps), ("seed", args.seed), ("max_minutes", args.max_minutes))
    overrides = {key: value for key, value in given if value is not None}
    config = dataclasses.replace(TinyConfig(), **overrides)

    def progress(event: TrainProgress) -> None:
        if event.step == 1 or event.step % 20 == 0 or event.step == event.steps:
            print(event, file=sys.stderr)

    with tempfile.TemporaryDirectory() as tmp:
        workspace = Workspace(tmp)
        traces = sample_trace_files(HERE)
        workspace.ingest(traces, "samples")
        report = train_tiny(workspace.dataset("samples").iter_episodes(), args.out, config=config, progress=progress)
    summary = {key: value for key, value in report.to_json().items() if key not in ("losses", "config")}
    print(json.dumps(summary, indent=1))
    size = sum(path.stat().st_size for path in Path(args.out).iterdir())
    print(f"{args.out}: {size / 2**20:.1f} MiB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
