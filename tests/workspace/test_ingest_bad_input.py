"""Bad input never crashes an ingest, is reported with file/line/pointer/reason, and is quarantined."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from helpers import airline_conversation, tool_call, write_jsonl
from worldsmith import Workspace


def _conversation(i: int) -> dict:
    return {"id": f"c{i}", "messages": [
        {"role": "user", "content": f"request {i}"},
        {"role": "assistant", "tool_calls": [tool_call(f"k{i}", "lookup", {"i": i})]},
        {"role": "tool", "tool_call_id": f"k{i}", "content": f"result {i}"},
    ]}


def _quarantine(report) -> list[dict]:
    return [orjson.loads(line) for line in Path(report.quarantine_path).read_bytes().splitlines()]


def test_truncated_jsonl_line_is_rejected_and_the_rest_imported(workspace: Workspace, tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    good = [orjson.dumps(_conversation(i)).decode() for i in range(3)]
    path.write_text(good[0] + "\n" + good[1][: len(good[1]) // 2] + "\n" + good[2])  # no final newline either
    report = workspace.ingest([path], "d")
    assert (report.episodes, report.rejected, report.committed) == (2, 1, True)
    (reject,) = report.rejects
    assert reject["line"] == 2 and reject["source"] == str(path) and "truncated JSON" in reject["reason"]
    (quarantined,) = _quarantine(report)
    assert quarantined["raw"] == good[1][: len(good[1]) // 2]


def test_truncated_json_array_keeps_the_complete_elements(workspace: Workspace, tmp_path: Path) -> None:
    path = tmp_path / "airline.json"
    text = orjson.dumps([airline_conversation(i, 1.0) for i in range(3)], option=orjson.OPT_INDENT_2).decode()
    cut = text[: int(len(text) * 0.8)]
    path.write_text(cut)
    report = workspace.ingest([path], "d")
    assert report.episodes == 2 and report.rejected == 1
    reject = report.rejects[0]
    assert reject["pointer"] == "/2" and "truncated JSON" in reject["reason"] and reject["line"] > 1
    assert cut.endswith(_quarantine(report)[0]["raw"])


def test_wrong_types_name_the_field(workspace: Workspace, tmp_path: Path) -> None:
    bad = airline_conversation(1, 1.0)
    bad["traj"][4]["tool_calls"][0]["function"]["name"] = 42
    path = write_jsonl(tmp_path / "types.jsonl", [{"messages": "not a list"}, bad, 17])
    report = workspace.ingest([path], "d")
    reasons = [(r["line"], r["pointer"], r["reason"]) for r in report.rejects]
    assert reasons[0][0] == 1 and "not a conversation" in reasons[0][2]
    assert reasons[1][:2] == (2, "/traj/4/tool_calls/0") and "function name" in reasons[1][2]
    assert reasons[3][0] == 3 and "not a conversation" in reasons[3][2]


def test_orphans_under_strict_import_nothing(workspace: Workspace, tmp_path: Path) -> None:
    record = _conversation(1)
    record["messages"].append({"role": "tool", "tool_call_id": "nope", "content": "orphan"})
    record["messages"].append({"role": "assistant", "tool_calls": [tool_call("dangling", "x", {})]})
    path = write_jsonl(tmp_path / "orphans.jsonl", [record, _conversation(2)])
    strict = workspace.ingest([path], "d", strict=True)
    assert strict.rejected == 2 and not strict.committed
    assert workspace.list_datasets() == []
    lenient = workspace.ingest([path], "d")
    assert lenient.committed and lenient.episodes == 2 and lenient.rejected == 2
    assert {r["pointer"] for r in lenient.rejects} == {"/messages/3", "/messages/4/tool_calls/0"}


@pytest.mark.parametrize(
    ("content", "reason"),
    [(b"", "empty file"), (b"   \n\n", "empty file"), (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file"),
     (b"\xff\xfe\xfa garbage \xc3\x28", "binary file"), (b"just some prose\nwith no structure\n", "could not detect")],
)
def test_unreadable_files_are_reported_and_others_still_imported(
    workspace: Workspace, tmp_path: Path, content: bytes, reason: str
) -> None:
    bad = tmp_path / "bad.dat"
    bad.write_bytes(content)
    good = write_jsonl(tmp_path / "good.jsonl", [_conversation(1)])
    report = workspace.ingest([bad, good], "d")
    assert report.files[0].error and reason in report.files[0].error
    assert report.files[1].episodes == 1 and report.committed
    assert report.rejects[0]["source"] == str(bad)


def test_a_single_50_mb_line(workspace: Workspace, tmp_path: Path) -> None:
    huge = _conversation(1)
    huge["messages"][2]["content"] = "x" * (50 * 1024 * 1024)
    garbage = b'{"id": "g", "messages": [' + b"[" * (50 * 1024 * 1024)
    path = tmp_path / "huge.jsonl"
    path.write_bytes(orjson.dumps(huge) + b"\n" + garbage + b"\n" + orjson.dumps(_conversation(2)) + b"\n")
    report = workspace.ingest([path], "d")
    assert report.episodes == 2 and report.rejected == 1 and report.rejects[0]["line"] == 2
    turn = workspace.dataset("d").turn("c1#0")
    assert len(turn.observation.text) == 50 * 1024 * 1024


def test_duplicates_are_skipped_and_counted_across_files_and_ingests(workspace: Workspace, tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", [_conversation(1), _conversation(2)])
    renamed = _conversation(1)
    renamed["id"] = "another-id-same-content"
    b = write_jsonl(tmp_path / "b.jsonl", [renamed, _conversation(3)])
    first = workspace.ingest([a, b], "d")
    assert (first.episodes, first.duplicates) == (3, 1)
    again = workspace.ingest([a], "d")
    assert (again.episodes, again.duplicates, again.committed) == (0, 2, False)
    assert workspace.dataset("d").stats()["episodes"] == 3


def test_same_id_different_content_gets_a_suffix(workspace: Workspace, tmp_path: Path) -> None:
    one = write_jsonl(tmp_path / "one.jsonl", [_conversation(1)])
    other = _conversation(2)
    other["id"] = "c1"
    two = write_jsonl(tmp_path / "two.jsonl", [other])
    workspace.ingest([one], "d")
    report = workspace.ingest([two], "d")
    assert report.files[0].renamed == 1
    ids = set(workspace.dataset("d").list_episodes()["episode_id"])
    assert "c1" in ids and any(i.startswith("c1~") for i in ids)
    renamed = next(i for i in ids if i.startswith("c1~"))
    assert workspace.dataset("d").episode(renamed).turns[0].id == f"{renamed}#0"


def test_a_crash_mid_ingest_leaves_the_dataset_as_it_was(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace.ingest([write_jsonl(tmp_path / "a.jsonl", [_conversation(1)])], "d")
    before = workspace.dataset("d").manifest

    from worldsmith.workspace import storage

    def boom(self, rows, digest):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(storage.PartWriter, "add_rows", boom)
    with pytest.raises(RuntimeError):
        workspace.ingest([write_jsonl(tmp_path / "b.jsonl", [_conversation(2)])], "d")
    monkeypatch.undo()
    dataset = workspace.dataset("d")
    assert dataset.manifest == before and dataset.stats()["episodes"] == 1
    assert not any((workspace.root / ".staging").iterdir())
    assert sorted(p.name for p in (dataset.path / "parts").iterdir()) == sorted(
        Path(part[key]).name for part in before["parts"] for key in ("episodes", "turns"))


def test_forced_format_reports_records_it_cannot_read(workspace: Workspace, ledger_file: Path) -> None:
    report = workspace.ingest([ledger_file], "d", format="openai")
    assert report.episodes == 0 and report.rejected >= 1 and not report.committed


def test_bad_dataset_name_is_a_usage_error(workspace: Workspace, ledger_file: Path) -> None:
    with pytest.raises(ValueError, match="dataset name .*use 1-120 letters"):
        workspace.ingest([ledger_file], "../escape")


def test_folders_skip_documentation_and_code_but_named_files_are_read(workspace: Workspace, tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    (folder / "nested").mkdir(parents=True)
    write_jsonl(folder / "nested" / "a.jsonl", [_conversation(1)])
    (folder / "README.md").write_text("# runs\n")
    (folder / "make_runs.py").write_text("print('hi')\n")
    (folder / ".hidden.jsonl").write_text("junk\n")
    report = workspace.ingest([folder], "d")
    assert [Path(f.path).name for f in report.files] == ["a.jsonl"] and report.rejected == 0
    explicit = workspace.ingest([folder / "README.md"], "d")
    assert explicit.rejected == 1 and "could not detect" in explicit.files[0].error


def test_deeply_nested_json_document_is_rejected_not_fatal(workspace: Workspace, tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" + "[" * 200_000 + "]" * 200_000 + "]\n")
    good = write_jsonl(tmp_path / "good.jsonl", [_conversation(1)])
    report = workspace.ingest([deep, good], "d", format="openai")
    assert report.files[0].rejected >= 1 and report.files[1].episodes == 1 and report.committed


def test_one_bad_byte_early_in_a_file_rejects_its_line_only(workspace: Workspace, tmp_path: Path) -> None:
    lines = [orjson.dumps(_conversation(n)) for n in range(1, 4)]
    lines[1] = lines[1].replace(b'"c2"', b'"c2\xff"')  # one invalid UTF-8 byte in the second record, byte ~400
    path = tmp_path / "mostly_fine.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    report = workspace.ingest([path], "d")
    assert report.files[0].error is None and report.committed
    assert report.episodes == 2 and report.rejected == 1
    assert report.rejects[0]["line"] == 2 and "UTF-8" in report.rejects[0]["reason"]
    assert Path(report.quarantine_path).read_text().count("\n") == 1


def test_a_role_prefixed_trace_rejects_only_the_line_that_is_no_utf8(workspace: Workspace, tmp_path: Path) -> None:
    path = tmp_path / "trace.txt"
    path.write_bytes(b"Action: look\nObservation: a room\nAction: take \xff key\nObservation: taken\n"
                     b"Action: go north\nObservation: a hall\n")
    report = workspace.ingest([path], "d", format="role_prefixed")
    assert report.rejects[0]["line"] == 3 and "not UTF-8 text" in report.rejects[0]["reason"]
    [episode_id] = workspace.dataset("d").episode_ids()
    episode = workspace.dataset("d").episode(episode_id)
    assert [turn.observation.text for turn in episode.turns][-1] == "a hall"  # the rest of the file was read
