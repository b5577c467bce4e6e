"""Failure tags: a label and a note per evaluated turn, kept in the workspace; `eval tag` / `eval tags`."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from worldsmith.cli.main import main
from worldsmith.util.errors import BadInputError
from worldsmith.workspace import FailureKey, FailureTags


def test_tags_are_kept_replaced_filtered_and_removed(tmp_path: Path) -> None:
    tags = FailureTags(tmp_path)
    assert tags.list() == [] and not tags.path.exists()  # reading creates nothing
    first = FailureKey("r1", "ep-1", 3, "harness")
    tags.set(first, tag="wrong amount", note="ignores the coupon")
    tags.set(FailureKey("r1", "ep-2", 0, "harness"), tag="made up id")
    tags.set(FailureKey("r2", "ep-1", 3, "harness"), tag="wrong amount")
    again = FailureTags(tmp_path)  # another reader (a CLI, the workbench) sees them
    assert [(t.run, t.episode_id, t.turn, t.tag) for t in again.list(run="r1")] == [
        ("r1", "ep-1", 3, "wrong amount"), ("r1", "ep-2", 0, "made up id")]
    assert [t.run for t in again.list(tag="wrong amount")] == ["r1", "r2"]
    assert again.labels() == {"wrong amount": 2, "made up id": 1}
    replaced = again.set(first, tag="stale record", note="")
    assert replaced.key == first
    assert [(t.tag, t.note) for t in again.list(run="r1", tag="stale record")] == [("stale record", "")]
    assert again.remove(first) and not again.remove(first)
    assert len(again.list()) == 2


@pytest.mark.parametrize("tag", ["", "   ", "two\nlines", "x" * 65])
def test_a_bad_label_is_refused(tmp_path: Path, tag: str) -> None:
    with pytest.raises(BadInputError, match="tag"):
        FailureTags(tmp_path).set(FailureKey("r", "e", 0), tag=tag)


def test_a_key_without_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="run"):
        FailureTags(tmp_path).set(FailureKey("", "e", 0), tag="x")


def test_tag_cli_sets_lists_exports_and_removes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(tmp_path)
    assert main(["eval", "tag", "r1", "ep-1", "3", "--method", "harness", "--tag", "wrong amount", "--note",
                 "ignores the coupon", "--workspace", root, "--json"]) == 0
    saved = orjson.loads(capsys.readouterr().out)
    assert (saved["run"], saved["episode_id"], saved["turn"], saved["method"], saved["tag"]) == (
        "r1", "ep-1", 3, "harness", "wrong amount")
    assert main(["eval", "tag", "r1", "ep-2", "0", "--tag", "made up id", "--workspace", root]) == 0
    capsys.readouterr()
    assert main(["eval", "tags", "--tag", "wrong amount", "--workspace", root, "--json"]) == 0
    listed = orjson.loads(capsys.readouterr().out)["tags"]
    assert [(t["episode_id"], t["note"]) for t in listed] == [("ep-1", "ignores the coupon")]
    out = tmp_path / "tags.jsonl"
    assert main(["eval", "tags", "--run", "r1", "--export", str(out), "--workspace", root]) == 0
    assert [orjson.loads(line)["tag"] for line in out.read_text().splitlines()] == ["wrong amount", "made up id"]
    capsys.readouterr()
    assert main(["eval", "tag", "r1", "ep-1", "3", "--method", "harness", "--remove", "--workspace", root]) == 0
    assert main(["eval", "tags", "--workspace", root]) == 0
    assert "made up id" in capsys.readouterr().out
    assert main(["eval", "tag", "r1", "ep-1", "3", "--workspace", root]) != 0
    assert "--tag" in capsys.readouterr().err
