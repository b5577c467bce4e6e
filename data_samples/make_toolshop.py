"""Regenerate the toolshop samples, and measure how fast toolshop episodes are collected.

    .venv/bin/python data_samples/make_toolshop.py                 # the three sample files (a few seconds)
    .venv/bin/python data_samples/make_toolshop.py --bench 1000    # also: episodes per CPU-second, 2 workers
    .venv/bin/python data_samples/make_toolshop.py --no-samples --conversations 5000 --conversations-out big.jsonl

* toolshop/expert.jsonl: expert episodes of 30 tasks of database 0 (with ground-truth state),
  exactly as `worldsmith collect toolshop --tasks ...` records them;
* toolshop/probing.jsonl: the probing policy on the same 30 tasks (seed 0, no state);
* toolshop/conversations.openai.jsonl: 40 scripted agent transcripts in the OpenAI chat format,
  4 of them without any tool call (policy questions answered directly).

The folder is kept out of the workbench's first-start import of data_samples/ (like alfworld/ and
models/): its task families would reshuffle the seeded split the bundled ALFWorld worldbook uses.

Everything is deterministic: the database, the tasks and the policies are seeded, and the
files are written with a fixed layout. Nothing needs bfcl, TextWorld or the other environments.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "lib"))

from worldsmith.envs.collect import CollectConfig, collect, load_run_episodes  # noqa: E402
from worldsmith.envs.toolshop.conversations import conversations  # noqa: E402
from worldsmith.traces.exporters import export_episodes  # noqa: E402
from worldsmith.workspace import Workspace  # noqa: E402

EXPERT_FILE = "toolshop/expert.jsonl"
PROBING_FILE = "toolshop/probing.jsonl"
CONVERSATIONS_FILE = "toolshop/conversations.openai.jsonl"
SAMPLE_TASKS = [f"db=0:task={index}" for index in sorted(random.Random("toolshop-samples").sample(range(20_000), 30))]
CONVERSATIONS, TOOLLESS_RATE = 40, 0.1


def _collect(workspace: Workspace, dataset: str, out: Path, **settings: Any) -> int:
    report = collect(workspace, dataset, CollectConfig(env="toolshop", tasks=SAMPLE_TASKS, workers=0, **settings))
    broken = [f for f in report.summary()["failures"] if f["status"] not in ("ok", "failed")]
    if broken:
        raise RuntimeError(f"{dataset}: episodes did not run: {broken}")
    if settings.get("policy", "expert") == "expert" and report.wins != len(SAMPLE_TASKS):
        raise RuntimeError(f"{dataset}: the expert did not win every sample task: {report.summary()['failures']}")
    episodes = sorted(load_run_episodes(workspace.root, dataset), key=lambda episode: episode.id)
    return export_episodes(episodes, "jsonl", out)


def make_samples(root: Path) -> dict[str, int]:
    counts = {}
    with tempfile.TemporaryDirectory(prefix="ws-toolshop-") as tmp:
        workspace = Workspace(Path(tmp) / "workspace")
        counts[EXPERT_FILE] = _collect(workspace, "toolshop", root / EXPERT_FILE)
        counts[PROBING_FILE] = _collect(workspace, "toolshop-probing", root / PROBING_FILE, policy="probing",
                                        record_state=False)
    counts[CONVERSATIONS_FILE] = write_conversations(root / CONVERSATIONS_FILE, CONVERSATIONS)
    return counts


def write_conversations(target: Path, count: int, *, db: int = 0, seed: int = 0) -> int:
    records = conversations(count, db=db, seed=seed, toolless_rate=TOOLLESS_RATE)
    temporary = target.with_suffix(".tmp")
    temporary.write_text("".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records),
                         encoding="utf-8")
    temporary.replace(target)
    return len(records)


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def bench(episodes: int, workers: int, policy: str) -> dict[str, Any]:
    """Collect `episodes` episodes as `worldsmith collect toolshop` does (states recorded, episodes ingested)."""
    with tempfile.TemporaryDirectory(prefix="ws-toolshop-bench-") as tmp:
        workspace = Workspace(Path(tmp) / "workspace")
        cpu, wall = _cpu_seconds(), time.perf_counter()
        report = collect(workspace, "bench", CollectConfig(env="toolshop", policy=policy, episodes=episodes,
                                                           workers=workers, keep="all"))
        cpu, wall = _cpu_seconds() - cpu, time.perf_counter() - wall
    return {"episodes": report.episodes, "policy": policy, "workers": workers, "win_rate": report.win_rate,
            "cpu_seconds": round(cpu, 2), "wall_seconds": round(wall, 2),
            "episodes_per_cpu_second": round(report.episodes / cpu, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=HERE, help="the data_samples folder to write into")
    parser.add_argument("--bench", type=int, metavar="EPISODES", help="also time a collection of this many episodes")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-samples", action="store_true", help="leave the sample files alone")
    parser.add_argument("--conversations", type=int, metavar="N", help="also write N transcripts (db 0, seed 0)")
    parser.add_argument("--conversations-out", type=Path, default=Path("toolshop_conversations.openai.jsonl"))
    options = parser.parse_args(argv)
    if not options.no_samples:
        for name, count in make_samples(options.out).items():
            size = (options.out / name).stat().st_size
            print(f"{name}: {count} {'conversations' if name.endswith('openai.jsonl') else 'episodes'}, "
                  f"{size / 1024:.0f} KB")
    if options.conversations:
        written = write_conversations(options.conversations_out, options.conversations)
        print(f"{options.conversations_out}: {written} conversations")
    if options.bench:
        for policy in ("expert", "probing"):
            print(json.dumps(bench(options.bench, options.workers, policy)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
