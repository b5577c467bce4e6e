"""`worldsmith book patch ... --against SPLIT`: the held-out delta an edit made, printed after the new version:
open loop first (the agent's view), then teacher forced with its per-action deltas and flipped turns.

The set is checked (it exists, it does not leak into the book) before the patch is stored, so a bad
`--against` never leaves a version behind without its delta.
"""

from __future__ import annotations

import argparse
from typing import Any

from pydantic import ValidationError

from worldsmith.cli.common import CommandError
from worldsmith.evals.heldout import HeldOut, HeldOutDelta, MetricDelta, check_heldout, heldout_delta
from worldsmith.util.errors import WorldsmithError
from worldsmith.workspace import Workspace
from worldsmith.worldbook import Worldbook, WorldbookStore
from worldsmith.worldbook.leakage import LeakageError

__all__ = ["add_against", "against_from", "delta_after_patch", "delta_json", "print_delta"]

SHOWN_FLIPS = 20


def add_against(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--against", metavar="SPLIT", help="print the held-out delta of the edit on this split")
    parser.add_argument("--against-dataset", metavar="DATASET",
                        help="the held-out dataset (default: the dataset the book was built from)")
    parser.add_argument("--against-episodes", metavar="IDS", help="comma-separated held-out episode ids "
                                                                   "(instead of, or within, --against)")


def against_from(args: argparse.Namespace, store: WorldbookStore, workspace: Workspace,
                 base: Worldbook) -> HeldOut | None:
    """The held-out set `--against*` name, checked against the base book; None when none is asked for."""
    episodes = tuple(e.strip() for e in (args.against_episodes or "").split(",") if e.strip()) or None
    if args.against is None and episodes is None:
        if args.against_dataset:
            raise CommandError("--against-dataset needs --against SPLIT or --against-episodes IDS")
        return None
    dataset = args.against_dataset or _source_dataset(store, args.book)
    if dataset is None:
        raise CommandError(f"worldbook {args.book!r} names no source dataset: give --against-dataset")
    try:
        heldout = HeldOut(dataset=dataset, split=args.against, episodes=episodes)
        check_heldout(base, heldout, workspace)
    except LeakageError as error:
        raise CommandError(f"--against {heldout.label()}: {error}") from None
    except (ValidationError, WorldsmithError) as error:  # no split or episode list, no such split, dataset ...
        raise CommandError(f"--against: {error}") from None
    return heldout


def _source_dataset(store: WorldbookStore, name: str) -> str | None:
    sources = store.info(name, store.head(name)).sources
    return next((s["dataset"] for s in sources if isinstance(s, dict) and s.get("dataset")), None)


def delta_after_patch(store: WorldbookStore, workspace: Workspace, name: str, parent: str, version: str,
                      heldout: HeldOut) -> HeldOutDelta:
    try:
        return heldout_delta(store.load(name, parent), store.load(name, version), heldout, workspace)
    except WorldsmithError as error:  # LeakageError: the patch added evidence from the held-out set
        raise CommandError(f"{name}: version {version} stored, but its held-out delta is refused: {error}") from None


def _row(label: str, delta: MetricDelta) -> str:
    return (f"  {label:<28} {delta.before:.3f} → {delta.after:.3f}  {delta.diff:+.3f} "
            f"[{delta.low:+.3f}, {delta.high:+.3f}]  n={delta.n}")


def _short(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")


def print_delta(delta: HeldOutDelta) -> None:
    print(f"held-out {delta.heldout.label()}: {delta.episodes} episodes, {delta.turns} turns "
          f"(after - before, 95% paired bootstrap over episodes; {delta.seconds:.2f}s)")
    if delta.open_loop:
        print("  open loop (drift: the harness on its own answers, as under an agent):")
        for metric, value in delta.open_loop.items():
            print(_row(metric, value))
        print("  teacher forced (next-obs: each turn after the real prefix):")
    if delta.provenance is not None:
        print(f"  teacher-forced numbers from: {delta.provenance.line()}")
    for metric, value in delta.metrics.items():
        print(_row(metric, value))
    for action, metrics in delta.by_action.items():
        for metric, value in metrics.items():
            print(_row(f"{action}: {metric}", value))
    print(f"  {len(delta.fixed)} fixed, {len(delta.broken)} broken (teacher forced)")
    for turn in delta.flipped[:SHOWN_FLIPS]:
        print(f"  {turn.kind:<6} {turn.turn_id} {turn.action}: {_short(turn.action_text, 40)}  "
              f"before {_short(turn.before)}  after {_short(turn.after)}  target {_short(turn.target)}")
    if len(delta.flipped) > SHOWN_FLIPS:
        print(f"  … {len(delta.flipped) - SHOWN_FLIPS} more (--json lists all)")


def delta_json(delta: HeldOutDelta) -> dict[str, Any]:
    return {**delta.model_dump(mode="json"), "fixed": len(delta.fixed), "broken": len(delta.broken)}
