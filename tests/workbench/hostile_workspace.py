"""A workspace whose every free-text field carries script, HTML and Markdown payloads, for the browser test
of untrusted text: a dataset, a worldbook built from it with a note, a Simulate session, an evaluation run,
an EnvACE run and a model call log.

Each field holds `hostile(tag)`: the tag (so a test can find the field on the page) and every payload.
Names the workspace validates (datasets, worldbooks, sessions, runs) cannot hold them and stay plain.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from eval_fixtures import ENV, write_run

EXTERNAL_HOST = "198.51.100.7"  # TEST-NET-2: a request to it means the page fetched something it was told to
PAYLOADS = (
    "<script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=1">',
    f"![t](http://{EXTERNAL_HOST}/md-image.png)",
    "[click](javascript:window.__pwned=1)",
    '<a href="javascript:window.__pwned=1">a</a>',
    f'<iframe src="http://{EXTERNAL_HOST}/f">',
)
DATASET, BOOK, SESSION, EVAL_RUN, TRAIN_RUN = "xss", "xssbook", "xss-session", "xss-eval", "xss-train"


def hostile(tag: str) -> str:
    """`tag` followed by every payload."""
    return " ".join((tag, *PAYLOADS))


@dataclass(frozen=True)
class HostileIds:
    """What the test needs to open the pages on the hostile content."""

    episode: str
    rule: str


def _turn(index: int) -> dict[str, Any]:
    return {"index": index, "reward": 0.0, "done": index == 2,
            "action": {"name": hostile("act"), "arguments": {hostile("arg"): hostile("value")},
                       "raw": hostile("raw"), "call_id": hostile("call"), "parse_error": hostile("parse")},
            "observation": {"text": hostile(f"obs{index}")}, "info": {hostile("info"): hostile("info value")},
            "context": [{"role": hostile("role"), "name": hostile("speaker"), "content": hostile("context")}]}


def episode_record(number: int = 0) -> dict[str, Any]:
    """One episode in the native JSONL format, payloads in every text field (its own family: folds need three)."""
    return {"format": "worldsmith.episode/v1", "id": hostile(f"ep{number}"), "env_id": hostile("env"),
            "task": hostile("task"), "task_id": hostile("tid"), "initial_observation": {"text": hostile("opening")},
            "turns": [_turn(index) for index in range(3)], "reward": 1.0, "success": True, "split": hostile("split"),
            "family": hostile(f"family{number}"), "metadata": {hostile("meta"): hostile("meta value")}}


def _worldbook(root: Path) -> str:
    """Build `BOOK` from the dataset, add a note; the id of its one rule."""
    from worldsmith.sim import SIMULATOR_STAGES
    from worldsmith.workspace import Workspace
    from worldsmith.worldbook import Patch, PatchOp, WorldbookStore
    from worldsmith.worldbook.build import build_dataset

    build_dataset(Workspace(root), DATASET, out=BOOK, stages=SIMULATOR_STAGES)
    store = WorldbookStore(root / "worldbooks")
    value = {"kind": "convention", "text": hostile("note")}
    store.patch(BOOK, Patch(base=store.head(BOOK), ops=[PatchOp(op="add_note", id="n1", value=value)],
                            author=hostile("author"), message=hostile("message")))
    return store.load(BOOK).rules[0].id


def _session(root: Path) -> None:
    """A Simulate session on `BOOK` with one step of nearest evidence."""
    from worldsmith.sim import Session
    from worldsmith.sim.registry import make_world_model
    from worldsmith.worldbook import WorldbookStore

    store = WorldbookStore(root / "worldbooks")
    Session.create(root / "sessions" / SESSION, book_ref=f"{BOOK}@{store.head(BOOK)}", model="nearest",
                   initial_observation=hostile("session opening"), task=hostile("session task")).close()
    with Session.open(root / "sessions" / SESSION) as session:
        model = make_world_model("nearest", store.load(BOOK))
        session.attach(model)
        session.play(model, hostile("session action"))


def _eval_run(root: Path, episode: str) -> None:
    """A finished evaluation run whose environment, method, episodes and texts are hostile."""
    method = hostile("method")
    folder = write_run(root, EVAL_RUN, ["harness", "nearest"], dataset=DATASET, book=BOOK)
    records = pd.read_parquet(folder / "records.parquet")
    records = records.assign(env_id=hostile("eval env"), episode_id=episode, action=hostile("eval action"),
                             reference=hostile("reference"), prediction=hostile("prediction"),
                             method=records["method"].replace("nearest", method))
    records.to_parquet(folder / "records.parquet", index=False)
    text = (folder / "report.json").read_text(encoding="utf-8")
    for plain, bad in ((ENV, hostile("eval env")), ("nearest", method), ("2025-01-01T00:00:00Z", hostile("created"))):
        text = text.replace(json.dumps(plain)[1:-1], json.dumps(bad)[1:-1])
    (folder / "report.json").write_text(text, encoding="utf-8")


def _train_run(root: Path) -> None:
    """A failed EnvACE run with a hostile objective, error and checkpoint evaluation."""
    folder = root / "runs" / "envace" / TRAIN_RUN
    (folder / "evals" / "bfcl-k1").mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"objective": hostile("objective"), "steps": 3}), encoding="utf-8")
    (folder / "status.json").write_text(json.dumps({"state": "failed", "step": 1, "error": hostile("error"),
                                                    "traceback": hostile("traceback")}), encoding="utf-8")
    report = {"env": hostile("train env"), "tasks": ["t1"], "methods": {hostile("train method"): {}}}
    (folder / "evals" / "bfcl-k1" / "report.json").write_text(json.dumps(report), encoding="utf-8")


def _call_log(root: Path) -> None:
    """One logged model call whose every field is hostile."""
    from worldsmith.llm import CallLog
    from worldsmith.llm.base import Completion, GenerationParams

    CallLog(root / "llm" / "calls.sqlite").record(
        run=hostile("run"), component=hostile("component"), spec=hostile("spec"),
        messages=[{"role": "user", "content": hostile("prompt")}], params=GenerationParams(),
        completions=[Completion(text=hostile("output"), finish_reason=hostile("finish"))])


def write_hostile_workspace(root: Path, scratch: Path) -> HostileIds:
    """Fill the empty workspace `root` (trace file written in `scratch`)."""
    from worldsmith.workspace import Workspace

    trace = scratch / "hostile.jsonl"
    trace.write_text("".join(json.dumps(episode_record(number)) + "\n" for number in range(3)), encoding="utf-8")
    assert Workspace(root).ingest([trace], DATASET).committed
    rule = _worldbook(root)
    _session(root)
    episode = episode_record(0)["id"]
    _eval_run(root, episode)
    _train_run(root)
    _call_log(root)
    return HostileIds(episode=episode, rule=rule)
