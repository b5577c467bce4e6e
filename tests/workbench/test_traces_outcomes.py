"""Logs that record no outcome: the dataset says so ('—', "no outcome recorded") instead of "Successes 0"."""

from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest
from workbench_support import TRACES_PAGE

from helpers import TOOLSHOP_CONVERSATIONS
from worldsmith.cli.main import main
from worldsmith.workspace import Workspace


def _without_outcomes(folder: Path, keep: int = 0) -> Path:
    """The toolshop transcripts, all but the first `keep` stripped of their reward and success."""
    rows = [json.loads(line) for line in TOOLSHOP_CONVERSATIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows[keep:]:
        row.pop("reward", None)
        row.pop("success", None)
    path = folder / "quiet.openai.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_log_without_outcomes_shows_no_successes_figure(empty_root: Path, tmp_path: Path, capsys) -> None:
    workspace = Workspace(empty_root)
    workspace.ingest([_without_outcomes(tmp_path)], "quiet")
    stats = workspace.dataset("quiet").stats()
    assert stats["successes"] == 0 and stats["with_outcome"] == 0
    at = AppTest.from_file(str(TRACES_PAGE), default_timeout=60)
    at.query_params["dataset"] = "quiet"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    successes = next(m for m in at.metric if m.label == "Successes")
    assert successes.value == "—"

    assert main(["datasets", "--workspace", str(empty_root)]) == 0
    assert "no outcome recorded" in capsys.readouterr().out


def test_a_log_where_some_record_an_outcome_counts_of_those(empty_root: Path, tmp_path: Path) -> None:
    from workbench.traces.datasets import successes_text

    workspace = Workspace(empty_root)
    workspace.ingest([_without_outcomes(tmp_path, keep=3)], "some")
    stats = workspace.dataset("some").stats()
    assert stats["with_outcome"] == 3
    assert successes_text(stats) == f"{stats['successes']:,} of 3 recorded"
    assert successes_text({**stats, "with_outcome": stats["episodes"]}) == f"{stats['successes']:,}"
