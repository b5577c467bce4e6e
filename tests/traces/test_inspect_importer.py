"""The Inspect AI importer on logs written by a real `inspect_ai` eval (scripted mock model)."""

from __future__ import annotations

import json
import shutil
import sys
import zipfile
from pathlib import Path

import orjson
import pytest

from agent_logs import ANSWER, write_inspect_logs
from worldsmith.traces import Episode, Reject, TraceFormatError, detect_format, read_traces
from worldsmith.traces.importers import InspectLogImporter
from worldsmith.workspace import Workspace


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_inspect_logs(tmp_path_factory.mktemp("inspect"))


def episodes(items: list[Episode | Reject]) -> dict[str, Episode]:
    return {item.id: item for item in items if isinstance(item, Episode)}


@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_samples_and_epochs_become_episodes_with_aligned_tool_turns(logs: dict[str, Path], fmt: str) -> None:
    path = logs[fmt]
    detection = detect_format(path)
    assert detection.importer.name == "inspect" and detection.score > 0.9
    items = list(read_traces([path]))
    assert not [item for item in items if isinstance(item, Reject)]
    found = episodes(items)
    assert sorted((e.task_id, e.metadata["epoch"]) for e in found.values()) == [
        ("add", 1), ("add", 2), ("miss", 1), ("miss", 2)]
    add = next(e for e in found.values() if e.task_id == "add" and e.metadata["epoch"] == 1)
    # the stateful tool ran for real: its results, aligned with the calls by tool-call id
    assert [(t.action.name, t.action.arguments, t.action.call_id, t.observation.text) for t in add.turns] == [
        ("counter", {"step": 1}, "call_0", "total=1"), ("counter", {"step": 2}, "call_1", "total=3")]
    assert [(c.role, c.content) for c in add.turns[0].context][:2] == [
        ("system", "You count with tools."), ("user", "Add 1 then 2")]
    assert [c.content for c in add.final_context] == [ANSWER]
    assert add.task == "Add 1 then 2" and add.env_id == "counting" and add.family == "counting-add"
    assert add.reward == 1.0 and add.success is True
    meta = add.metadata
    assert meta["model"] == "mockllm/model" and meta["task"] == "counting" and meta["target"] == "3"
    assert meta["scores"]["includes"]["value"] == "C" and meta["sample_metadata"] == {"level": "easy"}
    miss = next(e for e in found.values() if e.task_id == "miss")
    assert miss.reward == 0.0 and miss.success is False and miss.metadata["target"] == "9"
    pointer = add.turns[1].provenance.pointer
    expected = "samples/add_epoch_1.json#/messages/" if fmt == "eval" else "/samples/"
    assert pointer.startswith(expected) and pointer.endswith("/tool_calls/0")
    assert add.turns[0].provenance.source == str(path) and add.source.format == "inspect"


def test_a_broken_sample_is_quarantined_and_the_rest_imported(logs: dict[str, Path], tmp_path: Path) -> None:
    broken = tmp_path / "broken.eval"
    with zipfile.ZipFile(logs["eval"]) as source, zipfile.ZipFile(broken, "w") as target:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "samples/miss_epoch_2.json":
                data = b'{"id": "miss", "epoch": 2, "messages": "not a list"'
            target.writestr(info, data)
    report = Workspace(tmp_path / "ws").ingest([broken], "inspect")
    assert report.episodes == 3 and report.turns == 6 and report.rejected == 1 and report.committed
    assert report.files[0].format == "inspect"
    [reject] = report.rejects
    assert reject["pointer"] == "samples/miss_epoch_2.json" and "unreadable sample 'miss' epoch 2" in reject["reason"]
    quarantined = orjson.loads(Path(report.quarantine_path).read_text().splitlines()[0])
    assert quarantined["raw"] == '{"id": "miss", "epoch": 2, "messages": "not a list"'


def test_a_sample_never_run_is_left_out_quietly(logs: dict[str, Path], tmp_path: Path) -> None:
    cancelled = tmp_path / "cancelled.eval"
    with zipfile.ZipFile(logs["eval"]) as source, zipfile.ZipFile(cancelled, "w") as target:
        for info in source.infolist():
            if info.filename != "samples/add_epoch_2.json":
                target.writestr(info, source.read(info.filename))
    items = list(InspectLogImporter().read(cancelled))
    assert not [item for item in items if isinstance(item, Reject)]
    assert sorted((e.task_id, e.metadata["epoch"]) for e in episodes(items).values()) == [
        ("add", 1), ("miss", 1), ("miss", 2)]


def test_an_archive_without_a_sample_list_is_read_whole(logs: dict[str, Path], tmp_path: Path) -> None:
    old = tmp_path / "old.eval"
    with zipfile.ZipFile(logs["eval"]) as source, zipfile.ZipFile(old, "w") as target:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename in ("header.json", "_journal/start.json"):
                document = json.loads(data)
                document["eval"]["dataset"]["sample_ids"] = None
                data = json.dumps(document).encode()
            target.writestr(info, data)
    found = episodes(list(InspectLogImporter().read(old)))
    assert len(found) == 4 and all(len(e.turns) == 2 for e in found.values())
    add = next(e for e in found.values() if e.task_id == "add" and e.metadata["epoch"] == 2)
    assert add.turns[0].provenance.pointer == "samples/add_epoch_2.json#/messages/2/tool_calls/0"


def test_a_tool_call_without_result_is_rejected_and_its_context_kept(logs: dict[str, Path], tmp_path: Path) -> None:
    log = json.loads(logs["json"].read_text())
    messages = log["samples"][0]["messages"]
    first_result = next(i for i, m in enumerate(messages) if m["role"] == "tool")
    del messages[first_result]
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps(log))
    items = list(InspectLogImporter().read(cut))
    rejects = [item for item in items if isinstance(item, Reject)]
    assert [r.reason for r in rejects] == ["tool call 'counter' has no result (id 'call_0')"]
    assert rejects[0].pointer == f"/samples/0/messages/{first_result - 1}/tool_calls/0"
    first = episodes(items)[next(iter(episodes(items)))]
    assert [t.observation.text for t in first.turns] == ["total=3"]
    assert [c.content for c in first.turns[0].context][:2] == ["You count with tools.", "Add 1 then 2"]


def test_reused_call_ids_pair_with_the_earliest_open_call(logs: dict[str, Path], tmp_path: Path) -> None:
    log = json.loads(logs["json"].read_text())
    for message in log["samples"][0]["messages"]:
        for call in message.get("tool_calls") or []:
            call["id"] = "same"
        if message["role"] == "tool":
            message["tool_call_id"] = "same"
    reused = tmp_path / "reused.json"
    reused.write_text(json.dumps(log))
    items = list(InspectLogImporter().read(reused))
    assert not [item for item in items if isinstance(item, Reject)]
    first = next(item for item in items if isinstance(item, Episode))
    assert [(t.action.arguments, t.observation.text) for t in first.turns] == [
        ({"step": 1}, "total=1"), ({"step": 2}, "total=3")]


def test_a_truncated_log_is_a_file_error(logs: dict[str, Path], tmp_path: Path) -> None:
    cut = tmp_path / "cut.eval"
    cut.write_bytes(logs["eval"].read_bytes()[:200])
    assert detect_format(cut).importer.name == "inspect"  # a cut-off archive named .eval
    with pytest.raises(TraceFormatError, match="not a readable Inspect AI log"):
        list(InspectLogImporter().read(cut))
    report = Workspace(tmp_path / "ws").ingest([cut], "cut")
    assert not report.committed and "not a readable Inspect AI log" in report.files[0].error
    renamed = tmp_path / "cut.zip"
    cut.rename(renamed)
    with pytest.raises(TraceFormatError, match="binary file"):
        detect_format(renamed)  # any other cut-off zip is no trace


def test_missing_inspect_ai_gives_a_clear_error(logs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)  # import fails as if not installed
    with pytest.raises(TraceFormatError, match=r"needs the inspect_ai package: pip install 'worldsmith\[importers\]'"):
        list(InspectLogImporter().read(logs["json"]))


def test_ingest_auto_detects_both_log_formats_in_a_folder(logs: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    for path in logs.values():
        shutil.copy(path, folder / path.name)
    report = Workspace(tmp_path / "ws").ingest([folder], "evals")
    assert sorted(f.format for f in report.files) == ["inspect", "inspect"]
    assert report.episodes == 8 and report.turns == 16 and report.rejected == 0
