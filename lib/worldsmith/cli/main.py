"""The `worldsmith` command: one sub-module per command group.

Exit codes: 0 success, 1 errors (or rejects under --strict), 2 usage.
"""

from __future__ import annotations

import argparse
import sys

from worldsmith import __version__
from worldsmith.cli import (
    book,
    build,
    envace,
    envs,
    explore,
    export,
    fork,
    ingest,
    jobs,
    llm,
    plugins,
    serve,
    sidebyside,
    simulate,
    split,
    traces,
    workbench,
)
from worldsmith.cli import eval as evaluate
from worldsmith.cli.common import EXIT_ERROR, EXIT_USAGE, CommandError, emit_json
from worldsmith.envs import EnvError, UnknownEnvError
from worldsmith.workspace import DatasetNotFound
from worldsmith.worldbook import WorldbookError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="worldsmith", description="Turn recorded agent interactions into simulators of their environments."
    )
    parser.add_argument("--version", action="version", version=f"worldsmith {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (ingest, traces, split, export, envs, explore, llm, build, book, simulate, fork, sidebyside, evaluate,
                   envace, jobs, workbench, serve, plugins):
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (CommandError, DatasetNotFound, EnvError, UnknownEnvError, WorldbookError, ValueError, OSError) as error:
        code = error.code if isinstance(error, CommandError) else EXIT_ERROR
        message = str(error.args[0]) if isinstance(error, DatasetNotFound) and error.args else str(error)
        if getattr(args, "json", False):
            emit_json({"error": message})
        else:
            print(f"worldsmith: error: {message}", file=sys.stderr)
        return code
    except KeyboardInterrupt:
        return EXIT_USAGE + 128


if __name__ == "__main__":
    sys.exit(main())
