"""One evaluation unit (a method on one episode): what `run_eval` computes in this process, in a process
pool or as a Ray task, with the same code.

`UnitComputer` opens what units share once per process (the methods per fold, the model, the judge,
W2R's real environments and policies) and turns a unit into its journal entry; the driver alone
writes the journal. `eval_unit` is the worker-side entry point: its context (the resolved config,
the books and their evidence families) is rebuilt once per worker process and kept for the next units.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from worldsmith.envs.base import Env
from worldsmith.evals.envmatch import construction_actions
from worldsmith.evals.eval_records import EvalRecord, Journal
from worldsmith.evals.judge import Judge, open_judge
from worldsmith.evals.novelty import MAX_NOVEL_VALUES, NoveltyIndex
from worldsmith.evals.protocols import (
    OPEN_LOOP,
    Pricing,
    RealOutcome,
    Scorer,
    UsageMeter,
    drift_records,
    live_episode,
    make_method,
    next_obs_records,
    real_outcome,
    takes_llm,
    w2r_record,
)
from worldsmith.traces.model import Episode
from worldsmith.util.errors import BadInputError
from worldsmith.workspace.layout import env_family
from worldsmith.worldbook.build import trajectory_family
from worldsmith.worldbook.model import Worldbook

if TYPE_CHECKING:
    from worldsmith.evals.run import EvalConfig

__all__ = ["PartView", "UnitComputer", "UnitPart", "eval_unit", "unit_context", "unit_payload"]


class PartView(Protocol):
    """What a unit needs of its part of the run: the book, its evidence families, the fold (or None)."""

    book: Worldbook
    families: set[str]
    fold: int | None

    @property
    def novelty(self) -> NoveltyIndex: ...


@dataclass
class UnitPart:
    """A part of the run as a worker rebuilds it from the context."""

    book: Worldbook
    families: set[str] = field(default_factory=set)
    fold: int | None = None

    @cached_property
    def novelty(self) -> NoveltyIndex:
        return NoveltyIndex.for_book(self.book)


class UnitComputer:
    """Computes units into journal entries; opens each model, the judge and real environment once."""

    def __init__(self, config: EvalConfig, root: Path, llm_spec: str | None, judge_spec: str | None,
                 journal: Journal | None = None) -> None:
        self.config, self.root = config, root
        self.llm_spec, self.judge_spec = llm_spec, judge_spec
        self.journal = journal  # the driver's: W2R reuses another method's real outcome from it
        self.models: dict[tuple[int | None, str], Any] = {}  # (fold, method)
        self.meters: dict[str, UsageMeter] = {}
        self.judge: Judge | None = None
        self.shared_llm: Any = None
        self.real_envs = _RealEnvs(config.real_env)
        self.policies = _Policies(config, root)
        self.real_cache: dict[str, RealOutcome] = {}
        self.novel: dict[tuple[str, bool, bool], list[list[str]]] = {}  # per (episode, live, open loop)
        self.live: dict[str, Episode] = {}  # per episode: the live protocol's real episode
        self.seen_actions: dict[int | None, set[str]] = {}  # per fold: the actions of the book's construction data

    def _model(self, part: PartView, method: str) -> Any:
        key = (part.fold, method)
        if key not in self.models:
            llm = None
            if self.llm_spec and takes_llm(method):  # only a method that declares a model gets one
                if self.shared_llm is None:
                    from worldsmith.llm.tracked import open_llm

                    self.shared_llm = open_llm(self.llm_spec, self.root, component="eval")
                llm = self.meters.setdefault(method, UsageMeter(self.shared_llm))
            self.models[key] = make_method(method, part.book, llm=llm, max_tokens=self.config.max_tokens)
        return self.models[key]

    def compute(self, part: PartView, episode: Episode, method: str, protocol: str | None = None) -> dict[str, Any]:
        """The journal entry of `method` on `episode` under `protocol` (default: the run's primary): its records,
        seconds and judge usage."""
        config = self.config
        protocol = protocol or config.primary
        model = self._model(part, method)
        if self.judge is None and self.judge_spec and protocol != "w2r":
            self.judge = open_judge(self.judge_spec, self.root)
        scorer = Scorer(meter=self.meters.get(method), judge=self.judge, pricing=_pricing(self.llm_spec))
        began = time.perf_counter()
        scored = episode
        if protocol == "next-obs":
            records = next_obs_records(model, episode, scorer, max_turns=config.max_turns)
        elif protocol in ("drift", "live"):
            scored = self._live(part, episode) if protocol == "live" else episode
            records = drift_records(model, scored, scorer, max_turns=config.max_turns,
                                    divergence_metric=config.divergence_metric,
                                    divergence_threshold=config.divergence_threshold)
        else:
            records = [_w2r(config, model, episode, scorer, part.book, self.real_envs, self.real_cache,
                            self.journal, self.policies)]
        if protocol != "w2r":
            live = protocol == "live"
            _mark_novelty(records, self._novelty(part, scored, live, open_loop=protocol in OPEN_LOOP),
                          self._novelty(part, scored, live, open_loop=False))
            if part.fold not in self.seen_actions:
                self.seen_actions[part.fold] = construction_actions(part.book)
            _mark_unseen_actions(records, scored, self.seen_actions[part.fold])
        family = trajectory_family(episode)
        for record in records:
            record.run, record.protocol, record.method = config.name, protocol, method
            record.env_id, record.episode_id, record.family = episode.env_id, episode.id, family
            record.task_seen, record.fold = family in part.families, part.fold
            if protocol == "live":
                record.policy = config.policy
        return {"method": method, "episode_id": episode.id, "protocol": protocol, "records": records,
                "seconds": round(time.perf_counter() - began, 4), "judge_usage": scorer.judge_usage}

    def _novelty(self, part: PartView, episode: Episode, live: bool, *, open_loop: bool) -> list[list[str]]:
        """Each turn's novel values (the same for every method) of the recorded or `live` episode, open loop or
        teacher forced."""
        key = (episode.id, live, open_loop)
        if key not in self.novel:
            self.novel[key] = part.novelty.episode(episode, self.config.max_turns, open_loop=open_loop)
        return self.novel[key]

    def _live(self, part: PartView, episode: Episode) -> Episode:
        """The policy's episode on the real environment for `episode`'s task, played once for every method."""
        if episode.id not in self.live:
            seed = episode.metadata.get("seed") if isinstance(episode.metadata.get("seed"), int) else None
            self.live[episode.id] = live_episode(self.real_envs.for_episode(episode),
                                                 self.policies.get(episode.id, "live", part.book), episode,
                                                 max_steps=self.config.max_steps, seed=seed)
        return self.live[episode.id]

    def close(self) -> None:
        self.real_envs.close()
        self.policies.close()
        for model in self.models.values():
            closer = getattr(model, "close", None)
            if callable(closer):
                closer()
        if self.shared_llm is not None:
            self.shared_llm.close()
        if self.judge is not None:
            closer = getattr(self.judge.llm, "close", None)
            if callable(closer):
                closer()


def unit_context(key: str, config: EvalConfig, root: Path, llm_spec: str | None, judge_spec: str | None,
                 parts: list[PartView]) -> dict[str, Any]:
    """What every worker needs, as plain JSON values. A worker keeps its state for the next unit with the same
    `key` (the run's fingerprint) and workspace: another run, or the same in another workspace, starts afresh."""
    return {"key": f"{key}@{root}", "config": config.model_dump(mode="json"), "root": str(root), "llm_spec": llm_spec,
            "judge_spec": judge_spec,
            "parts": [{"book": p.book.model_dump(mode="json"), "families": sorted(p.families), "fold": p.fold}
                      for p in parts]}


def unit_payload(part: int, episode: Episode, method: str, protocol: str) -> dict[str, Any]:
    return {"part": part, "episode": episode.model_dump(mode="json"), "method": method, "protocol": protocol}


_WORKER_STATE: dict[str, tuple[UnitComputer, list[UnitPart]]] = {}  # per worker process: the run it serves


def eval_unit(context: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """A unit in a worker process: the context is rebuilt on the first unit of a run and kept for the next."""
    from worldsmith.evals.run import EvalConfig

    key = context["key"]
    if key not in _WORKER_STATE:
        for computer, _ in _WORKER_STATE.values():
            computer.close()
        _WORKER_STATE.clear()
        config = EvalConfig.model_validate(context["config"])
        parts = [UnitPart(Worldbook.model_validate(p["book"]), set(p["families"]), p["fold"]) for p in context["parts"]]
        computer = UnitComputer(config, Path(context["root"]), context["llm_spec"], context["judge_spec"])
        _WORKER_STATE[key] = (computer, parts)
    computer, parts = _WORKER_STATE[key]
    return computer.compute(parts[payload["part"]], Episode.model_validate(payload["episode"]), payload["method"],
                            payload["protocol"])


def _pricing(spec: str | None) -> Pricing:
    if not spec:
        return Pricing()
    from worldsmith.llm.spec import parse_spec

    options = parse_spec(spec).options
    return Pricing(float(options.get("price_in", 0.0) or 0.0), float(options.get("price_out", 0.0) or 0.0))


class _RealEnvs:
    """Real environments for W2R, built once per (name, kwargs) and closed at the end."""

    def __init__(self, override: str | None) -> None:
        self.override = override
        self.envs: dict[str, Env] = {}

    def for_episode(self, episode: Episode) -> Env:
        from worldsmith.envs.registry import spec

        env = episode.metadata.get("env")
        recorded: dict[str, Any] = env if isinstance(env, dict) else {}
        name = self.override or recorded.get("name") or env_family(episode.env_id)
        if not name:
            raise BadInputError(f"episode {episode.id!r}: no real environment named (set real_env / --real-env)")
        given = recorded.get("kwargs")
        kwargs: dict[str, Any] = given if not self.override and isinstance(given, dict) else {}
        key = f"{name}:{orjson.dumps(kwargs, option=orjson.OPT_SORT_KEYS).decode()}"
        if key not in self.envs:
            self.envs[key] = spec(name).make(**kwargs)
        return self.envs[key]

    def close(self) -> None:
        for env in self.envs.values():
            env.close()


class _Policies:
    """The W2R or live policy per (episode, side): seeded from the run seed and the episode id, so a resumed run's
    random choices are the same; a model-backed policy is opened once for the run."""

    def __init__(self, config: EvalConfig, root: Path) -> None:
        self.config, self.root = config, root
        self._shared: Any = None

    def get(self, episode_id: str, side: str, book: Worldbook) -> Any:
        from worldsmith.envs.policies import make_policy

        seed = self.config.seed * 1_000_003 + zlib.crc32(f"{episode_id}/{side}".encode())
        if self.config.policy == "llm":
            if self._shared is None:
                self._shared = make_policy("llm", seed=self.config.seed, model=self.config.llm,
                                           workspace_root=str(self.root))
            return self._shared
        if self.config.policy == "exploring":  # the book's uncertainty picks its detours
            from worldsmith.sim.exploring import ExploringPolicy

            return ExploringPolicy(book, seed=seed)
        return make_policy(self.config.policy, seed=seed)

    def close(self) -> None:
        closer = getattr(getattr(self._shared, "llm", None), "close", None)
        if callable(closer):
            closer()


def _mark_unseen_actions(records: list[EvalRecord], episode: Episode, seen: set[str]) -> None:
    """Each turn's record says whether its action (tool) never appears in the book's construction data."""
    for record in records:
        turn = record.turn if record.turn is not None else -1
        record.unseen_action = episode.turns[turn].action.name not in seen if 0 <= turn < len(episode.turns) \
            else None


def _mark_novelty(records: list[EvalRecord], novel: list[list[str]], teacher_forced: list[list[str]]) -> None:
    """Each turn's record says whether its observation was knowable under its protocol (and shows a few of the
    values that were not), and whether it was teacher forced (`novel_tf`, the same on a next-obs record)."""
    for record in records:
        values = novel[record.turn or 0]
        record.novel, record.novel_values = bool(values), values[:MAX_NOVEL_VALUES]
        record.novel_tf = bool(teacher_forced[record.turn or 0])


def _w2r(config: EvalConfig, model: Any, episode: Episode, scorer: Scorer, book: Worldbook, real_envs: _RealEnvs,
         real_cache: dict[str, RealOutcome], journal: Journal | None, policies: _Policies) -> EvalRecord:
    """One W2R unit; the policy's real outcome on the episode's task is computed once for every method."""
    env = real_envs.for_episode(episode)
    seed = episode.metadata.get("seed") if isinstance(episode.metadata.get("seed"), int) else None

    def real() -> RealOutcome:
        if episode.id not in real_cache:
            finished = journal.units.items() if journal is not None else ()  # in a worker: none
            for (_, episode_id, _), unit in finished:  # a resumed run: another method's record has it
                first: EvalRecord | None = unit["records"][0] if unit["records"] else None
                if episode_id == episode.id and first is not None and first.real_success is not None:
                    real_cache[episode.id] = RealOutcome(first.real_success, 0)
                    break
            else:
                real_cache[episode.id] = real_outcome(env, policies.get(episode.id, "real", book), episode.task_id or "",
                                                      max_steps=config.max_steps, seed=seed)
        return real_cache[episode.id]

    return w2r_record(model, episode, scorer, book=book, policy=policies.get(episode.id, "sim", book), real_env=env,
                      real=real, policy_name=config.policy, max_steps=config.max_steps, seed=seed)
