"""Shared CLI plumbing: the workspace option, JSON output, errors and exit codes."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson
from pydantic import ValidationError

from worldsmith.util.errors import BadInputError, WorldsmithError
from worldsmith.workspace import Workspace

__all__ = ["EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "CommandError", "add_common", "emit_json",
           "flag_errors", "report_error", "workspace_from"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT (the other codes: `worldsmith.util.errors`)


class CommandError(WorldsmithError):
    """An expected failure found by the CLI itself: printed as one line (or a JSON object with --json), exit code
    1 (or `code`: 2 for a bad command line)."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code
        self.exit_code = code
        self.kind = "usage" if code == EXIT_USAGE else "error"


def flag_errors(error: ValidationError) -> BadInputError:
    """A pydantic error on a model built from flags as one `BadInputError` naming each flag (`--max-tokens: ...`;
    a check of several flags together: its message alone)."""
    problems = [(f"--{'.'.join(str(part) for part in item['loc']).replace('_', '-')}: " if item["loc"] else "")
                + str(item["msg"]).removeprefix("Value error, ") for item in error.errors()]
    return BadInputError("; ".join(problems) or str(error))


def report_error(error: WorldsmithError, *, as_json: bool) -> int:
    """Print an expected failure as one line on stderr (with --json: `{"error", "kind", "where"}` on stdout, as
    every command prints its result) and return its exit code."""
    if as_json:
        emit_json(error.to_json())
    else:
        print(f"worldsmith: error: {error}", file=sys.stderr)
    return error.exit_code


def add_common(parser: argparse.ArgumentParser, *, json_flag: bool = True) -> None:
    parser.add_argument(
        "--workspace", metavar="PATH", default=argparse.SUPPRESS,
        help="workspace folder (default: $WORLDSMITH_WORKSPACE or ./workspace)",
    )
    if json_flag:
        parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                            help="print one JSON object instead of text")


def workspace_from(args: argparse.Namespace) -> Workspace:
    return Workspace(getattr(args, "workspace", None))


def emit_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS, default=str).decode() + "\n")
    sys.stdout.flush()
