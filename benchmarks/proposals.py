"""Proposed patches on the bundled samples: how long they take, and what they do on held-out turns.

    OMP_NUM_THREADS=1 python benchmarks/proposals.py [--seeds 0 1 2] [--envs alfworld bfcl scienceworld]
        [--out benchmarks/results/proposals.json]

For each environment and split seed: import data_samples/ into a fresh workspace, split it 60/40 train/test by
family, build a book on train (deterministic, no route table), then for every rule `propose_patches` (timed) and,
for each proposal, `evals.heldout.heldout_delta` on the test episodes the book was not built from (no-model
harness, teacher forcing). A proposal is counted as raising, lowering (a broken turn or a metric of its action
down) or leaving the simulator's held-out fidelity on its action. Prints one line per environment and seed and
writes the rows as JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(env: str, seed: int) -> dict:
    from worldsmith.evals.heldout import HeldOut, heldout_delta
    from worldsmith.traces.files import sample_trace_files
    from worldsmith.workspace import Workspace
    from worldsmith.worldbook import WorldbookStore, propose_patches
    from worldsmith.worldbook.build import build_dataset
    from worldsmith.worldbook.store import apply_ops

    root = Path(tempfile.mkdtemp(prefix="bench-proposals-")) / "ws"
    workspace = Workspace(root)
    workspace.ingest(sample_trace_files(REPO / "data_samples"), "samples")
    workspace.split("samples", {"train": 0.6, "test": 0.4}, seed=seed)
    build_dataset(workspace, "samples", out="book", split="train", validate_split="test", env=env)
    store = WorldbookStore(root / "worldbooks")
    book = store.load("book")
    built_from = {item.turn_id.rsplit("#", 1)[0] for item in book.evidence}
    held = tuple(sorted(e.id for e in workspace.dataset("samples").iter_episodes("test")
                        if e.id not in built_from and (e.env_id or "").split("/")[0] == env))
    heldout = HeldOut(dataset="samples", split="test", env=env, episodes=held)
    row = {"env": env, "seed": seed, "rules": len(book.rules), "heldout_episodes": len(held), "proposals": 0,
           "by_kind": {}, "raise": 0, "lower": 0, "same": 0, "leak": 0, "propose_s": 0.0, "delta_s": 0.0,
           "raising": []}
    for rule in book.rules:
        started = time.perf_counter()
        proposals = propose_patches(book, rule.id)
        row["propose_s"] += time.perf_counter() - started
        for proposal in proposals:
            row["proposals"] += 1
            row["by_kind"][proposal.kind] = row["by_kind"].get(proposal.kind, 0) + 1
            started = time.perf_counter()
            try:
                delta = heldout_delta(book, apply_ops(book, proposal.patch.ops), heldout, workspace,
                                      action=rule.action, resamples=500)
            except ValueError:
                row["leak"] += 1
                continue
            row["delta_s"] += time.perf_counter() - started
            moved = delta.by_action.get(rule.action, {})
            if delta.broken or any(m.diff < 0 for m in moved.values()):
                row["lower"] += 1
            elif delta.fixed or any(m.diff > 0 for m in moved.values()):
                row["raise"] += 1
                row["raising"].append({"rule": rule.id, "kind": proposal.kind, "explanation": proposal.explanation,
                                       "summary": delta.summary()})
            else:
                row["same"] += 1
    row["propose_s"] = round(row["propose_s"], 3)
    row["delta_s"] = round(row["delta_s"], 3)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--envs", nargs="+", default=["alfworld", "bfcl", "scienceworld"])
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "proposals.json")
    args = parser.parse_args()
    rows = []
    for env in args.envs:
        for seed in args.seeds:
            row = run(env, seed)
            rows.append(row)
            print(f"{env:13s} seed {seed}: {row['rules']:3d} rules, {row['proposals']:3d} proposals {row['by_kind']} "
                  f"in {row['propose_s']:.2f}s; held-out ({row['heldout_episodes']} episodes): "
                  f"{row['raise']} raise, {row['lower']} lower, {row['same']} same, {row['leak']} leak "
                  f"({row['delta_s']:.2f}s)", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": platform.platform(), "python": platform.python_version(),
                                    "rows": rows}, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
