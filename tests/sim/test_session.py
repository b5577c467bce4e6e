"""Sessions: reopen, fork, compare, stale revisions, atomic commits, and processes killed mid-commit."""

from __future__ import annotations

import multiprocessing
import signal
import time
from pathlib import Path

import orjson
import pytest
import sim_support
from sim_support import book_from, counter_turn

from worldsmith.sim import (
    Audit,
    NearestEvidence,
    Prediction,
    Session,
    SessionError,
    WorldModelBase,
    new_session_name,
    session_name,
)
from worldsmith.sim.session import (
    AUDIT_FILE,
    STATE_FILE,
    MemoryItem,
    SessionExistsError,
    SessionNotFoundError,
    StaleSessionError,
    TurnRecord,
    fork_directory,
    state_differences,
)
from worldsmith.traces import Action


def _record(text: str, state: dict | None = None, memory: list[MemoryItem] | None = None) -> TurnRecord:
    return TurnRecord(action=Action(name=text.split()[0], raw=text),
                      prediction=Prediction(observation=f"after {text}", outcome="success", state=state,
                                            audit=Audit(route="test")),
                      memory=memory or [])


def _mirrors(directory: Path) -> tuple[dict, list[dict]]:
    state = orjson.loads((directory / STATE_FILE).read_bytes())
    audit = [orjson.loads(line) for line in (directory / AUDIT_FILE).read_bytes().splitlines()]
    return state, audit


def _assert_consistent(session: Session) -> None:
    """SQLite holds turns 0..n-1 with revisions 1..n, and both mirrors say exactly that."""
    turns = session.turns()
    assert [t.index for t in turns] == list(range(len(turns)))
    assert [t.revision for t in turns] == list(range(1, len(turns) + 1))
    assert session.revision == len(turns)
    state, audit = _mirrors(session.directory)
    assert state["revision"] == session.revision and state["turns"] == len(turns)
    assert state["state"] == session.state
    assert [line["turn"] for line in audit] == list(range(len(turns)))
    assert session.mirrors_current()


def test_create_commit_reopen(tmp_path: Path) -> None:
    directory = tmp_path / "s"
    session = Session.create(directory, book_ref="doors@v1", model="nearest", initial_observation="A room.",
                             task="open the door", initial_state={"world": {"door": "closed"}})
    assert session.revision == 0 and len(session) == 0 and session.state == {"world": {"door": "closed"}}
    first = session.commit(_record("open door", {"world": {"door": "open"}},
                                   [MemoryItem(kind="fact", key="door", value="open")]), expected_revision=0)
    assert first.index == 0 and first.revision == 1
    session.commit(_record("look"), expected_revision=1)  # no state: the state stays as it was
    session.close()

    again = Session.open(directory)
    _assert_consistent(again)
    assert len(again) == 2 and again.state == {"world": {"door": "open"}}
    assert again.state_at(0) == {"world": {"door": "closed"}}
    assert [t.prediction.observation for t in again.turns()] == ["after open door", "after look"]
    assert again.memory() == [MemoryItem(kind="fact", key="door", value="open", turn=0)]
    assert again.meta["book_ref"] == "doors@v1" and again.meta["task"] == "open the door"
    prefix = again.prefix()
    assert prefix.initial_observation.text == "A room." and [t.action.raw for t in prefix.turns] == ["open door", "look"]
    _, audit = _mirrors(directory)
    assert audit[0]["action"] == "open door" and audit[0]["audit"]["route"] == "test"


def test_create_and_open_errors(tmp_path: Path) -> None:
    with pytest.raises(SessionNotFoundError, match="no session"):
        Session.open(tmp_path / "missing")
    Session.create(tmp_path / "s").close()
    with pytest.raises(SessionExistsError, match="already exists"):
        Session.create(tmp_path / "s")
    (tmp_path / "empty").mkdir()
    Session.create(tmp_path / "empty").close()  # an empty folder is fine
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "session.sqlite").write_text("not a database")
    with pytest.raises(SessionError, match="not a session database"):
        Session.open(tmp_path / "junk")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging folders left behind


def test_stale_revision_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    Session.create(tmp_path / "s").close()
    a, b = Session.open(tmp_path / "s"), Session.open(tmp_path / "s")
    seen = b.revision
    a.commit(_record("go north"), expected_revision=a.revision)
    with pytest.raises(StaleSessionError, match="expected revision 0, but it is at 1") as caught:
        b.commit(_record("go south"), expected_revision=seen)
    assert (caught.value.expected, caught.value.actual) == (0, 1)
    assert [t.action.raw for t in b.turns()] == ["go north"]
    _assert_consistent(b)
    b.commit(_record("go south"), expected_revision=b.revision)  # after reloading the revision it goes through
    assert len(a) == 2


def test_a_failing_commit_leaves_the_session_untouched(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "s")
    session.commit(_record("look", {"n": 1}), expected_revision=0)
    bad = _record("take lamp", memory=[MemoryItem(kind="fact", key="lamp", value={1, 2})])  # a set is not JSON
    with pytest.raises(SessionError, match="memory fact:lamp is not JSON"):
        session.commit(bad, expected_revision=1)
    assert len(session) == 1 and session.revision == 1 and session.memory() == []
    _assert_consistent(session)


def test_mirrors_are_rewritten_on_open(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "s")
    for n in range(3):
        session.commit(_record(f"step {n}", {"n": n}), expected_revision=n)
    session.close()
    (tmp_path / "s" / STATE_FILE).unlink()
    (tmp_path / "s" / AUDIT_FILE).write_text('{"turn": 0}\n')
    again = Session.open(tmp_path / "s")
    _assert_consistent(again)
    assert again.state == {"n": 2}


def test_fork_and_compare(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "main", initial_observation="start", initial_state={"n": 0})
    for n, text in enumerate(["go north", "take key", "go south"]):
        session.commit(_record(text, {"n": n + 1, "where": text},
                               [MemoryItem(kind="step", key=text, value=n)]), expected_revision=n)
    fork = session.fork(1, tmp_path / "fork")
    assert len(fork) == 1 and fork.revision == 1 and fork.state == {"n": 1, "where": "go north"}
    assert fork.meta["parent"] == str((tmp_path / "main").resolve()) and fork.meta["forked_at"] == 1
    assert [m.key for m in fork.memory()] == ["go north"]
    _assert_consistent(fork)
    fork.commit(_record("take lamp", {"n": 2, "where": "take lamp"}), expected_revision=1)
    assert len(session) == 3  # the original is untouched
    rows = session.compare(fork)
    assert [row["turn"] for row in rows] == [0, 1, 2]
    assert rows[0]["same_action"] and rows[0]["same_observation"] and rows[0]["state_diff"] == []
    assert rows[1]["action_a"] == "take key" and rows[1]["action_b"] == "take lamp" and not rows[1]["same_action"]
    assert rows[1]["state_diff"] == ["where"]
    assert rows[2]["action_b"] is None and rows[2]["observation_a"] == "after go south"
    assert session.fork(0, tmp_path / "empty-fork").state == {"n": 0}
    with pytest.raises(SessionError, match="cannot fork"):
        session.fork(4, tmp_path / "too-far")
    with pytest.raises(SessionExistsError):
        session.fork(1, tmp_path / "fork")


def test_a_fork_without_a_target_goes_to_the_first_free_sibling(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "main", initial_state={"n": 0})
    for n in range(2):
        session.commit(_record(f"step {n}", {"n": n + 1}), expected_revision=n)
    assert fork_directory(session.directory, 1) == tmp_path / "main-fork1"
    first = session.fork(1)
    second = session.fork(1)
    assert first.directory == tmp_path / "main-fork1" and second.directory == tmp_path / "main-fork1-2"
    assert len(second) == 1 and second.meta["forked_at"] == 1
    assert session.fork(2).directory == tmp_path / "main-fork2"
    assert fork_directory(tmp_path / "main", 1) == tmp_path / "main-fork1-3"
    with pytest.raises(SessionError, match="session name .a b."):
        session.fork(1, tmp_path / "a b")  # a target is named by the one name rule


def test_session_names_are_checked_and_made() -> None:
    assert session_name("  kitchen-1 ") == "kitchen-1"
    for bad in ("", "..", "a/b", "-x", None):
        with pytest.raises(SessionError, match="session name"):
            session_name(bad)
    assert new_session_name("book", time.mktime((2026, 1, 2, 3, 4, 5, 0, 0, -1))) == "book-20260102T030405"
    assert session_name(new_session_name("alfworld")).startswith("alfworld-")


def test_state_differences() -> None:
    assert state_differences({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3, "d": 4}}) == ["a.c", "a.d"]
    assert state_differences({}, {}) == []


def test_play_attach_resume_with_a_world_model(tmp_path: Path, alfworld) -> None:
    episode = alfworld[0]
    model = NearestEvidence(book_from(alfworld[1:], "alfworld"))
    session = Session.create(tmp_path / "s", book_ref="alfworld@v1", model=model.name,
                             initial_observation=episode.initial_observation.text, task=episode.task)
    session.attach(model)
    for turn in episode.turns[:2]:
        stored = session.play(model, turn.action)
        assert stored.prediction.audit.route == "fallback:nearest_evidence"
    assert [item.observation for item in model.history] == [t.prediction.observation for t in session.turns()]
    session.close()

    resumed, again = NearestEvidence(book_from(alfworld[1:], "alfworld")), Session.open(tmp_path / "s")
    again.attach(resumed)
    assert resumed.history == model.history and resumed.task == episode.task


class _Unstorable(WorldModelBase):
    """Predicts a state that is not JSON (a set): the session must refuse the commit."""

    name = "unstorable"

    def _predict(self, action: Action) -> Prediction:
        return Prediction(observation="ok", state={"seen": {1, 2}}, audit=Audit(route="test"))


def test_a_refused_commit_is_not_accepted_by_the_model(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "s", initial_observation="start")
    model = _Unstorable()
    session.attach(model)
    with pytest.raises(SessionError, match="turn 0 state is not JSON"):
        session.play(model, "look")
    assert model.history == [] and len(session) == 0 and session.revision == 0
    _assert_consistent(session)


# ------------------------------------------------------------------ killed processes


def _run_worker(target, directory: Path) -> int:
    process = multiprocessing.get_context("spawn").Process(target=target, args=(str(directory),))
    process.start()
    process.join(120)
    assert not process.is_alive(), "the worker should have died"
    return process.exitcode


def test_killed_inside_the_sqlite_transaction(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "s")
    session.commit(counter_turn(1), expected_revision=0)
    session.close()
    assert _run_worker(sim_support.commit_and_die_in_transaction, tmp_path / "s") == -signal.SIGKILL
    again = Session.open(tmp_path / "s")
    assert len(again) == 1 and again.revision == 1 and again.state["count"] == 1  # as before the commit
    assert [m.key for m in again.memory()] == ["k1"]
    _assert_consistent(again)
    again.commit(counter_turn(2), expected_revision=1)  # and it goes on
    _assert_consistent(again)


def test_killed_after_commit_while_writing_mirrors(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "s")
    session.commit(counter_turn(1), expected_revision=0)
    session.close()
    assert _run_worker(sim_support.commit_and_die_writing_mirrors, tmp_path / "s") == -signal.SIGKILL
    stale_state, _ = _mirrors(tmp_path / "s")
    assert stale_state["revision"] == 1  # the crash left the mirror behind SQLite
    again = Session.open(tmp_path / "s")
    assert len(again) == 2 and again.state["count"] == 2  # SQLite committed
    _assert_consistent(again)  # and open rewrote the mirrors


def test_killed_at_random_points_of_a_commit_loop(tmp_path: Path) -> None:
    Session.create(tmp_path / "s").close()
    context = multiprocessing.get_context("spawn")
    for round_number in range(3):
        with Session.open(tmp_path / "s") as watcher:
            target = watcher.revision + 15 + 7 * round_number
            process = context.Process(target=sim_support.commit_forever, args=(str(tmp_path / "s"),))
            process.start()
            deadline = time.monotonic() + 120  # a stuck worker fails the test instead of hanging it
            try:
                while watcher.revision < target:
                    assert process.is_alive(), f"the worker died on its own (exit {process.exitcode})"
                    assert time.monotonic() < deadline, f"the worker stalled at revision {watcher.revision}"
                    time.sleep(0.005)
            finally:
                process.kill()
                process.join(60)
        session = Session.open(tmp_path / "s")
        _assert_consistent(session)
        assert [t.state["count"] for t in session.turns()] == list(range(1, len(session) + 1))
        assert [m.value for m in session.memory()] == list(range(1, len(session) + 1))
        session.close()
