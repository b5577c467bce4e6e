"""AgentWorldBench rows: read, predict in their layout, score; leakage against the book; bad rows named."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from worldsmith.evals import LeakageError
from worldsmith.evals.agentworldbench import predict_rows, read_rows, row_episode, score_rows, write_rows
from worldsmith.evals.protocols import make_method
from worldsmith.sim.route_learning import build_simulator_book

REPO = Path(__file__).resolve().parents[2]
ROWS = REPO / "data_samples" / "terminal.agentworldbench.jsonl"


def test_rows_become_episodes_whose_last_turn_is_the_target() -> None:
    rows = read_rows(ROWS)
    assert [len(row.prompts) for row in rows] == [1, 2, 3]
    episode = row_episode(rows[-1])
    assert episode.id == "terminal-1" and len(episode.turns) == 3
    assert episode.initial_observation.text == "root@host:/app#"
    assert episode.turns[1].observation.text == "root@host:/app# cd tests\nroot@host:/app/tests#"
    assert rows[-1].reference == episode.turns[-1].observation.text


def test_predict_write_and_score_in_the_benchmarks_layout(sample, tmp_path: Path) -> None:
    rows = read_rows(ROWS)
    book = build_simulator_book(sample("shell"), name="shell").book
    predicted = predict_rows(rows, make_method("nearest", book), book=book, model_name="nearest")
    assert len(predicted) == 3
    for row, source in zip(predicted, rows, strict=True):
        assert {k: v for k, v in row.items() if k not in ("prediction", "model")} == source.raw
        assert row["prediction"].startswith("<predicted_observation>") and row["model"] == "nearest"
    out = tmp_path / "predictions.jsonl"
    assert write_rows(out, predicted) == 3
    again = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    scores = score_rows(again)
    assert scores["rows"] == 3 and scores["metrics"]["json_f1"] is None
    assert 0 <= scores["metrics"]["token_f1"] <= 1

    perfect = [{**row.raw, "prediction": f"<predicted_observation>\n{row.reference}\n</predicted_observation>"}
               for row in rows]
    assert score_rows(perfect)["metrics"]["exact_match"] == 1.0
    bare = [{**row.raw, "prediction": row.responses[-1]} for row in rows]  # untagged: the header is stripped
    assert score_rows(bare)["metrics"]["exact_match"] == 1.0


def test_a_book_built_from_the_rows_is_refused() -> None:
    rows = read_rows(ROWS)
    book = build_simulator_book([row_episode(rows[-1])], name="terminal").book
    with pytest.raises(LeakageError):
        predict_rows(rows, make_method("nearest", book), book=book)


def test_bad_rows_are_named_by_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    good = ROWS.read_bytes().splitlines()[0]
    path.write_bytes(good + b"\n" + orjson.dumps({"task": "t", "id": 2, "prompt": ["x"], "response": "y"}) + b"\n")
    with pytest.raises(ValueError, match=r"rows\.jsonl:2: field 'response' must be a list of strings"):
        read_rows(path)
