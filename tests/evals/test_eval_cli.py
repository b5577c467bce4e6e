"""`worldsmith eval` end to end on a workspace: ingest, split by family, build, evaluate (subprocess, with progress
on stderr), resume, usage errors, the construction-size curve and AgentWorldBench rows (in process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from worldsmith import Workspace
from worldsmith.cli.main import main

REPO = Path(__file__).resolve().parents[2]


def run(*args: str, workspace: Path, code: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(workspace), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "worldsmith", *args], capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode == code, result.stderr + result.stdout
    return result


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("evalcli") / "ws"
    assert main(["ingest", "--dataset", "alf", "--workspace", str(root),
                 str(REPO / "data_samples" / "collected" / "alfworld_expert.jsonl")]) == 0
    assert main(["split", "--dataset", "alf", "--ratios", "train=0.75,test=0.25", "--workspace", str(root)]) == 0
    assert main(["build", "--dataset", "alf", "--split", "train", "--out", "alf", "--workspace", str(root),
                 "--json"]) == 0
    return root


def test_eval_subprocess_json_progress_and_resume(workspace: Path) -> None:
    args = ("eval", "--book", "alf", "--dataset", "alf", "--split", "test", "--methods", "harness,nearest",
            "--protocol", "next-obs", "--resamples", "500", "--max-episodes", "3", "--out", "cli-next", "--json")
    result = run(*args, workspace=workspace)
    output = orjson.loads(result.stdout)
    assert output["computed"] == 6 and output["reused"] == 0 and output["leakage"]["ok"]
    assert set(output["methods"]) == {"harness", "nearest"} and "harness vs nearest" in output["pairs"]
    assert "[6/6] nearest on" in result.stderr
    report = orjson.loads(Path(output["report"]).read_bytes())
    assert report["config"]["split"] == "test" and report["config"]["book_version"].startswith("v0001")
    assert report["seen_unseen"]["seen"]["methods"] == {}  # split by family: no test task was seen
    assert report["leakage"]["evidence_families"] > 0 and report["leakage"]["evidence_episodes_unresolved"] == 0
    again = orjson.loads(run(*args, workspace=workspace).stdout)
    assert again["computed"] == 0 and again["reused"] == 6 and again["fingerprint"] == output["fingerprint"]


def test_eval_text_output_and_errors(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["eval", "--workspace", str(workspace), "--book", "alf", "--dataset", "alf", "--split", "test"]
    assert main([*base, "--methods", "nearest,harness-no-book", "--protocol", "drift", "--resamples", "300",
                 "--max-episodes", "2", "--out", "cli-drift"]) == 0
    printed = capsys.readouterr().out
    assert "run cli-drift (drift)" in printed and "nearest vs harness-no-book" in printed
    assert "] (only 2 trajectories)" in printed  # 2 episodes resampled: the interval says so
    assert main([*base, "--methods", "direct", "--llm", "tiny:no/such/folder", "--out", "x"]) == 3  # not found
    assert "no/such/folder" in capsys.readouterr().err  # (no --llm: the dataset's own or the bundled model)
    assert main([*base, "--methods", "oracle-of-delphi", "--out", "x"]) == 2
    assert "unknown method 'oracle-of-delphi'" in capsys.readouterr().err
    assert main(["eval", "--workspace", str(workspace), "--book", "alf"]) == 2
    assert "needs --dataset, --out" in capsys.readouterr().err
    assert main([*base, "--methods", "nearest", "--protocol", "drift", "--resamples", "300", "--max-episodes", "2",
                 "--out", "cli-drift", "--json"]) == 5  # a conflict: another configuration under that name
    assert "another configuration" in orjson.loads(capsys.readouterr().out)["error"]


def test_eval_curve_and_awb(workspace: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["eval", "curve", "--workspace", str(workspace), "--dataset", "alf", "--sizes", "1,5",
                 "--max-turns", "2", "--resamples", "300", "--out", "cli-curve", "--json"]) == 0
    curve = orjson.loads(capsys.readouterr().out)
    assert sorted({p["n"] for p in curve["points"]}) == [1, 5] and curve["skipped"] == []
    assert (Path(curve["directory"]) / "curve.md").exists()

    out = tmp_path / "awb.jsonl"
    assert main(["eval", "awb", "--workspace", str(workspace), "--book", "alf", "--method", "nearest", "--rows",
                 str(REPO / "data_samples" / "terminal.agentworldbench.jsonl"), "--out", str(out), "--json"]) == 0
    scored = orjson.loads(capsys.readouterr().out)
    assert scored["rows"] == 3 and len(out.read_bytes().splitlines()) == 3
    assert set(scored["metrics"]) == {"exact_match", "edit_similarity", "token_f1", "json_f1"}


def test_eval_cross_fitted_by_folds(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["eval", "--workspace", str(workspace), "--dataset", "alf", "--split", "train", "--folds", "3",
            "--methods", "harness,nearest", "--max-turns", "2", "--resamples", "300", "--out", "cli-folds"]
    assert main([*args, "--json"]) == 0
    captured = capsys.readouterr()
    output = orjson.loads(captured.out)
    assert [f["fold"] for f in output["folds"]] == [1, 2, 3] and output["leakage"]["ok"]
    assert sum(f["episodes"] for f in output["folds"]) * 2 * 2 == output["computed"]  # methods x protocols
    assert output["protocols"] == ["drift", "next-obs"] and output["protocol"] == "drift"  # both, open loop first
    assert {p: b["label"] for p, b in output["by_protocol"].items()} == {
        "drift": "open loop (drift)", "next-obs": "teacher forced (next-obs)"}
    assert output["by_protocol"]["drift"]["methods"] == output["methods"]
    assert "exact_match_knowable_tf" in output["by_protocol"]["drift"]["methods"]["harness"]
    assert "exact_match_knowable_tf" not in output["by_protocol"]["next-obs"]["methods"]["harness"]
    for block in output["by_protocol"].values():  # what produced each method's numbers, per protocol
        source = block["provenance"]["nearest"]
        assert source["method"] == "nearest" and source["model"] == "none" and source["run"] == "cli-folds"
        assert source["dataset"] == "alf" and source["split"] == "train" and source["n"] == block["counts"]["nearest"]
        assert source["protocol"] == block["label"] and "--folds 3" in source["command"]
    assert output["provenance"] == output["by_protocol"]["drift"]["provenance"]
    assert "fold 1/3: book built from" in captured.err and "fold 3/3: next-obs: nearest on" in captured.err
    assert main(args) == 0  # resumed, in text
    printed = capsys.readouterr().out
    assert "0 units computed" in printed and "fold 2: book alf-fold2@" in printed
    assert printed.index("open loop (drift):") < printed.index("teacher forced (next-obs):")
    assert main([*args[:-2], "--folds", "1", "--out", "x"]) == 2
    assert "at least 2" in capsys.readouterr().err
    assert main(["eval", "--workspace", str(workspace), "--dataset", "alf", "--out", "x"]) == 2
    assert "--folds K instead of --book" in capsys.readouterr().err


def test_eval_drop_leaked_leaves_out_the_construction_episodes(workspace: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    base = ["eval", "--workspace", str(workspace), "--book", "alf", "--dataset", "alf", "--methods", "nearest",
            "--max-turns", "1", "--resamples", "300"]
    assert main([*base, "--out", "cli-refused", "--json"]) == 3  # every split: the train episodes leak
    assert "leakage: refusing" in orjson.loads(capsys.readouterr().out)["error"]
    assert main([*base, "--drop-leaked", "--out", "cli-dropped", "--json"]) == 0
    output = orjson.loads(capsys.readouterr().out)
    train = {e.id for e in Workspace(workspace).dataset("alf").iter_episodes("train")}
    assert output["leakage"]["ok"] and output["dropped"]["count"] == len(train) == 36 - output["records"] // 2  # 2 protocols
    assert output["leakage"]["version"] == 2 and output["leakage"]["against"] == "evidence"
    assert set(output["dropped"]["episodes"]) == train
    assert all(why == ["in the book's evidence", "target turns in the book's evidence"]
               for why in output["dropped"]["episodes"].values())
    assert main([*base, "--split", "train", "--drop-leaked", "--out", "cli-all-leak"]) == 3
    assert "nothing is left to evaluate" in capsys.readouterr().err
    assert main([*base, "--drop-leaked", "--out", "cli-dropped"]) == 0
    assert "dropped " in capsys.readouterr().out


def test_small_sample_marks_once_per_line_or_beside_each_cell() -> None:
    from worldsmith.cli.eval import _with_small_marks
    from worldsmith.evals import MetricCell

    few, many = MetricCell(trajectories=4), MetricCell(trajectories=40)
    assert _with_small_marks(["a 1", "b 2"], [few, few]) == "a 1; b 2 (only 4 trajectories)"
    assert _with_small_marks(["a 1", "b 2"], [few, many]) == "a 1 (only 4 trajectories); b 2"
    assert _with_small_marks(["a 1"], [many]) == "a 1"
