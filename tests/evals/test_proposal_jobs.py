"""Rule proposals as background jobs: launched detached like builds, their progress read back, their report the
CLI's, found again by (book, version, rule, split) and listed by `worldsmith jobs`."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import orjson
import pytest

from proposal_samples import BOOK, RULE, build_heldout_workspace
from worldsmith.cli.main import main
from worldsmith.evals import ProposalReport, propose_with_effect
from worldsmith.evals.proposal_jobs import (
    ProposalJobError,
    ProposalJobStatus,
    ProposalLaunch,
    launch_proposal,
    list_proposals,
    proposal_command,
    proposal_job_name,
    proposal_progress_path,
    proposal_status,
)
from worldsmith.workspace import Workspace
from worldsmith.worldbook import WorldbookStore


@pytest.fixture(scope="module")
def heldout_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_heldout_workspace(tmp_path_factory.mktemp("proposal-jobs"))


def _wait(root: Path, name: str) -> ProposalJobStatus:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        status = proposal_status(root, name)
        if status is not None and status.state != "running":
            return status
        time.sleep(0.2)
    raise AssertionError(f"the proposal job {name} still runs after 300 s")


def _measured(report: dict) -> dict:
    for proposal in report["proposals"]:
        for key in ("seconds", "computed"):
            (proposal["heldout_delta"] or {}).pop(key, None)
    return report


def test_the_name_is_fixed_by_what_is_proposed_and_the_command_is_the_cli_one(tmp_path: Path) -> None:
    launch = ProposalLaunch(book="shop", version="v0001-abc", rule_id="cancel_order.r1", split="test")
    name = proposal_job_name(launch)
    assert name.startswith("shop--cancel_order.r1--") and name == proposal_job_name(launch)
    assert name != proposal_job_name(ProposalLaunch("shop", "v0002-def", "cancel_order.r1", "test"))
    assert name != proposal_job_name(ProposalLaunch("shop", "v0001-abc", "cancel_order.r1"))
    assert "/" not in proposal_job_name(ProposalLaunch("shop", "v1", "odd/rule id"))
    command = proposal_command(launch, tmp_path)
    assert command[:6] == [sys.executable, "-m", "worldsmith", "book", "propose", "shop"]
    assert command[command.index("--rule") + 1] == "cancel_order.r1" and command[-2:] == ["--against", "test"]
    assert command[command.index("--progress") + 1] == str(proposal_progress_path(tmp_path, name))
    assert "--json" in command and command[command.index("--version") + 1] == "v0001-abc"
    with pytest.raises(ProposalJobError, match="worldbook name"):
        launch_proposal(tmp_path, ProposalLaunch(book="bad name!", version="v1", rule_id="r"))
    assert proposal_status(tmp_path, name) is None and list_proposals(tmp_path) == []


def test_a_background_proposal_reports_progress_and_ends_with_the_clis_report(heldout_root: Path, capsys) -> None:
    store = WorldbookStore(heldout_root / "worldbooks")
    head = store.head(BOOK)
    launch = ProposalLaunch(book=BOOK, version=head, rule_id=RULE, split="test")
    job = launch_proposal(heldout_root, launch)
    assert job.run == proposal_job_name(launch) and job.kind == "propose"
    with pytest.raises(ProposalJobError, match="already being computed"):
        launch_proposal(heldout_root, launch)
    status = _wait(heldout_root, job.run)
    assert status.state == "finished" and status.fraction == 1.0 and status.error is None, status.log_tail
    assert (status.book, status.rule_id, status.version) == (BOOK, RULE, head)
    report = status.report()
    assert report is not None and report.proposals and report.split == "test"
    direct = propose_with_effect(Workspace(heldout_root), store, BOOK, RULE, version=head, split="test")
    # the job's report reads back as what the library computes (but for timings and what the cache held)
    assert _measured(report.to_json()) == _measured(direct.to_json())
    steps = orjson.loads(
        b"[" + b",".join(proposal_progress_path(heldout_root, job.run).read_bytes().splitlines()) + b"]"
    )
    done = [step["done"] / step["total"] for step in steps]
    assert done == sorted(done) and done[-1] == 1.0 and len(steps) == 2 + len(report.proposals)
    assert status.to_json()["state"] == "finished"

    assert main(["jobs", "list", "--workspace", str(heldout_root), "--json"]) == 0
    jobs = orjson.loads(capsys.readouterr().out)["jobs"]
    assert ("propose", job.run, "finished") in [(j["kind"], j["run"], j["state"]) for j in jobs]

    failed = _wait(heldout_root, launch_proposal(heldout_root, ProposalLaunch(BOOK, head, "no.such.rule")).run)
    assert failed.state == "failed" and "no.such.rule" in (failed.error or "") and failed.report() is None


def test_a_report_reads_back_from_its_json_and_a_wrong_one_is_named() -> None:
    with pytest.raises(ValueError, match="not a proposal report"):
        ProposalReport.from_json({"book": "b"})
    with pytest.raises(ValueError, match="JSON object"):
        ProposalReport.from_json([1])
    empty = ProposalReport("b", "v1", "r.1", "open", [], [], None, "no held-out effect: none")
    assert ProposalReport.from_json(empty.to_json()).to_json() == empty.to_json()
