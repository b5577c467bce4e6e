"""The Traces page's uploader takes Inspect AI logs (.eval, .json) and OTLP JSON spans."""

from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest
from workbench_support import TRACES_PAGE

from agent_logs import otlp_document, record_agent_spans, write_inspect_logs
from worldsmith.workspace import Workspace


def test_upload_inspect_logs_and_otel_spans(empty_root: Path, tmp_path: Path) -> None:
    logs = write_inspect_logs(tmp_path / "inspect")
    spans = json.dumps(otlp_document(record_agent_spans("openinference"), hex_ids=True)).encode()
    at = AppTest.from_file(str(TRACES_PAGE), default_timeout=60).run()
    assert not at.exception
    at.file_uploader[0].set_value([
        ("run.eval", logs["eval"].read_bytes(), "application/octet-stream"),
        ("run.json", logs["json"].read_bytes(), "application/json"),
        ("phoenix export.json", spans, "application/json"),
    ])
    at.text_input(key="tr_import_dataset").input("agents")
    at.run()
    at.button(key="tr_import_button").click().run()
    assert not at.exception, [e.value for e in at.exception]
    summary = at.session_state["tr_last_report"]
    formats = {Path(f["path"]).name: f["format"] for f in summary["files"]}
    assert formats == {"run.eval": "inspect", "run.json": "inspect", "phoenix_export.json": "otel"}
    assert summary["committed"] and summary["episodes"] == 10 and summary["rejected"] == 0
    assert Workspace(empty_root).dataset("agents").stats()["episodes"] == 10
    assert any("Imported 10 episodes" in str(s.value) for s in at.success)
    # an imported span episode opens by deep link, its turns shown
    episode = AppTest.from_file(str(TRACES_PAGE), default_timeout=60)
    episode.query_params["dataset"] = "agents"
    episode.query_params["episode"] = "conv-a"
    episode.run()
    assert not episode.exception, [e.value for e in episode.exception]
    shown = "\n".join([str(m.value) for m in episode.markdown] + [str(c.value) for c in episode.code]
                      + [df.value.to_csv() for df in episode.dataframe])
    assert "total=1" in shown and "total=3" in shown
