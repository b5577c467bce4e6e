"""The curation loop's yardstick: did this edit move held-out fidelity, and which turns did it flip?

    heldout = HeldOut(dataset="alfworld", split="test")          # chosen once
    delta = heldout_delta(book_before, book_after, heldout, workspace)
    delta.metrics["exact_match"].diff        # paired difference after - before, with its bootstrap interval
    delta.by_action["take"]["exact_match"]   # the same on the edited action's turns only
    [t.kind for t in delta.flipped]          # "fixed" / "broken": turns whose exact match changed

Both versions are scored with the no-model harness open loop (the `drift` protocol of `worldsmith eval`:
started on the opening, acting on its own answers, as under an agent: `HeldOutDelta.open_loop`, shown first)
and teacher forced (`next-obs`: `metrics`, `by_action` and the flipped turns), so the numbers agree with an
evaluation run, on the same held-out turns, and the
held-out episodes are checked for leakage against each book with the rule `worldsmith eval` uses
(`evals.inputs.leak_free`). Predictions are cached on disk per (book content hash, held-out set, code
version) under `<workspace>/cache/heldout/`, so after an edit only the new version is computed.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, model_validator

from worldsmith.evals.bootstrap import bootstrap_mean
from worldsmith.evals.envmatch import match_episodes
from worldsmith.evals.inputs import in_env, leak_free
from worldsmith.evals.protocols import NO_MODEL, Scorer, drift_records, next_obs_records
from worldsmith.evals.run_provenance import PROTOCOL_LABELS
from worldsmith.llm.provenance import NumberProvenance
from worldsmith.sim.harness import Harness
from worldsmith.traces.model import Episode
from worldsmith.util.atomic import atomic_write_json
from worldsmith.util.code_version import code_version
from worldsmith.util.errors import BadInputError
from worldsmith.util.progress import Progress
from worldsmith.workspace import Workspace
from worldsmith.worldbook.leakage_report import LeakageReport
from worldsmith.worldbook.model import Worldbook

__all__ = ["DELTA_METRICS", "FlippedTurn", "HeldOut", "HeldOutDelta", "MetricDelta", "TurnScore", "VersionScores",
           "book_hash", "check_heldout", "edited_actions", "heldout_delta", "load_heldout", "score_version"]

DELTA_METRICS = ("exact_match", "token_f1", "json_f1")
CACHE_KIND = "heldout"


class HeldOut(BaseModel):
    """The held-out set the loop scores against: a dataset's split, or chosen episodes of it (chosen once)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: str
    split: str | None = Field(default=None, description="Only this split's episodes (e.g. 'test').")
    episodes: tuple[str, ...] | None = Field(default=None, description="Only these episode ids.")
    env: str | None = Field(default=None, description="Only this environment (prefix of the env id).")
    max_episodes: int | None = Field(default=None, ge=1, description="The first N episodes by id.")

    @model_validator(mode="after")
    def _chosen(self) -> HeldOut:
        if self.split is None and not self.episodes:
            raise ValueError("a held-out set needs a split or an episode list (the whole dataset is what books are "
                             "built from)")
        return self

    def label(self) -> str:
        """How a page or a report names it: `alfworld:test`, `alfworld:3 episodes`."""
        return f"{self.dataset}:{self.selection()}"

    def selection(self) -> str:
        """The part of the dataset chosen: `test`, `3 episodes`, `test (alfworld)`."""
        what = self.split if self.split is not None else f"{len(self.episodes or ())} episodes"
        return what + (f" ({self.env})" if self.env else "")

    def key(self, revision: int) -> str:
        """16 hex digits over the selection and the dataset revision: the cache folder of this set."""
        value = {**self.model_dump(mode="json"), "revision": revision}
        return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


class TurnScore(BaseModel):
    """One held-out turn predicted by one book version."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str
    turn: int
    action: str = Field(description="The canonical action name (through the version's action schema).")
    action_text: str
    prediction: str
    target: str
    route: str
    rules: list[str] = Field(default_factory=list)
    exact_match: float
    token_f1: float
    json_f1: float | None = None


class VersionScores(BaseModel):
    """Every held-out turn of one book version: what `score_version` returns and the cache holds."""

    model_config = ConfigDict(extra="forbid")

    book_hash: str
    heldout: HeldOut
    revision: int
    code: str
    turns: list[TurnScore] = Field(description="Every held-out turn, teacher forced (next-obs).")
    open_loop: list[TurnScore] = Field(default_factory=list, description="Every held-out turn open loop (drift).")
    seconds: float = Field(description="Seconds the predictions took when computed (not when read from the cache).")
    cached: bool = False

    def mean(self, metric: str) -> float | None:
        values = [getattr(t, metric) for t in self.turns if getattr(t, metric) is not None]
        return sum(values) / len(values) if values else None


class MetricDelta(BaseModel):
    """One metric before and after, and the paired difference after - before with its episode-bootstrap interval."""

    model_config = ConfigDict(extra="forbid")

    before: float
    after: float
    diff: float
    low: float
    high: float
    n: int = Field(description="Paired turns (those with the metric defined for both versions).")


class FlippedTurn(BaseModel):
    """A held-out turn whose exact match changed: `fixed` (wrong before, right after) or `broken`."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["fixed", "broken"]
    episode_id: str
    turn: int
    action: str
    action_text: str
    before: str
    after: str
    target: str

    @property
    def turn_id(self) -> str:
        return f"{self.episode_id}#{self.turn}"


class HeldOutDelta(BaseModel):
    """What an edit did on the held-out set, overall and on the edited actions."""

    model_config = ConfigDict(extra="forbid")

    heldout: HeldOut
    before_hash: str
    after_hash: str
    turns: int
    episodes: int
    actions: list[str] = Field(description="The edited actions `by_action` covers.")
    open_loop: dict[str, MetricDelta] = Field(default_factory=dict, description="Open loop (drift): the delta an "
                                              "agent acting in the simulator sees; the headline.")
    metrics: dict[str, MetricDelta] = Field(description="Teacher forced (next-obs), as `by_action` and `flipped`.")
    by_action: dict[str, dict[str, MetricDelta]]
    flipped: list[FlippedTurn]
    leakage: LeakageReport
    computed: list[str] = Field(description="Which versions were predicted now ('before', 'after'); others cached.")
    seconds: float = Field(description="Wall seconds of this delta, cache reads included.")
    provenance: NumberProvenance | None = Field(default=None, description="What produced the teacher-forced "
                                                "numbers (`metrics`, `by_action`): the no-model harness on the "
                                                "held-out set, n paired turns, the two versions compared.")

    @property
    def fixed(self) -> list[FlippedTurn]:
        return [t for t in self.flipped if t.kind == "fixed"]

    @property
    def broken(self) -> list[FlippedTurn]:
        return [t for t in self.flipped if t.kind == "broken"]

    def summary(self) -> str:
        """One line: `open loop exact match 0.41 → 0.40 (-0.01 [-0.03, +0.00]); teacher forced exact match 0.62 →
        0.55 (-0.07 [-0.12, -0.03]), 0 fixed, 9 broken on alfworld:test`."""
        def moved(label: str, m: MetricDelta | None) -> str:
            return (f"{label} exact match {m.before:.3f} → {m.after:.3f} ({m.diff:+.3f} [{m.low:+.3f}, {m.high:+.3f}])"
                    if m else f"{label}: no scored turns")
        shown = [moved("open loop", self.open_loop.get("exact_match"))] if self.open_loop else []
        shown.append(moved("teacher forced", self.metrics.get("exact_match")))
        return f"{'; '.join(shown)}, {len(self.fixed)} fixed, {len(self.broken)} broken on {self.heldout.label()}"


def book_hash(book: Worldbook) -> str:
    """16 hex digits over the book's content (name included): a version's identity for the cache."""
    dumped = orjson.dumps(book.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS, default=str)
    return hashlib.sha256(dumped).hexdigest()[:16]


def load_heldout(heldout: HeldOut, workspace: Workspace) -> tuple[list[Episode], int]:
    """The held-out episodes (with turns, sorted by id) and the dataset revision; ValueError naming what is missing."""
    dataset = workspace.dataset(heldout.dataset)
    if heldout.split is not None and heldout.split not in dataset.splits():
        raise BadInputError(f"dataset {heldout.dataset!r} has no split {heldout.split!r} "
                         f"(splits: {', '.join(dataset.splits()) or 'none; run worldsmith split'})")
    chosen = in_env((e for e in dataset.iter_episodes(heldout.split) if e.turns), heldout.env)
    if heldout.episodes:
        wanted = set(heldout.episodes)
        missing = wanted - {e.id for e in chosen}
        if missing:
            raise BadInputError(f"held-out episodes not in dataset {heldout.dataset!r}: {', '.join(sorted(missing)[:5])}")
        chosen = [e for e in chosen if e.id in wanted]
    chosen.sort(key=lambda e: e.id)
    if heldout.max_episodes is not None:
        chosen = chosen[: heldout.max_episodes]
    if not chosen:
        raise BadInputError(f"the held-out set {heldout.label()} has no episodes with turns")
    return chosen, dataset.revision


def _cache_path(workspace: Workspace, heldout: HeldOut, revision: int, digest: str) -> Path:
    return workspace.layout.cache_dir(CACHE_KIND).joinpath(heldout.key(revision), f"{digest}-{code_version()}.json")


def _predict(book: Worldbook, episodes: Sequence[Episode], progress: Progress | None,
             open_loop: bool = False) -> list[TurnScore]:
    """Every turn predicted by the no-model harness (fast and deterministic), teacher forced or `open_loop`."""
    model = Harness(book)
    out: list[TurnScore] = []
    total = sum(len(e.turns) for e in episodes)
    for episode in episodes:
        records = drift_records(model, episode, Scorer()) if open_loop else next_obs_records(model, episode, Scorer())
        for record in records:
            turn = record.turn or 0
            action = episode.turns[turn].action
            out.append(TurnScore(episode_id=episode.id, turn=turn, action=model.canonical(action)[0],
                                 action_text=record.action or "", prediction=record.prediction or "",
                                 target=record.reference or "", route=record.route or "", rules=record.rules or [],
                                 exact_match=float(record.exact_match or 0.0),
                                 token_f1=float(record.token_f1 or 0.0), json_f1=record.json_f1))
        if progress is not None:
            progress(len(out), total, f"episode {episode.id}{' (open loop)' if open_loop else ''}")
    return out


def _leak_checked(book: Worldbook, episodes: list[Episode]) -> LeakageReport:
    """The `worldsmith eval` rule: LeakageError when a held-out episode is in (or copied into) the book's evidence."""
    _, report = leak_free(book, episodes, None, drop=False)
    return report


def check_heldout(book: Worldbook, heldout: HeldOut, workspace: Workspace) -> LeakageReport:
    """The leakage report of `heldout` against `book` (LeakageError, ValueError as `heldout_delta` raises them):
    what a page or the CLI checks once when the set is chosen, before any edit."""
    try:
        episodes, _ = load_heldout(heldout, workspace)
    except ValueError:
        if heldout.env:  # no episode of the book's environment: say whether another one is its API, and the fix
            wanted = set(heldout.episodes or ())
            candidates = (e for e in workspace.dataset(heldout.dataset).iter_episodes(heldout.split)
                          if not wanted or e.id in wanted)
            problem = match_episodes(book.model_copy(update={"env_id": heldout.env}), candidates,
                                     heldout.dataset).mismatch()
            if problem is not None:
                raise BadInputError(problem) from None
        raise
    return _leak_checked(book, episodes)


def score_version(book: Worldbook, heldout: HeldOut, workspace: Workspace | None = None, *,
                  episodes: list[Episode] | None = None, revision: int | None = None,
                  progress: Progress | None = None) -> VersionScores:
    """Every held-out turn predicted by `book` (no-model harness), from the cache when this version was scored.
    `workspace` defaults to the default workspace (`$WORLDSMITH_WORKSPACE`).

    Leakage is checked first (`LeakageError`); the cache file is written atomically, and an unreadable
    one is recomputed, never trusted.
    """
    workspace = workspace if workspace is not None else Workspace()
    if episodes is None or revision is None:
        episodes, revision = load_heldout(heldout, workspace)
    _leak_checked(book, episodes)
    digest = book_hash(book)
    path = _cache_path(workspace, heldout, revision, digest)
    if path.exists():
        try:
            cached = VersionScores.model_validate_json(path.read_bytes())
            return cached.model_copy(update={"cached": True})
        except ValueError:
            pass  # a damaged cache file is recomputed below and replaced
    started = time.perf_counter()
    turns = _predict(book, episodes, progress)
    open_loop = _predict(book, episodes, progress, open_loop=True)
    scores = VersionScores(book_hash=digest, heldout=heldout, revision=revision, code=code_version(), turns=turns,
                           open_loop=open_loop, seconds=round(time.perf_counter() - started, 3))
    atomic_write_json(path, scores.model_dump(mode="json"))
    return scores


def edited_actions(before: Worldbook, after: Worldbook) -> list[str]:
    """The actions of the rules an edit added, removed or changed (the delta's `by_action`)."""
    old = {r.id: r for r in before.rules}
    new = {r.id: r for r in after.rules}
    actions = {old[i].action for i in old.keys() - new.keys()} | {new[i].action for i in new.keys() - old.keys()}
    actions |= {a for i in old.keys() & new.keys() if old[i] != new[i] for a in (old[i].action, new[i].action)}
    return sorted(actions)


def _paired(pairs: Sequence[tuple[TurnScore, TurnScore]], metric: str, resamples: int,
            seed: int) -> MetricDelta | None:
    rows = [(a.episode_id, getattr(a, metric), getattr(b, metric)) for a, b in pairs
            if getattr(a, metric) is not None and getattr(b, metric) is not None]
    if not rows:
        return None
    diff = bootstrap_mean([r[0] for r in rows], [r[2] - r[1] for r in rows], resamples=resamples, seed=seed)
    before = sum(r[1] for r in rows) / len(rows)
    after = sum(r[2] for r in rows) / len(rows)
    return MetricDelta(before=round(before, 6), after=round(after, 6), diff=round(diff.mean, 6),
                       low=round(diff.low, 6), high=round(diff.high, 6), n=len(rows))


def _metrics(pairs: Sequence[tuple[TurnScore, TurnScore]], resamples: int, seed: int) -> dict[str, MetricDelta]:
    out = {m: _paired(pairs, m, resamples, seed) for m in DELTA_METRICS}
    return {m: d for m, d in out.items() if d is not None}


def _pairs(before: Sequence[TurnScore], after: Sequence[TurnScore]) -> list[tuple[TurnScore, TurnScore]]:
    """The turns both versions scored, (before, after)."""
    index = {(t.episode_id, t.turn): t for t in before}
    return [(index[(t.episode_id, t.turn)], t) for t in after if (t.episode_id, t.turn) in index]


def heldout_delta(book_before: Worldbook, book_after: Worldbook, heldout: HeldOut, workspace: Workspace | None = None, *,
                  action: str | Sequence[str] | None = None, resamples: int = 2000, seed: int = 0,
                  progress: Progress | None = None) -> HeldOutDelta:
    """The paired difference in held-out fidelity between two versions, overall and on the edited action(s).

    `action` names the actions `by_action` covers (default: those of the rules the edit touched). A turn
    belongs to an action when either version routes it there. Flipped turns are those whose exact
    match changed, broken ones first.
    """
    started = time.perf_counter()
    workspace = workspace if workspace is not None else Workspace()
    episodes, revision = load_heldout(heldout, workspace)
    before = score_version(book_before, heldout, workspace, episodes=episodes, revision=revision, progress=progress)
    after = score_version(book_after, heldout, workspace, episodes=episodes, revision=revision, progress=progress)
    leakage = _leak_checked(book_after, episodes)
    pairs = _pairs(before.turns, after.turns)
    actions = ([action] if isinstance(action, str) else list(action)) if action is not None else \
        edited_actions(book_before, book_after)
    by_action = {name: _metrics([p for p in pairs if name in (p[0].action, p[1].action)], resamples, seed)
                 for name in actions}
    flipped = [FlippedTurn(kind="fixed" if b.exact_match > a.exact_match else "broken", episode_id=b.episode_id,
                           turn=b.turn, action=b.action, action_text=b.action_text, before=a.prediction,
                           after=b.prediction, target=b.target)
               for a, b in pairs if a.exact_match != b.exact_match]
    flipped.sort(key=lambda t: (t.kind != "broken", t.episode_id, t.turn))
    episode_count = len({a.episode_id for a, _ in pairs})
    source = NumberProvenance(method="harness", model=NO_MODEL, dataset=heldout.dataset, dataset_digest=str(revision),
                              split=heldout.selection(), protocol=PROTOCOL_LABELS["next-obs"],
                              n=len(pairs), unit="paired turns", episodes=episode_count,
                              run=f"{book_after.name}: content {before.book_hash[:8]} → {after.book_hash[:8]}")
    return HeldOutDelta(heldout=heldout, before_hash=before.book_hash, after_hash=after.book_hash, turns=len(pairs),
                        episodes=episode_count, actions=actions, provenance=source,
                        open_loop=_metrics(_pairs(before.open_loop, after.open_loop), resamples, seed),
                        metrics=_metrics(pairs, resamples, seed), by_action=by_action, flipped=flipped,
                        leakage=leakage,
                        computed=[n for n, s in (("before", before), ("after", after)) if not s.cached],
                        seconds=round(time.perf_counter() - started, 3))
