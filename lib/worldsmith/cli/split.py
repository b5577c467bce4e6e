"""`worldsmith split --dataset NAME [--ratios train=0.8,validation=0.1,test=0.1] [--seed N]`."""

from __future__ import annotations

import argparse

from worldsmith.cli.common import EXIT_OK, add_common, emit_json, workspace_from
from worldsmith.workspace.splits import parse_ratios


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "split", help="assign train/validation/test splits by trajectory family",
        description="Assign every episode to a split; all episodes of a trajectory family "
        "(family, else task_id, else the episode) land in the same split.",
    )
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--ratios", type=parse_ratios, default=None, metavar="NAME=FRACTION,...",
                        help="default train=0.8,validation=0.1,test=0.1")
    parser.add_argument("--seed", type=int, default=0)
    add_common(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    result = workspace_from(args).split(args.dataset, args.ratios, seed=args.seed)
    if getattr(args, "json", False):
        emit_json(result)
    else:
        for name, counts in result["splits"].items():
            dialogue = f" ({counts['dialogue_only']} dialogue only)" if counts["dialogue_only"] else ""
            print(f"{name:<12} {counts['families']:>6} families {counts['episodes']:>8} episodes{dialogue}")
    return EXIT_OK
