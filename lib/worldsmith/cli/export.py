"""`worldsmith export --dataset NAME --format jsonl|openai|trace2env --out FILE [--split S]`."""

from __future__ import annotations

import argparse

from worldsmith.cli.common import EXIT_OK, add_common, emit_json, workspace_from
from worldsmith.traces.exporters import EXPORTERS
from worldsmith.util.errors import user_path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("export", help="write a dataset as native JSONL, OpenAI messages or Trace2Env")
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--format", required=True, choices=sorted(EXPORTERS))
    parser.add_argument("--out", required=True, help="output file (JSONL, written atomically)")
    parser.add_argument("--split", help="only episodes of this split")
    add_common(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    with user_path(args.out, "--out"):
        count = workspace_from(args).export(args.dataset, args.format, args.out, split=args.split)
    if getattr(args, "json", False):
        emit_json({"dataset": args.dataset, "format": args.format, "out": args.out, "episodes": count})
    else:
        print(f"wrote {count} episodes to {args.out}")
    return EXIT_OK
