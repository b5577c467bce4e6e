"""ALFWorld's planner (Fast Downward) in a process of its own, so a slow search can be stopped.

Why not fork the caller (as this once did): the caller is often multi-threaded (a Streamlit rerun,
the shell environment's launcher thread, Ray or torch worker threads), and a child forked from it
holds copies of locks that other threads held at that moment, which nobody will release there;
Python 3.12 warns about such forks. So each environment starts one small server with a fresh
interpreter (`planner_server.py`), single-threaded, which forks a child per search. The game's
state reaches it as text: Fast Downward's translation of the game (`PddlState.sas`) with its
initial state set to the state the game is in now, and the translation the planner searches
(`sas_replan`). The child answers operator names, turned into commands here with the game's own
templates (`PddlState.plan_to_templated_actions`), which is what `PddlState.replan` does in-process.

Cost, measured on the bundled heat-and-place game two moves in (a busy 2-core machine), against
forking the caller: the server starts once per environment (about 0.1 to 0.3 s); a search then
takes 0.87 s against 0.71 s (medians of 7), the difference being 1.9 MB of SAS text sent and
loaded. Searches from the opening state take over 10 s either way.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
import weakref
from pathlib import Path
from typing import Any

__all__ = ["PlannerServer", "current_sas"]

_SERVER = Path(__file__).with_name("planner_server.py")


def current_sas(sas: str, atoms: list[str]) -> str:
    """`sas` with its initial state replaced by `atoms`, one value name per variable, in variable order.

    Raises ValueError when an atom is not a value of its variable (or the counts differ).
    """
    lines = sas.split("\n")
    values: list[list[str]] = []
    index = 0
    while lines[index] != "begin_state":
        if lines[index] == "begin_variable":
            size = int(lines[index + 3])  # name, axiom layer, domain size, then the value names
            values.append(lines[index + 4:index + 4 + size])
            index += 4 + size
        index += 1
        if index >= len(lines):
            raise ValueError("SAS text without a begin_state section")
    if len(atoms) != len(values):
        raise ValueError(f"{len(atoms)} atoms for {len(values)} variables")
    for offset, (atom, names) in enumerate(zip(atoms, values, strict=True), start=index + 1):
        lines[offset] = str(names.index(atom))
    return "\n".join(lines)


def _atoms(pddl_state: Any) -> list[str]:
    """The game's current state as the library holds it: one value name per variable."""
    import fast_downward

    lib = pddl_state.downward_lib
    atoms = (fast_downward.Atom * lib.get_state_size())()
    lib.get_state(atoms)
    return [atom.name for atom in atoms]


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Kill the server and the search it runs (its process group), and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    process.wait()


class PlannerServer:
    """One environment's planner server: started on first use, replaced after a search runs out of time."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._pending = b""

    def replan(self, pddl_state: Any, entity_infos: Any, timeout: float) -> list[str] | None:
        """The plan's commands from the game's current state, [] when there is none, None when the
        search ran out of `timeout` seconds or failed."""
        from textworld.utils import check_flag

        try:
            sas = current_sas(pddl_state.sas, _atoms(pddl_state))
        except ValueError:
            return None
        request = {"sas": sas, "sas_replan": pddl_state.sas_replan, "verbose": bool(check_flag("TW_PDDL_DEBUG"))}
        names = self._ask(json.dumps(request).encode() + b"\n", time.monotonic() + timeout)
        if not names:
            return names
        try:
            return [str(command) for command in pddl_state.plan_to_templated_actions(names, entity_infos)]
        except (KeyError, IndexError, ValueError):  # a plan the game's templates cannot say
            return None

    def _ask(self, request: bytes, deadline: float) -> list[str] | None:
        process = self._process or self._start()
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(request)
            process.stdin.flush()
        except OSError:  # the server is gone
            self.close()
            return None
        line = self._read_line(process.stdout.fileno(), deadline)
        if line is None:
            self.close()  # out of time (or the server died): the next search starts a new one
            return None
        names = json.loads(line)
        return None if names is None else [str(name) for name in names]

    def _read_line(self, fd: int, deadline: float) -> bytes | None:
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line

    def _start(self) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            [sys.executable, str(_SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
        )
        self._process, self._pending = process, b""
        self._finalizer = weakref.finalize(self, _stop, process)
        return process

    def close(self) -> None:
        """Stop the server (and any search it runs); safe twice, and the next search starts another."""
        finalizer, self._finalizer, self._process = self._finalizer, None, None
        if finalizer is not None:
            finalizer()
