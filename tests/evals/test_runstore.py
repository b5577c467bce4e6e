"""The evaluation run store and the typed report: a run made by run_eval reads back through the store as the
`EvalReport` it returned, report.json round-trips unchanged, older reports load, broken files are named."""

from __future__ import annotations

import json
import os
from pathlib import Path

import orjson
import pytest

from worldsmith.evals import EvalConfig, EvalReport, EvalRun, EvalRunStore, RunFileError, run_eval
from worldsmith.evals.run import run_folder
from worldsmith.traces import Episode
from worldsmith.worldbook import Worldbook

# A report as written before `trajectories`, `counts`, `plots` and `bootstrap` were recorded, with a key no
# reader knows: it must still load, and dump back as it was.
OLD_REPORT = {
    "run": "old", "protocol": "next-obs", "fingerprint": "fp-old", "config": {"book": "alfworld", "methods": ["a"]},
    "judge": None, "methods": {"a": {"exact_match": {"mean": 0.5, "low": 0.25, "high": 0.75, "n": 8}}},
    "pairs": {}, "per_env": {"alfworld/pick": {"methods": {"a": {}}, "pairs": {}}},
    "seen_unseen": {"seen": {"methods": {}, "pairs": {}}, "unseen": {"methods": {}, "pairs": {}}},
    "cost": {"a": {"model_calls": 0.0}}, "leakage": {"ok": True}, "seeds": {"bootstrap": 0},
    "created": "2025-01-01T00:00:00Z", "someday": {"a new key": [1, 2]},
}


def _run(tmp_path: Path, book: Worldbook, split: tuple[list[Episode], list[Episode]], name: str = "store") -> EvalRun:
    construction, held_out = split
    config = EvalConfig(name=name, book="alfworld", dataset="samples", methods=["harness", "nearest"],
                        max_episodes=2, max_turns=3, resamples=200)
    return run_eval(config, tmp_path / "ws", book=book, episodes=held_out, construction=construction)


def test_a_run_reads_back_through_the_store(alfworld_book: Worldbook, alfworld_split, tmp_path: Path) -> None:
    run = _run(tmp_path, alfworld_book, alfworld_split)
    store = EvalRunStore(tmp_path / "ws")
    assert [folder.name for folder in store.runs()] == ["store"]
    folder = store.run("store")
    assert folder.path == run.directory == run_folder(tmp_path / "ws", "store")
    assert run.report_path == folder.report_path

    report = folder.read_report()
    assert isinstance(report, EvalReport) and report == run.report
    assert report.to_json() == orjson.loads(folder.report_path.read_bytes())  # nothing lost or added
    cell = report.methods["harness"]["exact_match"]
    assert report.protocol == "drift" and report.protocol_names() == ["drift", "next-obs"]  # open loop first
    drift = run.records[run.records["protocol"] == "drift"]
    assert cell.n == len(drift[drift["method"] == "harness"])
    assert report.block("drift") is report and report.block("next-obs") == report.by_protocol["next-obs"]
    assert report.by_protocol["drift"].methods == report.methods and "fidelity_at_t" not in report.by_protocol[
        "next-obs"].model_fields_set
    assert cell.low is not None and cell.high is not None and cell.low <= (cell.mean or 0) <= cell.high
    assert report.scope().methods == report.methods and report.scope(env_id="nowhere").methods == {}
    assert report.leakage.ok and report.counts == {"harness": cell.n, "nearest": cell.n}
    assert set(report.plots) >= {"leaderboard"} and (folder.path / report.plots["leaderboard"][0]).exists()

    config = folder.read_config()
    assert config is not None and config["fingerprint"] == run.fingerprint
    progress = folder.read_progress()
    assert progress is not None and progress.status == "done" and progress.done == progress.total == 2 * 2 * 2  # protocols x methods x episodes
    assert len(folder.read_records()) == len(run.records) and folder.markdown_path.exists()
    assert len(folder.journal().units) == progress.total


def test_a_failing_unit_stops_the_run_closes_what_it_opened_and_resumes(alfworld_book: Worldbook, alfworld_split,
                                                                        monkeypatch, tmp_path: Path) -> None:
    from worldsmith.evals import units

    compute, calls, closed = units.UnitComputer.compute, [], []

    def second_fails(self: units.UnitComputer, *unit: object) -> dict:
        calls.append(unit)
        if len(calls) == 2:
            raise RuntimeError("the model went away")
        return compute(self, *unit)

    monkeypatch.setattr(units.UnitComputer, "compute", second_fails)
    monkeypatch.setattr(units.UnitComputer, "close", lambda self: closed.append(True))
    with pytest.raises(RuntimeError, match="the model went away"):
        _run(tmp_path, alfworld_book, alfworld_split)
    folder = EvalRunStore(tmp_path / "ws").run("store")
    progress = folder.read_progress()
    assert progress is not None and progress.status == "failed" and progress.done == 1 and progress.total == 8
    assert progress.error == "RuntimeError: the model went away" and closed == [True]
    assert folder.read_report() is None and len(folder.journal().units) == 1

    monkeypatch.undo()
    again = _run(tmp_path, alfworld_book, alfworld_split)
    assert (again.reused, again.computed) == (1, 7)
    done = folder.read_progress()
    assert done is not None and (done.status, done.done, done.message, done.error) == ("done", 8, "report written", None)


def test_an_older_report_loads_and_dumps_back_unchanged_but_its_leakage_upgraded() -> None:
    report = EvalReport.model_validate(OLD_REPORT)
    assert report.methods["a"]["exact_match"].trajectories is None and report.counts == {}
    assert report.bootstrap.resamples is None and report.w2r == {} and report.folds == []
    upgraded = {"version": 2, "ok": True, "against": "evidence", "leaked_episodes": {}}  # LeakageReport's reader
    assert report.to_json() == {**OLD_REPORT, "leakage": upgraded}


def test_w2r_flat_entries_read_as_their_one_method() -> None:
    report = EvalReport.model_validate({**OLD_REPORT, "w2r": {
        "random": {"real": 0.2, "w2r": 0.1, "consistency": 0.5, "n": 5},
        "expert": {"real": 1.0, "methods": {"a": {"w2r": 0.9, "n": 3}}, "method": "a", "w2r": 0.9}}})
    flat = report.w2r["random"].by_method()
    assert list(flat) == [""] and flat[""].w2r == 0.1 and flat[""].consistency == 0.5
    assert report.w2r["expert"].by_method()["a"].w2r == 0.9


def test_broken_files_are_named(tmp_path: Path) -> None:
    store = EvalRunStore(tmp_path)
    folder = store.run("broken")
    folder.path.mkdir(parents=True)
    folder.report_path.write_text("{not json", encoding="utf-8")
    with pytest.raises(RunFileError, match=r"report\.json: not valid JSON"):
        folder.read_report()
    folder.report_path.write_text(json.dumps({**OLD_REPORT, "methods": ["a"]}), encoding="utf-8")
    with pytest.raises(RunFileError, match=r"report\.json: not a valid report\.json \(methods: "):
        folder.read_report()
    folder.progress_path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(RunFileError, match=r"progress\.json: expected a JSON object, found list"):
        folder.read_progress()
    folder.records_path.write_bytes(b"not parquet")
    with pytest.raises(RunFileError, match=r"records\.parquet: not a readable parquet file"):
        folder.read_records()
    assert store.run("missing").read_report() is None and store.run("missing").read_records().empty


def test_runs_lists_run_folders_newest_first(tmp_path: Path) -> None:
    store = EvalRunStore(tmp_path)
    assert store.runs() == []
    for age, name in enumerate(("newer", "older")):
        folder = store.run(name)
        folder.write_progress(0, 1, "running", "starting", "2025-01-01T00:00:00+00:00")
        os.utime(folder.progress_path, ns=(10**18 - age * 10**9, 10**18 - age * 10**9))
    store.jobs_dir.mkdir(parents=True)
    (store.jobs_dir / "config.json").write_text("{}", encoding="utf-8")
    (store.root / "empty").mkdir()
    assert [folder.name for folder in store.runs()] == ["newer", "older"]
    assert store.build_cache.parent == store.root
