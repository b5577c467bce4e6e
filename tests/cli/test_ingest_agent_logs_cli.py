"""`worldsmith ingest` auto-detects Inspect AI logs and OTLP spans (real subprocess, --json)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from agent_logs import otlp_document, record_agent_spans, write_inspect_logs

pytestmark = pytest.mark.slow  # runs `python -m worldsmith` in a subprocess per test


def test_ingest_detects_inspect_and_otel(tmp_path: Path) -> None:
    logs = write_inspect_logs(tmp_path / "inspect", formats=("eval",))
    spans = tmp_path / "spans.otlp.json"
    spans.write_text(json.dumps(otlp_document(record_agent_spans("genai"))))
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(tmp_path / "ws")}
    result = subprocess.run(
        [sys.executable, "-m", "worldsmith", "ingest", str(logs["eval"]), str(spans), "--dataset", "agents", "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    summary = orjson.loads(result.stdout)
    assert [f["format"] for f in summary["files"]] == ["inspect", "otel"]
    assert summary["episodes"] == 6 and summary["turns"] == 12 and summary["rejected"] == 0
