"""`worldsmith fork --session DIR --at N [--to DIR]`: a new session keeping a session's first N turns."""

from __future__ import annotations

import argparse
from pathlib import Path

from worldsmith.cli.common import EXIT_OK, CommandError, add_common, emit_json
from worldsmith.sim import Session, SessionError

__all__ = ["register", "run_fork"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("fork", help="copy a simulation session's first N turns into a new session")
    parser.add_argument("--session", required=True, type=Path, help="the session folder to fork")
    parser.add_argument("--at", required=True, type=int, metavar="N", help="keep the first N turns")
    parser.add_argument("--to", type=Path, metavar="DIR",
                        help="the new session's folder (default: beside it, <name>-fork<N>[-<n>])")
    add_common(parser)
    parser.set_defaults(handler=run_fork)


def run_fork(args: argparse.Namespace) -> int:
    try:
        with Session.open(args.session) as session, session.fork(args.at, args.to) as forked:
            value = {"session": str(forked.directory), "parent": str(session.directory), "forked_at": args.at,
                     "turns": len(forked), "revision": forked.revision}
    except SessionError as error:
        raise CommandError(str(error)) from None
    if getattr(args, "json", False):
        emit_json(value)
    else:
        print(f"forked {value['parent']} at turn {args.at} into {value['session']}")
    return EXIT_OK
