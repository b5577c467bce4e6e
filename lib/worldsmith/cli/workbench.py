"""`worldsmith workbench`: start the Streamlit workbench (localhost only unless told otherwise)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from worldsmith._resources import workbench_app
from worldsmith.cli.common import add_common


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("workbench", help="start the web workbench")
    parser.add_argument("--port", type=int, default=8501)
    parser.add_argument("--address", default="127.0.0.1", help="listen address (default: localhost only)")
    parser.add_argument("--app", default=None, help="path to a workbench app.py (default: the one shipped with worldsmith)")
    add_common(parser, json_flag=False)
    parser.set_defaults(handler=run)


def app_path(explicit: str | None) -> Path:
    """`--app`, else the app that ships with this library (the checkout's, or the wheel's copy): never one
    found through the working directory, which may be another checkout or none."""
    if explicit:
        app = Path(explicit)
        if not app.is_file():
            raise SystemExit(f"--app {explicit}: no such file")
        return app
    try:
        return workbench_app()
    except FileNotFoundError as error:
        raise SystemExit(str(error)) from None


def run(args: argparse.Namespace) -> int:
    env = dict(os.environ)
    if getattr(args, "workspace", None):
        env["WORLDSMITH_WORKSPACE"] = str(Path(args.workspace).resolve())
    command = [
        sys.executable, "-m", "streamlit", "run", str(app_path(args.app)),
        "--server.address", args.address, "--server.port", str(args.port),
        "--server.headless", "true", "--browser.gatherUsageStats", "false",
    ]
    if os.name == "posix":
        # Become Streamlit, so a signal sent to `worldsmith workbench` (a supervisor's SIGTERM, `kill PID`)
        # stops the server instead of leaving it running, orphaned, on the port.
        os.execve(sys.executable, command, env)
    return subprocess.call(command, env=env)
