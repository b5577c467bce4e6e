"""Import caps (issue 32): a record nested too deeply costs that record, never its file, the dataset or a build;
over-long lines are streamed past; quarantine stays bounded; a failed ingest leaves no temp files."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import orjson
import pytest

from worldsmith.traces.importers.base import iter_json_records
from worldsmith.traces.limits import ImportLimits, import_limits
from worldsmith.traces.model import Action, Episode, Observation, Turn
from worldsmith.util.json_depth import json_depth, text_too_deep
from worldsmith.workspace import Workspace
from worldsmith.workspace.ingest import _sweep_stale_temps
from worldsmith.worldbook.build import build_worldbook

DEEP = "[" * 1000 + "]" * 1000


def native(episode_id: str, arguments: str = "{}", metadata: str = "{}") -> str:
    return (
        f'{{"id": "{episode_id}", "metadata": {metadata}, "turns": [{{"index": 0, "action": {{"name": "look", '
        f'"arguments": {arguments}}}, "observation": {{"text": "a room"}}}}]}}'
    )


def chat(arguments: str, result: str = "ok") -> str:
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": arguments}}
    return json.dumps(
        {
            "messages": [
                {"role": "user", "content": "find it"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": result},
            ]
        }
    )


def test_depth_is_measured_without_recursion_and_stops_past_the_limit() -> None:
    assert json_depth(1) == 0 and json_depth({}) == 1 and json_depth({"a": [[1]]}) == 3
    assert json_depth(orjson.loads(DEEP)) == 1000
    assert json_depth(orjson.loads(DEEP), limit=10) == 11
    assert text_too_deep(DEEP, 64) and not text_too_deep("[" * 64 + "]" * 64, 64)
    assert not text_too_deep('["' + "[" * 200 + '"]', 64)  # brackets inside a string do not nest
    assert not text_too_deep("[[[ not json " + "[" * 100, 64)


def test_a_native_record_nested_1000_deep_is_rejected_alone(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    lines = [native("first"), native("deep", metadata=f'{{"x": {DEEP}}}'), native("last", arguments='{"k": 1}')]
    path.write_text("\n".join(lines) + "\n")
    report = Workspace(tmp_path / "ws").ingest([path], "d", format="native")
    assert report.committed and report.episodes == 2 and report.rejected == 1
    [reject] = report.rejects
    assert reject["line"] == 2 and "nested deeper than 64 levels" in reject["reason"]
    ids = {episode.id for episode in Workspace(tmp_path / "ws").dataset("d").iter_episodes()}
    assert ids == {"first", "last"}


def test_deep_tool_arguments_and_results_are_rejected_at_import(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    deep_args = json.dumps({"x": orjson.loads("[" * 300 + "]" * 300)})
    path.write_text("\n".join([chat('{"a": 1}'), chat(deep_args), chat('{"b": 2}', result=DEEP)]) + "\n")
    report = Workspace(tmp_path / "ws").ingest([path], "chat")
    assert report.episodes == 1 and report.rejected == 2
    reasons = sorted(reject["reason"] for reject in report.rejects)
    assert "turn 0 action_arguments is nested deeper than 64 levels" in reasons[0]
    assert "turn 0 observation is nested deeper than 64 levels" in reasons[1]
    assert [reject["line"] for reject in report.rejects] == [2, 3]


def test_the_depth_cap_is_configurable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "episodes.jsonl"
    path.write_text(native("a", arguments='{"x": [[[1]]]}') + "\n")
    monkeypatch.setenv("WORLDSMITH_IMPORT_MAX_JSON_DEPTH", "4")
    assert import_limits() == ImportLimits(max_json_depth=4)
    [record] = list(iter_json_records(path))
    assert record.error is not None and "nested deeper than 4 levels" in record.error
    monkeypatch.setenv("WORLDSMITH_IMPORT_MAX_JSON_DEPTH", "-1")
    with pytest.raises(ValueError, match="WORLDSMITH_IMPORT_MAX_JSON_DEPTH='-1': expected a positive integer"):
        import_limits()


def test_a_json_array_element_too_deep_to_decode_is_skipped_and_the_rest_kept(tmp_path: Path) -> None:
    path = tmp_path / "records.json"
    path.write_text('[{"a": 1},\n' + "[" * 5000 + '"]["' + "]" * 5000 + ',\n{"s": "x\\"[["}, {"b": 2}]')
    records = list(iter_json_records(path))
    assert [record.value for record in records] == [{"a": 1}, None, {"s": 'x"[['}, {"b": 2}]
    assert records[1].error == "nested too deeply to read" and records[1].pointer == "/1"


def test_an_over_long_line_is_streamed_past_and_rejected_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLDSMITH_IMPORT_MAX_RECORD_BYTES", "4096")
    path = tmp_path / "episodes.jsonl"
    long = native("long", metadata=json.dumps({"pad": "x" * 100_000}))
    path.write_text("\n".join([native("a"), long, native("b", arguments='{"k": 2}')]) + "\n")
    report = Workspace(tmp_path / "ws").ingest([path], "d", format="native")
    assert report.episodes == 2 and report.rejected == 1
    assert report.rejects[0]["line"] == 2
    assert f"record of {len(long) + 1} bytes is over the 4096-byte limit" in report.rejects[0]["reason"]


def test_quarantine_keeps_a_bounded_head_of_a_huge_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLDSMITH_IMPORT_MAX_QUARANTINE_RAW", "1000")
    path = tmp_path / "episodes.jsonl"
    bad = '{"id": "x", "turns": "' + "y" * 50_000 + '"}'
    path.write_text(native("a") + "\n" + bad + "\n")
    report = Workspace(tmp_path / "ws").ingest([path], "d", format="native")
    [entry] = [orjson.loads(line) for line in Path(report.quarantine_path).read_bytes().splitlines()]
    assert entry["raw"] == bad[:1000] and entry["raw_truncated_from"] == len(bad) and entry["line"] == 2


def test_a_failed_ingest_leaves_no_staging_or_temp_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "episodes.jsonl"
    path.write_text(native("a") + "\n{broken\n")
    workspace = Workspace(tmp_path / "ws")

    def fail(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("worldsmith.workspace.ingest._commit", fail)
    with pytest.raises(OSError, match="disk full"):
        workspace.ingest([path], "d", format="native")
    leftovers = [p for p in (tmp_path / "ws").rglob("*") if p.name.endswith(".tmp") or ".staging-" in p.name]
    assert leftovers == []
    assert len(list((tmp_path / "ws" / "reports").glob("*.quarantine.jsonl"))) == 1  # the reject is kept


def test_a_killed_ingests_quarantine_temp_is_swept(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    dead = reports / ".x.quarantine.jsonl.999999999.tmp"  # no such pid
    live = reports / f".y.quarantine.jsonl.{os.getpid()}.tmp"
    for temp in (dead, live):
        temp.write_text("{}")
    assert _sweep_stale_temps(reports) == []  # too fresh to judge: a pid may be reused
    assert _sweep_stale_temps(reports, now=time.time() + 120) == [dead]
    assert live.exists() and not dead.exists()


def test_build_leaves_out_a_deep_episode_instead_of_failing() -> None:
    def episode(name: str, arguments: object) -> Episode:
        turn = Turn(index=0, action=Action(name="look", arguments=arguments), observation=Observation(text="a room"))
        return Episode(id=name, env_id="room", turns=[turn])

    episodes = [episode(f"e{i}", {"k": i % 2}) for i in range(6)]
    result = build_worldbook([*episodes, episode("deep", {"d": orjson.loads("[" * 900 + "]" * 900)})], name="room")
    assert result.excluded == {"dialogue_only": 0, "too_deep": 1}
    assert {e.id for e in result.artifacts["episodes"]} == {f"e{i}" for i in range(6)}


def test_a_json_array_element_over_the_record_cap_stops_the_file_keeping_what_came_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORLDSMITH_IMPORT_MAX_RECORD_BYTES", "3000000")
    path = tmp_path / "records.json"
    path.write_text('[{"a": 1}, {"pad": "' + "x" * 5_000_000 + '"}, {"b": 2}]')
    first, second = list(iter_json_records(path))
    assert first.value == {"a": 1} and second.pointer == "/1"
    assert second.error is not None and "over the 3000000-character limit" in second.error


def test_the_member_count_is_read_from_the_end_record_before_the_directory(tmp_path: Path) -> None:
    from worldsmith.traces.importers.inspect_log import declared_member_count
    from zip_bombs import write_zip

    few = write_zip(tmp_path / "few.zip", [("a", b"x"), ("b", b"")])
    many = write_zip(tmp_path / "many.zip", [(f"m/{i}", b"") for i in range(70_000)])  # past 65,535: zip64
    assert declared_member_count(few) == 2 and declared_member_count(many) == 70_000
    not_zip = tmp_path / "plain.txt"
    not_zip.write_text("no end record here")
    assert declared_member_count(not_zip) is None
