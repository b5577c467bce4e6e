"""Helpers for the simulator tests: sample episodes, worldbooks built from them, and session workers.

The workers run in spawned processes (the kill-mid-commit tests), so they live in this importable
module rather than in a test file.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from helpers import sample_episodes  # noqa: F401 - re-exported for the sim tests
from worldsmith.traces import Episode
from worldsmith.worldbook import Worldbook, build_worldbook

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "data_samples" / "collected"
TINY = REPO / "data_samples" / "models" / "tiny"


def book_from(episodes: list[Episode], name: str) -> Worldbook:
    """The worldbook the product's deterministic builder makes of the episodes."""
    return build_worldbook(episodes, name=name, env_id=episodes[0].env_id).book


def opening(episode: Episode, turns: int = 0) -> Episode:
    """The episode cut to its first `turns` turns: the prefix a world model starts from."""
    return episode.model_copy(update={"turns": episode.turns[:turns]})


# ------------------------------------------------------------------ workers for the kill tests


def counter_turn(count: int):
    """The turn a worker commits: state {"count": n, "padding": ...} so each commit writes some bytes."""
    from worldsmith.sim import Audit, Prediction
    from worldsmith.sim.session import TurnRecord
    from worldsmith.traces import Action

    state = {"count": count, "padding": "x" * 20_000}
    prediction = Prediction(observation=f"count is {count}", outcome="success", state=state,
                            audit=Audit(route="test"))
    return TurnRecord(action=Action(name="inc", raw="inc"), prediction=prediction,
                      memory=[{"kind": "seen", "key": f"k{count}", "value": count}])


def commit_forever(directory: str) -> None:
    """Commit turns in a loop until killed."""
    from worldsmith.sim import Session

    session = Session.open(directory)
    while True:
        session.commit(counter_turn(len(session) + 1), session.revision)


def commit_and_die_in_transaction(directory: str) -> None:
    """Commit once, dying (SIGKILL) inside the SQLite transaction, after the turn row is written."""
    from worldsmith.sim import Session

    session = Session.open(directory)

    def trace(statement: str) -> None:
        if statement.startswith("UPDATE meta"):
            os.kill(os.getpid(), signal.SIGKILL)

    session._db.set_trace_callback(trace)
    session.commit(counter_turn(len(session) + 1), session.revision)


def commit_and_die_writing_mirrors(directory: str) -> None:
    """Commit once, dying (SIGKILL) after SQLite committed, while the mirrors are being written."""
    import worldsmith.sim.session as session_module
    from worldsmith.sim import Session

    def die(*args: object, **kwargs: object) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    session_module.atomic_write_json = die
    session = Session.open(directory)
    session.commit(counter_turn(len(session) + 1), session.revision)
