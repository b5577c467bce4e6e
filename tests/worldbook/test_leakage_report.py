"""`LeakageReport`: one type for both checks; every stored shape (tests/fixtures/leakage) still loads, as version 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from worldsmith.evals.report_model import EvalReport
from worldsmith.util.errors import BadInputError
from worldsmith.worldbook import LeakageReport
from worldsmith.worldbook.leakage_report import LEAKAGE_REPORT_VERSION, Dropped

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "leakage"


def _stored(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def test_the_first_builder_shape_gets_its_reasons_from_its_lists() -> None:
    report = LeakageReport.read(_stored("build_v0.json"))
    assert report.version == LEAKAGE_REPORT_VERSION and report.against == "construction" and not report.ok
    assert report.leaked_episodes == {"game-a-s1": ["target turns in the construction episodes"],
                                      "game-b-s0": ["in the construction episodes"]}
    assert report.shared_families == ["game-b"] and report.families_disjoint is False
    assert report.targets_seen_verbatim_in_construction == 4 and report.evidence_episodes is None


def test_the_first_evaluation_shape_names_copies_and_keeps_its_builder_check() -> None:
    report = LeakageReport.read(_stored("eval_v0.json"))
    assert report.against == "evidence" and not report.ok
    assert report.leaked_episodes == {
        "game-a-s1": ["target turns in the book's evidence"],
        "game-c-s0": ["a copy of game-c-s9 (its first 2 turns) in the book's evidence"]}
    assert report.builder_check is not None and report.builder_check.ok
    assert report.builder_check.against == "construction" and report.targets_seen_verbatim_in_evidence == 5


def test_a_builder_list_of_ids_stays_the_leaked_set() -> None:
    stored = _stored("build_leaked_v1.json")
    report = LeakageReport.read(stored)
    assert not report.ok and list(report.leaked_episodes) == stored["leaked_episodes"]
    original = stored["duplicated_trajectories"][0].split(" = ")[1]
    assert report.leaked_episodes["copied-run"] == [f"a copy of {original} in the construction episodes"]
    shared = stored["shared_episodes"][0]
    assert report.leaked_episodes[shared] == ["in the construction episodes", "target turns in the construction episodes"]
    for key in ("shared_episodes", "leaked_turns", "duplicated_trajectories", "shared_families", "target_turns"):
        assert getattr(report, key) == stored[key], key


def test_a_refusal_keeps_its_reasons_and_upgrades_its_builder_check() -> None:
    stored = _stored("eval_refused_v1.json")
    report = LeakageReport.read(stored)
    assert not report.ok and report.leaked_episodes == stored["leaked_episodes"]
    builder = report.builder_check
    assert builder is not None and not builder.ok and builder.against == "construction"
    assert sorted(builder.leaked_episodes) == stored["builder_check"]["leaked_episodes"]
    assert {e for e, why in report.leaked_episodes.items()
            if "in the construction episodes (the builder's check)" in why} == set(builder.leaked_episodes)


def test_a_book_manifest_validation_reads() -> None:
    report = LeakageReport.read(_stored("book_manifest_v1.json")["validation"]["leakage"])
    assert report.ok and report.against == "construction" and report.families_disjoint
    assert report.target_turns == 59


def test_a_real_run_report_with_dropped_episodes_loads_into_the_one_type() -> None:
    stored = _stored("run_dropped_v1.report.json")
    report = EvalReport.model_validate(stored)
    leakage = report.leakage
    assert isinstance(leakage, LeakageReport) and leakage.ok and leakage.against == "evidence"
    assert isinstance(leakage.dropped, Dropped) and leakage.dropped.count == 27 == len(leakage.dropped.episodes)
    assert leakage.dropped.episodes == stored["leakage"]["dropped"]["episodes"]
    assert leakage.evidence_families == stored["leakage"]["evidence_families"]
    written = report.to_json()["leakage"]
    assert written["version"] == 2 and written["ok"] and written["dropped"] == stored["leakage"]["dropped"]
    assert report.to_json()["methods"] == stored["methods"]  # the rest of the report reads back unchanged


def test_a_real_cross_fitted_run_report_loads_its_folds() -> None:
    stored = _stored("run_folds_v1.report.json")
    leakage = EvalReport.model_validate(stored).leakage
    assert leakage.ok and [f.fold for f in leakage.folds] == [1, 2]
    assert leakage.evaluation_episodes == sum(f.evaluation_episodes or 0 for f in leakage.folds) == 4
    assert all(f.builder_check is not None and f.builder_check.against == "construction" for f in leakage.folds)


@pytest.mark.parametrize("name", ["build_v0.json", "eval_v0.json", "build_leaked_v1.json", "eval_refused_v1.json"])
def test_an_upgraded_report_round_trips_as_version_2(name: str) -> None:
    report = LeakageReport.read(_stored(name))
    written = report.to_json()
    assert list(written)[:3] == ["version", "ok", "against"] and None not in written.values()
    assert json.loads(json.dumps(written)) == written
    assert LeakageReport.read(written) == report and LeakageReport.read(written).to_json() == written


def test_json_leaves_out_what_a_check_does_not_know() -> None:
    written = LeakageReport(against="construction", target_turns=3, families_disjoint=True).to_json()
    assert written == {"version": 2, "ok": True, "against": "construction", "leaked_episodes": {},
                       "shared_episodes": [], "leaked_turns": [], "duplicated_trajectories": [], "target_turns": 3,
                       "families_disjoint": True}


def test_a_contradictory_or_malformed_report_is_refused_by_name() -> None:
    with pytest.raises(BadInputError, match="leakage: .*says not ok but names 0 leaked episodes"):
        LeakageReport.read({"ok": False, "shared_episodes": [], "leaked_turns": []})
    with pytest.raises(BadInputError, match="version must be a positive integer"):
        LeakageReport.read({"version": "two"})
    with pytest.raises(BadInputError, match="leaked_episodes"):
        LeakageReport.read({"version": 2, "leaked_episodes": ["a list is version 1's"]})


def test_a_newer_version_loads_and_keeps_what_it_does_not_know() -> None:
    report = LeakageReport.read({"version": 3, "ok": False, "leaked_episodes": {"e": ["why"]}, "severity": "high"})
    assert report.version == 3 and not report.ok and report.to_json()["severity"] == "high"
