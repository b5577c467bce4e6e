"""The `worldsmith` command, run as a real subprocess: JSON output and exit codes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from helpers import airline_conversation, tool_call, write_json, write_jsonl

pytestmark = pytest.mark.slow  # runs `python -m worldsmith` in a subprocess per test


def run(*args: str, workspace: Path, check_code: int | None = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(workspace)}
    result = subprocess.run([sys.executable, "-m", "worldsmith", *args], capture_output=True, text=True, env=env,
                            timeout=120)
    if check_code is not None:
        assert result.returncode == check_code, result.stderr + result.stdout
    return result


@pytest.fixture
def airline_file(tmp_path: Path) -> Path:
    return write_json(tmp_path / "gpt-4o-airline.json", [airline_conversation(i, float(i % 2)) for i in range(4)])


def test_ingest_json_summary(tmp_path: Path, airline_file: Path, ledger_file: Path) -> None:
    ws = tmp_path / "ws"
    out = orjson.loads(run("ingest", str(airline_file), str(ledger_file), "--dataset", "mix", "--json", workspace=ws).stdout)
    assert out["dataset"] == "mix" and out["episodes"] == 5 and out["turns"] == 14
    assert out["rejected"] == 0 and out["duplicates"] == 0
    assert [f["format"] for f in out["files"]] == ["openai", "role_prefixed"]
    assert Path(out["report"]).exists() and out["quarantine"] is None
    again = orjson.loads(run("ingest", str(airline_file), "--dataset", "mix", "--json", workspace=ws).stdout)
    assert again["duplicates"] == 4 and again["episodes"] == 0


def test_strict_rejects_exit_1_and_usage_errors_exit_2(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    broken = write_jsonl(tmp_path / "b.jsonl", [
        {"messages": [{"role": "assistant", "tool_calls": [tool_call("a", "f", {})]}]},
        {"messages": [{"role": "assistant", "tool_calls": [tool_call("a", "f", {})]},
                      {"role": "tool", "tool_call_id": "a", "content": "ok"}]},
    ])
    strict = run("ingest", str(broken), "--dataset", "d", "--strict", "--json", workspace=ws, check_code=1)
    summary = orjson.loads(strict.stdout)
    assert summary["rejected"] == 2 and summary["committed"] is False  # the call, then its episode left empty
    assert summary["rejects"][0]["pointer"] == "/messages/0/tool_calls/0" and summary["rejects"][0]["line"] == 1
    assert summary["rejects"][1]["line"] == 1 and summary["rejects"][1]["reason"].startswith(
        "nothing left to import: 1 tool call or result was rejected")
    quarantined = orjson.loads(Path(summary["quarantine"]).read_text().splitlines()[0])
    assert quarantined["raw"] and quarantined["reason"].startswith("tool call 'f' has no result")
    lenient = run("ingest", str(broken), "--dataset", "d", workspace=ws)
    assert "2 rejected" in lenient.stdout and "committed" in lenient.stdout
    assert run("ingest", str(broken), workspace=ws, check_code=2).returncode == 2  # --dataset missing
    assert run("ingest", str(broken), "--dataset", "d", "--format", "nope", workspace=ws, check_code=2)
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    failed = orjson.loads(run("ingest", str(empty), "--dataset", "d", "--json", workspace=ws, check_code=1).stdout)
    assert failed["files"][0]["error"] == "empty file"


def test_traces_list_show_schema_formats_datasets(tmp_path: Path, airline_file: Path) -> None:
    ws = tmp_path / "ws"
    run("ingest", str(airline_file), "--dataset", "air", workspace=ws)
    listing = orjson.loads(run("traces", "list", "--dataset", "air", "--outcome", "success", "--json", workspace=ws).stdout)
    assert listing["total"] == 2 and [e["episode_id"] for e in listing["episodes"]] == ["gpt-4o-airline-2", "gpt-4o-airline-4"]
    turn = orjson.loads(run("traces", "show", "gpt-4o-airline-2#1", "--dataset", "air", "--json", workspace=ws).stdout)
    assert turn["id"] == "gpt-4o-airline-2#1" and turn["action"]["name"] == "search_direct_flight"
    episode = orjson.loads(run("traces", "show", "gpt-4o-airline-2", "--dataset", "air", "--json", workspace=ws).stdout)
    assert len(episode["turns"]) == 3 and episode["task_id"] == "1"
    missing = run("traces", "show", "nope", "--dataset", "air", "--json", workspace=ws, check_code=1)
    assert "not in dataset" in orjson.loads(missing.stdout)["error"]
    assert "no dataset 'other'" in run("traces", "list", "--dataset", "other", workspace=ws, check_code=4).stderr
    schema = orjson.loads(run("traces", "schema", workspace=ws).stdout)
    assert schema["title"].startswith("worldsmith episode") and "turns" in schema["properties"]
    formats = orjson.loads(run("traces", "formats", "--json", workspace=ws).stdout)["formats"]
    assert {f["name"] for f in formats} == {"native", "openai", "agentworldbench", "role_prefixed", "trace2env",
                                           "inspect", "otel"}
    datasets = orjson.loads(run("datasets", "--json", workspace=ws).stdout)["datasets"]
    assert datasets[0]["name"] == "air" and datasets[0]["episodes"] == 4


def test_schema_validates_native_export(tmp_path: Path, airline_file: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    ws = tmp_path / "ws"
    run("ingest", str(airline_file), "--dataset", "air", workspace=ws)
    out = tmp_path / "air.jsonl"
    run("export", "--dataset", "air", "--format", "jsonl", "--out", str(out), workspace=ws)
    schema = orjson.loads(run("traces", "schema", workspace=ws).stdout)
    for line in out.read_text().splitlines():
        jsonschema.validate(orjson.loads(line), schema)


def test_split_and_export_roundtrip(tmp_path: Path, airline_file: Path) -> None:
    ws = tmp_path / "ws"
    run("ingest", str(airline_file), "--dataset", "air", workspace=ws)
    split = orjson.loads(run("split", "--dataset", "air", "--ratios", "train=0.5,test=0.5", "--seed", "3", "--json",
                             workspace=ws).stdout)
    assert sum(s["episodes"] for s in split["splits"].values()) == 4
    assert run("split", "--dataset", "air", "--ratios", "train=x", workspace=ws, check_code=2)
    for fmt in ("jsonl", "openai", "trace2env"):
        out = tmp_path / f"air.{fmt}.jsonl"
        exported = orjson.loads(run("export", "--dataset", "air", "--format", fmt, "--out", str(out), "--json",
                                    workspace=ws).stdout)
        assert exported["episodes"] == 4
        back = orjson.loads(run("ingest", str(out), "--dataset", f"back-{fmt}", "--json", workspace=ws).stdout)
        assert back["episodes"] == 4 and back["rejected"] == 0
