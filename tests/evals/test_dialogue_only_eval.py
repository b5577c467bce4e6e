"""Building and evaluating leave dialogue-only episodes (no tool turn) out and say how many: `build_worldbook`'s
report, `worldsmith build --json`, `worldsmith eval --json`, report.json and report.md."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from helpers import sample_episodes, write_jsonl
from worldsmith.cli.main import main
from worldsmith.evals import EvalReport
from worldsmith.traces import ContextEvent
from worldsmith.worldbook import build_worldbook

REPO = Path(__file__).resolve().parents[2]
ENV = "alfworld/look_at_obj_in_light"
TALKS = 8


def talks(tmp_path: Path) -> Path:
    rows = [{"id": f"talk-{i}", "messages": [{"role": "user", "content": f"look at the book {i}"},
                                              {"role": "assistant", "content": "I would rather not."}]}
            for i in range(TALKS)]
    return write_jsonl(tmp_path / "talks.jsonl", rows)


def test_build_worldbook_leaves_dialogues_out_and_counts_them() -> None:
    episodes = sample_episodes("alfworld_expert")[:6]
    dialogues = [episode.model_copy(update={"id": f"{episode.id}-talk", "turns": [],
                                            "final_context": [ContextEvent(role="user", content="hello")]})
                 for episode in episodes[:2]]
    plain = build_worldbook(episodes[:4], name="b", validation=episodes[4:])
    mixed = build_worldbook([*dialogues, *episodes[:4]], name="b", validation=[dialogues[0], *episodes[4:]])
    assert plain.report()["excluded"] == {"dialogue_only": 0, "too_deep": 0}
    assert mixed.report()["excluded"] == {"dialogue_only": 3, "too_deep": 0}
    assert mixed.book.model_dump() == plain.book.model_dump()  # nothing of a dialogue reaches the book
    assert mixed.validation.to_json() == plain.validation.to_json()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    scratch = tmp_path_factory.mktemp("dialogue-eval")
    root = scratch / "ws"
    assert main(["ingest", "--dataset", "alf", "--workspace", str(root),
                 str(REPO / "data_samples" / "collected" / "alfworld_expert.jsonl")]) == 0
    assert main(["ingest", "--dataset", "alf", "--env", ENV, "--workspace", str(root), str(talks(scratch))]) == 0
    return root


def _json(capsys: pytest.CaptureFixture[str], args: list[str]) -> dict:
    assert main([*args, "--json"]) == 0, capsys.readouterr()
    return orjson.loads(capsys.readouterr().out)


def test_build_and_eval_report_the_dialogues_they_left_out(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = ["--workspace", str(workspace)]
    capsys.readouterr()
    ratios = ["--ratios", "train=0.75,test=0.25", "--seed", "1"]
    split = _json(capsys, ["split", "--dataset", "alf", *ratios, *ws])["splits"]
    in_train, in_test = split["train"]["dialogue_only"], split["test"]["dialogue_only"]
    assert in_train + in_test == TALKS and in_train > 0 and in_test > 0  # both sides hold some

    built = _json(capsys, ["build", "--dataset", "alf", "--split", "train", "--out", "alf", *ws])
    assert built["validation_split"] == "test"  # read too: its dialogues are left out as well
    assert built["excluded"] == {"dialogue_only": TALKS, "too_deep": 0}
    assert built["episodes"] == split["train"]["episodes"] - in_train
    assert main(["build", "--dataset", "alf", "--split", "train", "--out", "alf", *ws]) == 0
    assert f"({TALKS} dialogue-only episodes left out)" in capsys.readouterr().out

    run = _json(capsys, ["eval", "--book", "alf", "--dataset", "alf", "--split", "test", "--methods", "nearest",
                         "--resamples", "200", "--max-episodes", "2", "--out", "talk-next", *ws])
    assert run["excluded"] == {"dialogue_only": in_test}
    report = EvalReport.model_validate_json(Path(run["report"]).read_bytes())
    assert report.excluded == {"dialogue_only": in_test}
    assert (f"Excluded before the run: {in_test} dialogue-only episodes" in Path(run["markdown"]).read_text())
    other_env = _json(capsys, ["eval", "--book", "alf", "--dataset", "alf", "--split", "test", "--env",
                               "alfworld/pick_and_place_simple", "--methods", "nearest", "--resamples", "200",
                               "--max-episodes", "1", "--out", "talk-other", *ws])
    assert other_env["excluded"] == {"dialogue_only": 0}  # counted in the environment evaluated

    folds = _json(capsys, ["eval", "--dataset", "alf", "--split", "train", "--folds", "2", "--methods", "nearest",
                           "--max-turns", "1", "--resamples", "200", "--out", "talk-folds", *ws])
    assert folds["excluded"] == {"dialogue_only": in_train}
    assert sum(f["construction_episodes"] for f in folds["folds"]) == split["train"]["episodes"] - in_train
