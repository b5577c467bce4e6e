"""The `worldsmith` command: one sub-module per command group.

Exit codes: 0 success, 1 errors (or rejects under --strict) and crashes, 2 usage, 3 bad input, 4 not found,
5 conflict, 6 busy, 7 unavailable, 130 interrupted (the table: `worldsmith.util.errors`). An expected failure is a
`WorldsmithError`, printed as one line; anything else is a bug and crashes with a traceback.
"""

from __future__ import annotations

import argparse
import sys

from worldsmith import __version__
from worldsmith.cli import (
    book,
    build,
    consistency,
    envace,
    envs,
    explore,
    export,
    fork,
    ingest,
    jobs,
    llm,
    plugins,
    proxy,
    serve,
    sidebyside,
    simulate,
    split,
    traces,
    workbench,
)
from worldsmith.cli import eval as evaluate
from worldsmith.cli.common import EXIT_INTERRUPTED, report_error
from worldsmith.util.errors import WorldsmithError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="worldsmith", description="Turn recorded agent interactions into simulators of their environments."
    )
    parser.add_argument("--version", action="version", version=f"worldsmith {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (ingest, traces, split, export, envs, explore, llm, build, book, simulate, fork, sidebyside, evaluate,
                   consistency, envace, jobs, workbench, serve, proxy, plugins):
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except WorldsmithError as error:  # bad input, not found, conflict, busy, unavailable: one line, its exit code
        return report_error(error, as_json=bool(getattr(args, "json", False)))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    # anything else is a bug: it crashes with a traceback (exit 1)


if __name__ == "__main__":
    sys.exit(main())
