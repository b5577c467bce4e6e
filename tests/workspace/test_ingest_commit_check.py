"""At commit an ingest checks the parts committed since it started: duplicates dropped, taken ids renamed."""

from __future__ import annotations

from pathlib import Path

import orjson

from worldsmith.traces.model import Action, ContextEvent, Episode, Observation, Turn
from worldsmith.workspace import IngestProgress, Workspace


def _episode(episode_id: str, text: str) -> Episode:
    turn = Turn(index=0, action=Action(name="look"), observation=Observation(text=text))
    return Episode(id=episode_id, env_id="room", task=f"task of {episode_id}", turns=[turn])


def _write(path: Path, episodes: list[Episode]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(e.model_dump(mode="json")) + b"\n" for e in episodes))
    return path


def test_parts_committed_during_an_ingest_are_checked_at_its_commit(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "ws")
    workspace.ingest([_write(tmp_path / "old.jsonl", [_episode(f"old-{n}", "old") for n in range(4)])], "d")
    mine = [_episode(f"b-{n}", f"room {n}") for n in range(10)]
    # Committed by another ingest while mine runs: five of mine verbatim, five other episodes under my ids.
    theirs = mine[:5] + [_episode(f"b-{n}", f"another room {n}") for n in range(5, 10)]
    other_file = _write(tmp_path / "theirs.jsonl", theirs)
    interleaved: list[int] = []

    def commit_theirs_before_mine(progress: IngestProgress) -> None:
        if progress.files_done == progress.files_total and not interleaved:
            interleaved.append(Workspace(tmp_path / "ws").ingest([other_file], "d").episodes)

    report = workspace.ingest([_write(tmp_path / "mine.jsonl", mine)], "d", progress=commit_theirs_before_mine)
    assert interleaved == [10] and report.committed
    assert report.files[0].duplicates == 5 and report.files[0].renamed == 5 and report.files[0].episodes == 5
    dataset = workspace.dataset("d")
    ids = dataset.episode_ids()
    assert len(ids) == 4 + 10 + 5 == dataset.stats()["episodes"]
    assert {f"b-{n}~" for n in range(5, 10)} == {i[: i.index("~") + 1] for i in ids if "~" in i}
    renamed = next(i for i in ids if i.startswith("b-7~"))
    assert dataset.episode(renamed).turns[0].observation.text == "room 7"
    assert dataset.episode("b-7").turns[0].observation.text == "another room 7"


def test_a_dialogue_committed_meanwhile_is_no_longer_counted_as_mine(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "ws")
    talk = Episode(id="talk", env_id="room", final_context=[ContextEvent(role="user", content="anyone there?")])
    mine = [talk, _episode("b-0", "room 0")]
    other_file = _write(tmp_path / "theirs.jsonl", [talk])
    interleaved: list[int] = []

    def commit_theirs_before_mine(progress: IngestProgress) -> None:
        if progress.files_done == progress.files_total and not interleaved:
            interleaved.append(Workspace(tmp_path / "ws").ingest([other_file], "d").dialogue_only)

    report = workspace.ingest([_write(tmp_path / "mine.jsonl", mine)], "d", progress=commit_theirs_before_mine)
    assert interleaved == [1] and report.committed
    assert report.files[0].duplicates == 1 and report.files[0].episodes == 1 and report.dialogue_only == 0
    assert workspace.dataset("d").stats()["dialogue_only"] == 1
