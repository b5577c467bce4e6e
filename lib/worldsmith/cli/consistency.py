"""`worldsmith consistency --book BOOK`: does a simulator of the book behave like a stateful API at all?

    worldsmith consistency --book shop [--version V] [--method harness] [--sessions 20] [--steps 12] [--seed 0] \
        [--llm SPEC] [--out FILE] [--json]

Open-loop probe sessions made from the book's own tools and recordings (`evals.consistency`); prints per tool
each invariant's violations/checks (with --json the whole report) and exits 0 whatever it found: violations are
measurements, not errors. `--out` stores the report (a file, or a folder that gets `consistency.json`).
"""

from __future__ import annotations

import argparse
import sys

from worldsmith.cli.common import EXIT_OK, CommandError, add_common, emit_json, workspace_from
from worldsmith.evals.consistency import ConsistencyConfig, check_consistency
from worldsmith.evals.consistency_report import INVARIANTS, ConsistencyReport
from worldsmith.llm import LLMError, open_llm, resolve_spec
from worldsmith.sim.factory import DEFAULT_WORLD_MODEL
from worldsmith.sim.registry import canonical_world_model, needs_llm, takes_llm, world_model_names
from worldsmith.worldbook import WorldbookStore

__all__ = ["register", "run_consistency"]

_SHORT = {"repeated_reads": "repeat", "answers_about_id": "about id", "stable_existence": "exists",
          "spelling": "spelling", "write_then_read": "write>read"}  # the table's column heads


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("consistency", help="probe a simulator open loop for the invariants every "
                                   "stateful API obeys (repeated reads, ids, existence, spellings, writes)")
    parser.add_argument("--book", required=True, help="worldbook name in the workspace")
    parser.add_argument("--version", help="worldbook version (default: HEAD)")
    parser.add_argument("--method", default=DEFAULT_WORLD_MODEL,
                        help=f"world model (default: {DEFAULT_WORLD_MODEL}); one of " + ", ".join(world_model_names()))
    parser.add_argument("--sessions", type=int, default=20, help="probe sessions (default: 20)")
    parser.add_argument("--steps", type=int, default=12, help="probe steps per session (default: 12)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--llm", metavar="SPEC", help="model spec (or models.toml name) for a method that uses one")
    parser.add_argument("--out", metavar="FILE", help="store the report as JSON (a folder: FOLDER/consistency.json)")
    add_common(parser)
    parser.set_defaults(handler=run_consistency)


def _print_table(report: ConsistencyReport) -> None:
    version = f"@{report.book_version[:12]}" if report.book_version else ""
    print(f"{report.book}{version} · {report.method} · {report.sessions} sessions × {report.steps} steps · "
          f"seed {report.seed} · {report.predictions} predictions")
    heads = [_SHORT[name] for name in INVARIANTS]
    rows = report.rows()
    width = max([len("tool"), *(len(row["tool"]) for row in rows)])
    print(f"{'tool':<{width}}  " + "  ".join(f"{head:>10}" for head in heads))
    for row in rows:
        print(f"{row['tool']:<{width}}  " + "  ".join(f"{row[name]:>10}" for name in INVARIANTS))
    print("violations/checks; rate per invariant: " + ", ".join(
        f"{_SHORT[name]} {tally.violations}/{tally.checks}" + (f" ({tally.rate:.1%})" if tally.rate is not None else "")
        for name, tally in report.invariants.items()))
    for name in INVARIANTS:  # one example per invariant violated
        example = next((e for e in report.examples if e.invariant == name), None)
        if example is not None:
            print(f"  e.g. {_SHORT[name]} on {example.tool}: {example.note} · " + " → ".join(example.calls)[:300])


def run_consistency(args: argparse.Namespace) -> int:
    workspace = workspace_from(args)
    store = WorldbookStore.of_workspace(workspace)
    version = args.version or store.head(args.book)
    book = store.load(args.book, version)
    method = canonical_world_model(args.method)
    if method not in world_model_names():
        raise CommandError(f"unknown world model {args.method!r}: choose from {', '.join(world_model_names())}",
                           code=2)
    if needs_llm(method) and not args.llm:
        raise CommandError(f"{method} needs a model: pass --llm SPEC", code=2)
    config = ConsistencyConfig(method=method, sessions=args.sessions, steps=args.steps, seed=args.seed)
    llm = None
    if args.llm and takes_llm(method):
        try:
            llm = open_llm(resolve_spec(args.llm, workspace.root), workspace.root, component="consistency")
        except LLMError as error:
            raise CommandError(f"cannot open model {args.llm!r}: {error}") from None
    as_json = bool(getattr(args, "json", False))
    progress = None if as_json else (lambda done, total: print(f"\rsession {done}/{total}", end="",
                                                                file=sys.stderr, flush=True))
    try:
        report = check_consistency(book, config, llm=llm, book_version=version, progress=progress)
    finally:
        if llm is not None:
            llm.close()
    if progress is not None:
        print(file=sys.stderr)
    stored = str(report.save(args.out)) if args.out else None
    if as_json:
        emit_json({**report.model_dump(mode="json"), "stored": stored})
        return EXIT_OK
    _print_table(report)
    if stored:
        print(f"stored: {stored}")
    return EXIT_OK
