"""`worldsmith fork`: a session's first N turns in a new session, beside it by default, with --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worldsmith.cli.main import main
from worldsmith.sim import Audit, Prediction, Session
from worldsmith.sim.session import TurnRecord
from worldsmith.traces import Action


@pytest.fixture
def session(tmp_path: Path) -> Path:
    with Session.create(tmp_path / "s", initial_observation="start", initial_state={"n": 0}) as created:
        for n, text in enumerate(["go north", "take key"]):
            record = TurnRecord(action=Action(name=text.split()[0], raw=text),
                                prediction=Prediction(observation=f"after {text}", state={"n": n + 1},
                                                      audit=Audit(route="test")))
            created.commit(record, expected_revision=n)
    return tmp_path / "s"


def test_fork_beside_and_to_a_folder(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fork", "--session", str(session), "--at", "1", "--json"]) == 0
    forked = json.loads(capsys.readouterr().out)
    assert forked == {"session": str(session.with_name("s-fork1")), "parent": str(session), "forked_at": 1,
                      "turns": 1, "revision": 1}
    target = session.with_name("chosen")
    assert main(["fork", "--session", str(session), "--at", "2", "--to", str(target)]) == 0
    assert capsys.readouterr().out.strip() == f"forked {session} at turn 2 into {target}"
    with Session.open(target) as copy:
        assert len(copy) == 2 and copy.state == {"n": 2}


def test_fork_errors_are_one_line(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fork", "--session", str(session), "--at", "3", "--json"]) == 1
    assert "cannot fork" in json.loads(capsys.readouterr().out)["error"]
    assert main(["fork", "--session", str(session.with_name("missing")), "--at", "0"]) == 1
    assert "no session in" in capsys.readouterr().err
