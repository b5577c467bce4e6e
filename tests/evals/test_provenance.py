"""Every number can say what produced it: the `NumberProvenance` record, and an evaluation report that carries one per
method and protocol (report.json, report.md, `EvalReport`), old reports included (inferred, unknown where unsaid)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from worldsmith.evals import EvalConfig, EvalReport, run_eval
from worldsmith.evals.run_provenance import eval_command
from worldsmith.llm.provenance import UNKNOWN, NumberProvenance
from worldsmith.sim.route_learning import build_simulator_book

SIX = ("method", "model", "dataset", "split", "n", "run")


def test_a_record_says_unknown_for_what_nobody_recorded() -> None:
    assert NumberProvenance().fields() == dict.fromkeys(SIX, UNKNOWN)
    assert "method unknown" in NumberProvenance().line() and "n unknown" in NumberProvenance().line()


def test_a_record_names_all_six_and_round_trips_through_json() -> None:
    record = NumberProvenance(method="direct", model="tiny:/m", trained_on="train-tiny on shop train", dataset="shop",
                              dataset_digest="7", split="test", protocol="open loop (drift)", n=40, unit="turns",
                              episodes=5, run="r1", command="worldsmith eval --out r1")
    assert record.fields() == {"method": "direct", "model": "tiny:/m (trained on: train-tiny on shop train)",
                               "dataset": "shop @ 7", "split": "test", "n": "40 turns of 5 episodes", "run": "r1"}
    assert record.line().startswith("method direct · model tiny:/m") and "from `worldsmith eval --out r1`" in record.line()
    again = NumberProvenance.model_validate_json(record.model_dump_json())
    assert again == record
    newer = NumberProvenance.model_validate({**record.model_dump(), "seed": 3})  # a newer field still loads
    assert newer.fields() == record.fields()
    assert "(inferred" in record.model_copy(update={"recorded": False}).line()


def test_the_command_rebuilds_the_run_from_its_configuration() -> None:
    config = {"name": "r", "book": "shop", "book_version": "v3", "dataset": "shop", "split": "test", "folds": 0,
              "methods": ["harness", "direct"], "protocols": ["drift", "next-obs"], "llm": "local", "seed": 0,
              "llm_spec": "tiny:/models/shop", "policy": "expert", "drop_leaked": True, "max_steps": 50}
    words = shlex.split(eval_command(config) or "")
    assert words[:2] == ["worldsmith", "eval"] and words[-2:] == ["--out", "r"]
    flags = dict(zip(words[2::2], words[3::2], strict=False))
    assert "--drop-leaked" in words and "--seed" not in words and "--policy" not in words
    assert words[words.index("--version") + 1] == "v3" and words[words.index("--llm") + 1] == "tiny:/models/shop"
    assert words[words.index("--methods") + 1] == "harness,direct" and flags["--book"] == "shop"
    assert eval_command({"name": "r"}) is None  # no dataset: nothing to rebuild


def test_every_method_and_protocol_of_a_report_says_what_produced_its_numbers(sample, tmp_path: Path) -> None:
    episodes = sample("textworld")
    evaluated = [e for e in episodes if "treasure_hunter" in e.id]
    built = [e for e in episodes if e not in evaluated]
    book = build_simulator_book(built, name="textworld").book
    config = EvalConfig(name="prov", book="textworld", dataset="samples", split="test",
                        methods=["harness", "nearest"], resamples=200)
    run = run_eval(config, tmp_path / "ws", book=book, episodes=evaluated, construction=built)
    written = json.loads(run.report_path.read_text(encoding="utf-8"))
    turns = sum(len(e.turns) for e in evaluated)
    assert written["protocols"] == ["drift", "next-obs"]
    for protocol in written["protocols"]:
        block = written["by_protocol"][protocol]
        assert set(block["provenance"]) == {"harness", "nearest"}
        for method, entry in block["provenance"].items():
            assert entry["method"] == method and entry["model"] == "none" and entry["run"] == "prov"
            assert entry["dataset"] == "samples" and entry["split"] == "test" and entry["n"] == turns
            assert entry["unit"] == "turns" and entry["episodes"] == len(evaluated)
            assert entry["dataset_digest"].startswith("inline-") and "--out prov" in entry["command"]
            assert entry["protocol"] == ("open loop (drift)" if protocol == "drift" else "teacher forced (next-obs)")
    assert written["provenance"] == written["by_protocol"]["drift"]["provenance"]  # the primary at the top level

    report = EvalReport.model_validate(written)  # read back: the same records, for every protocol
    for protocol in written["protocols"]:
        record = report.provenance_of("nearest", protocol)
        assert record.recorded and record.fields()["n"] == f"{turns} turns of {len(evaluated)} episodes"
    assert report.to_json()["by_protocol"]["next-obs"]["provenance"] == written["by_protocol"]["next-obs"]["provenance"]

    markdown = (run.directory / "report.md").read_text(encoding="utf-8")
    assert "## Provenance (open loop (drift))" in markdown and "## Provenance (teacher forced (next-obs))" in markdown
    assert "| method | model | dataset | split | n | run |" in markdown
    assert f"| harness | none | samples @ {written['config']['dataset_revision']} | test | {turns} turns" in markdown
    assert "Produced by: `worldsmith eval --book textworld" in markdown


def test_an_old_report_without_provenance_loads_and_says_what_it_does_not_know() -> None:
    old = {"run": "old", "protocol": "next-obs", "fingerprint": "f", "counts": {"harness": 12}, "episodes": 3,
           "config": {"book": "b"}, "methods": {"harness": {"exact_match": {"mean": 0.5, "low": 0.4, "high": 0.6,
                                                                            "n": 12}}}}
    report = EvalReport.model_validate(old)
    record = report.provenance_of("harness")
    assert not record.recorded and record.method == "harness" and record.run == "old" and record.n == 12
    assert record.fields()["dataset"] == UNKNOWN and record.fields()["split"] == UNKNOWN
    assert "(inferred: not recorded by this run)" in record.line()
    assert report.to_json() == old  # loading adds nothing to what is dumped back
    with_dataset = EvalReport.model_validate({**old, "config": {"dataset": "shop", "split": "test"}})
    assert with_dataset.provenance_of("harness").fields()["dataset"] == "shop"
    assert with_dataset.provenance_of("harness").split == "test"
