"""`worldsmith build` and `worldsmith book validate` on the bundled ALFWorld expert trajectories."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from worldsmith.cli.main import main
from worldsmith.sim import route_learning
from worldsmith.workspace import Workspace
from worldsmith.worldbook import WorldbookStore
from worldsmith.worldbook.book_stages import STAGES

SAMPLE = Path(__file__).resolve().parents[2] / "data_samples" / "collected" / "alfworld_expert.jsonl"


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    return orjson.loads(capsys.readouterr().out)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = Workspace(tmp_path / "ws")
    ws.ingest([SAMPLE], "alf")
    ws.split("alf", {"train": 0.75, "test": 0.25}, seed=0)
    return ws.root


def test_build_validates_on_the_held_out_split_and_saves_a_version(workspace: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, "build", "--dataset", "alf", "--split", "train", "--out", "alf", "--workspace", str(workspace))
    assert out["version"].startswith("v0001") and out["statuses"]["supported"] >= 5
    assert list(out["timings_s"]) == [*STAGES[:-1], "routes", "compile"]  # the simulator's stages, in order
    assert out["leakage"]["ok"] and out["leakage"]["families_disjoint"]
    assert out["held_out_measured"] is True and out["statuses"].get("tentative", 0) >= len(out["demoted"])
    for row in out["demoted"]:  # what `worldbook.holdout` demoted, and why
        assert row["reasons"] and row["held_out_answered"] is not None and row["families"] >= 0
    common = out["validation"]["common_actions"]
    assert set(common["actions"]) >= {"go", "take", "put"} and common["coverage"] > 0.5
    rules = run_json(capsys, "book", "rules", "alf", "--workspace", str(workspace))
    take = next(r for r in rules["rules"] if r["action"] == "take" and r["status"] == "supported")
    assert take["provenance"]["supporting"] and take["provenance"]["contradicting"] == []
    shown = run_json(capsys, "book", "show", "alf", "--workspace", str(workspace))
    assert shown["validation"]["status"] == "validated" and shown["sources"][0]["dataset"] == "alf"
    assert shown["validation"]["demoted"] == out["demoted"]  # the manifest lists the demotions too

    checked = run_json(capsys, "book", "validate", "alf", "--dataset", "alf", "--split", "test",
                       "--workspace", str(workspace))
    assert checked["leakage"]["ok"] and checked["provenance"]["checked"] > 0 and not checked["provenance"]["missing"]
    assert checked["totals"]["turns"] == out["validation"]["totals"]["turns"]
    own = run_json(capsys, "book", "validate", "alf", "--dataset", "alf", "--split", "train",
                   "--workspace", str(workspace))
    assert not own["leakage"]["ok"] and own["leakage"]["leaked_episodes"]  # its own evidence is flagged
    assert own["leakage"]["version"] == 2 and own["leakage"]["against"] == "evidence"


def test_build_with_cross_fitting_and_a_rebuild_as_a_child_version(workspace: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, "build", "--dataset", "alf", "--folds", "3", "--out", "alf", "--workspace", str(workspace))
    pooled = out["cross_fit"]["pooled"]
    assert out["cross_fit"]["folds"] == 3 and all(f["leakage_ok"] for f in out["cross_fit"]["per_fold"])
    assert pooled["totals"]["turns"] == sum(s["validation"]["turns"] for s in out["cross_fit"]["per_fold"]) > 0
    again = run_json(capsys, "build", "--dataset", "alf", "--out", "alf", "--workspace", str(workspace))
    assert again["parent"] == out["version"] and all(s["cached"] for s in again["stages"].values())


def test_build_errors_name_the_problem(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["build", "--dataset", "nope", "--out", "x", "--workspace", str(workspace)]) == 4  # not found
    assert "nope" in capsys.readouterr().err
    assert main(["build", "--dataset", "alf", "--split", "validation", "--out", "x", "--workspace",
                 str(workspace)]) == 3  # bad input
    assert "no episodes in split 'validation'" in capsys.readouterr().err


def test_build_from_a_mixed_environment_dataset_warns_in_the_report(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    ws = Workspace(tmp_path / "mixed")
    collected = SAMPLE.parent
    ws.ingest([SAMPLE, collected / "textworld.jsonl"], "mixed")
    out = run_json(capsys, "build", "--dataset", "mixed", "--out", "mixed", "--workspace", str(ws.root))
    assert len(out["warnings"]) == 1 and "mix 2 environments" in out["warnings"][0]
    assert "alfworld" in out["warnings"][0] and "textworld" in out["warnings"][0]
    chosen = run_json(capsys, "build", "--dataset", "mixed", "--env", "alfworld", "--out", "alf",
                      "--workspace", str(ws.root))
    assert chosen["warnings"] == []
    assert main(["build", "--dataset", "mixed", "--out", "mixed", "--workspace", str(ws.root)]) == 0
    assert "warning: the episodes mix 2 environments" in capsys.readouterr().out


def test_route_folds_zero_builds_without_the_route_stage(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, "build", "--dataset", "alf", "--route-folds", "0", "--out", "plain",
                   "--workspace", str(workspace))
    assert list(out["timings_s"]) == list(STAGES)
    assert WorldbookStore(workspace / "worldbooks").load("plain").routes is None


def test_workers_run_the_route_folds_in_processes_and_save_the_one_process_book(
        workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(route_learning, "MIN_POOL_TURNS", 0)  # a pool even for this small sample
    one = run_json(capsys, "build", "--dataset", "alf", "--workers", "1", "--out", "one", "--workspace", str(workspace))
    two = run_json(capsys, "build", "--dataset", "alf", "--workers", "2", "--out", "two", "--workspace", str(workspace))
    store = WorldbookStore(workspace / "worldbooks")
    serial, parallel = store.load("one"), store.load("two")
    assert serial.routes is not None and serial.routes.folds == 5
    assert parallel.model_copy(update={"name": "one"}).model_dump_json() == serial.model_dump_json()
    assert one["statuses"] == two["statuses"] and one["timings_s"].keys() == two["timings_s"].keys()
    capsys.readouterr()
    assert main(["build", "--dataset", "alf", "--workers", "0", "--out", "x", "--workspace", str(workspace)]) == 3
    assert "--workers must be at least 1" in capsys.readouterr().err


def test_route_turns_measures_the_route_table_on_a_sample(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, "build", "--dataset", "alf", "--route-turns", "60", "--out", "sampled",
                   "--workspace", str(workspace))
    store = WorldbookStore(workspace / "worldbooks")
    routes = store.load("sampled").routes
    turns = len(store.load("sampled").evidence)
    assert out["episodes"] > 5 and routes is not None and 60 <= routes.turns < turns
    run_json(capsys, "build", "--dataset", "alf", "--route-turns", "0", "--out", "every", "--workspace", str(workspace))
    every = store.load("every").routes
    assert every is not None and every.turns == turns and every.folds == 5


def test_update_adds_a_dataset_equals_a_full_build_on_the_union_and_extracts_only_the_new(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)
    first, rest = tmp_path / "first.jsonl", tmp_path / "rest.jsonl"
    first.write_text("".join(lines[:-3]), encoding="utf-8")
    rest.write_text("".join(lines[-3:]), encoding="utf-8")
    ws = Workspace(tmp_path / "ws")
    ws.ingest([first], "old")
    ws.ingest([rest], "new")
    ws.ingest([first, rest], "all")
    common = ["--route-folds", "2", "--workspace", str(ws.root)]
    run_json(capsys, "build", "--dataset", "old", "--out", "alf", *common)
    updated = run_json(capsys, "build", "--dataset", "new", "--update", "alf", *common)
    full = run_json(capsys, "build", "--dataset", "all", "--out", "full", *common)
    assert updated["parent"] and updated["episodes"] == full["episodes"] == len(lines)
    extract = updated["stages"]["extract"]
    assert (extract["episodes_computed"], extract["episodes_cached"]) == (3, len(lines) - 3)  # old ones not redone
    assert full["stages"]["extract"]["episodes_computed"] == len(lines)
    store = WorldbookStore(ws.root / "worldbooks")
    book, rebuilt = store.load("alf", updated["version"]), store.load("full", full["version"])
    assert book.model_copy(update={"name": "full"}) == rebuilt  # content equal to a full rebuild on the union
    assert [s["dataset"] for s in store.info("alf", updated["version"]).sources] == ["old", "new"]
    with pytest.raises(SystemExit):  # --out and --update are one choice
        main(["build", "--dataset", "new", "--out", "x", "--update", "alf", "--workspace", str(ws.root)])
    capsys.readouterr()
    assert main(["build", "--dataset", "new", "--update", "nope", "--workspace", str(ws.root)]) != 0
    assert "no worldbook 'nope' to update" in capsys.readouterr().err
