"""Workers for the harness reliability tests: a `Harness` playing through a `Session` in a spawned process.

Each worker reads the worldbook and the actions to play from JSON files the test wrote (so it does
not rebuild anything), opens the session, attaches a fresh harness and plays
`actions[len(session) % len(actions)]` — until it is killed, or dying (SIGKILL) at a chosen point of
one commit. They live in an importable module because spawned processes import their target.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import orjson

BOOK_FILE = "book.json"
ACTIONS_FILE = "actions.json"


def write_inputs(folder: Path, book_json: str, actions: list[object]) -> None:
    """What the workers read: the worldbook and the cycle of actions (Action dumps, text or junk)."""
    (folder / BOOK_FILE).write_text(book_json)
    (folder / ACTIONS_FILE).write_bytes(orjson.dumps(actions))


def _open(directory: str):
    from worldsmith.sim import Session
    from worldsmith.sim.harness import Harness
    from worldsmith.worldbook import Worldbook

    folder = Path(directory).parent
    book = Worldbook.model_validate_json((folder / BOOK_FILE).read_text())
    actions = orjson.loads((folder / ACTIONS_FILE).read_bytes())
    session = Session.open(directory)
    harness = Harness(book)
    session.attach(harness)
    return session, harness, actions


def play_forever(directory: str) -> None:
    """Play the action cycle through the session until killed."""
    session, harness, actions = _open(directory)
    while True:
        session.play(harness, actions[len(session) % len(actions)])


def play_and_die_in_transaction(directory: str) -> None:
    """Play one turn, dying inside the SQLite transaction after the turn row is written."""
    session, harness, actions = _open(directory)

    def trace(statement: str) -> None:
        if statement.startswith("UPDATE meta"):
            os.kill(os.getpid(), signal.SIGKILL)

    session._db.set_trace_callback(trace)
    session.play(harness, actions[len(session) % len(actions)])


def play_and_die_writing_mirrors(directory: str) -> None:
    """Play one turn, dying after SQLite committed, while the readable mirrors are written."""
    import worldsmith.sim.session as session_module

    def die(*args: object, **kwargs: object) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    session, harness, actions = _open(directory)
    session_module.atomic_write_json = die
    session.play(harness, actions[len(session) % len(actions)])
