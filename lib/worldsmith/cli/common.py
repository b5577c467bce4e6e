"""Shared CLI plumbing: the workspace option, JSON output, errors and exit codes."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from worldsmith.workspace import Workspace

__all__ = ["EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "CommandError", "add_common", "emit_json", "workspace_from"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


class CommandError(Exception):
    """An expected failure: printed as one line (or a JSON object with --json), exit code 1."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


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
