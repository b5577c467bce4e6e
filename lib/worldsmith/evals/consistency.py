"""Consistency: does a simulator behave like a stateful API at all, whatever the recordings say about the values?

    from worldsmith.evals.consistency import ConsistencyConfig, check_consistency
    report = check_consistency(book, ConsistencyConfig(method="harness", sessions=20, seed=0), book_version=v)
    report.invariants["answers_about_id"].rate        # per invariant; report.tools[tool][invariant] per tool
    report.save(run_dir)                               # <run_dir>/consistency.json, atomically

The world model is driven OPEN LOOP (predict, then commit its own answer; no real observation is ever fed) through
probe sessions made from the book alone (`evals.consistency_plan`): reads and writes of ids the recordings named
and of ids shaped like them that they never named (what an unseen entity gets is exactly what is measured).
Each session picks one id argument (`order_id`), a pool of two seen and two unseen ids, and takes `steps` probe
steps: a read of a pool id (repeated at once half the time), a write of one (followed by the read the recordings
show agreeing with it, if any), or a recorded call of a tool without an id. Five invariants are counted
(`consistency_report.INVARIANTS`): repeated reads agree; a read answers about the id asked; existence is stable
between writes; the four spellings of a call answer the same (asked aside from the same point: `predict_aside`,
else a fresh model started on the same history); a write and the next read agree where the recordings do.
Deterministic for a seed (a world model that is deterministic itself).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worldsmith.evals.consistency_checks import (
    SPELLINGS,
    answers_about,
    borrowed,
    same_answer,
    shows_record,
    spellings,
    write_read_agreement,
)
from worldsmith.evals.consistency_plan import ProbePlan, ToolProfile, plan_probes
from worldsmith.evals.consistency_report import INVARIANTS, ConsistencyReport, Tally, Violation, read_report
from worldsmith.llm.base import LLM
from worldsmith.llm.provenance import trained_on
from worldsmith.sim.base import HistoryItem, WorldModel, episode_prefix
from worldsmith.sim.factory import DEFAULT_WORLD_MODEL, make_world_model
from worldsmith.traces.model import Action
from worldsmith.util.errors import BadInputError
from worldsmith.worldbook.model import Worldbook

__all__ = ["INVARIANTS", "ConsistencyConfig", "ConsistencyReport", "ProbePlan", "Tally", "Violation",
           "check_consistency", "plan_probes", "read_report"]

CALL_CHARS = 200  # a call's text in a violation example
ANSWER_CHARS = 300  # an answer's text in a violation example
WRITE_SHARE = 0.25  # of a session's steps, writes (when the session's id argument has writes)
FREE_SHARE = 0.15  # recorded calls of tools without an id argument
REPEAT_SHARE = 0.5  # reads repeated at once


@dataclass(frozen=True)
class ConsistencyConfig:
    """How many probe sessions of which world model; `max_examples` violations kept per invariant and tool."""

    method: str = DEFAULT_WORLD_MODEL
    sessions: int = 20
    steps: int = 12
    seed: int = 0
    max_examples: int = 3

    def __post_init__(self) -> None:
        if self.sessions < 1 or self.steps < 1:
            raise BadInputError(f"sessions and steps must be at least 1, not {self.sessions} and {self.steps}")
        if self.max_examples < 0:
            raise BadInputError(f"max_examples must be at least 0, not {self.max_examples}")


def _call_text(name: str, arguments: dict[str, Any]) -> str:
    return f"{name} {json.dumps(arguments, ensure_ascii=False)}"[:CALL_CHARS]


class _Session:
    """One open-loop probe session on a fresh world model: every call is checked, then its answer committed."""

    def __init__(self, number: int, factory: Callable[[], WorldModel], book: Worldbook,
                 report: ConsistencyReport, config: ConsistencyConfig, plan: ProbePlan) -> None:
        self.number, self.factory, self.report, self.config, self.plan = number, factory, report, config, plan
        self.prefix = episode_prefix("", env_id=book.env_id, episode_id=f"consistency-{number}")
        self.model = factory()
        self.model.start(self.prefix)
        self.history: list[HistoryItem] = []
        self.step = 0
        self.existence: dict[tuple[str, str], tuple[bool, str, str, str]] = {}  # (argument, id) -> what was seen

    def count(self, invariant: str, tool: str, violated: bool, calls: list[str], answers: list[str],
               note: str = "") -> None:
        self.report.count(invariant, tool, violated)
        kept = sum(1 for v in self.report.examples if v.invariant == invariant and v.tool == tool)
        if violated and kept < self.config.max_examples:
            self.report.examples.append(Violation(
                invariant=invariant, tool=tool, session=self.number, step=self.step, calls=calls,
                answers=[answer[:ANSWER_CHARS] for answer in answers], note=note))

    def _aside(self, action: Action | str | dict[str, Any]) -> str:
        """What the model answers to `action` from the current point, leaving it there."""
        self.report.predictions += 1
        predict_aside = getattr(self.model, "predict_aside", None)
        if callable(predict_aside):
            return str(predict_aside(action).observation)
        fresh = self.factory()
        fresh.start(episode_prefix("", env_id=self.prefix.env_id, history=self.history,
                                   episode_id=self.prefix.id))
        return fresh.predict(action).observation

    def call(self, tool: str, arguments: dict[str, Any]) -> str:
        """Predict the call, check its other spellings from the same point, commit it; its answer."""
        forms = spellings(tool, arguments)
        structured = Action(name=tool, arguments=dict(arguments))
        self.report.predictions += 1
        answer = self.model.predict(structured).observation
        others = {name: self._aside(forms[name]) for name in SPELLINGS[1:]}
        differ = [name for name, other in others.items() if not same_answer(answer, other)]
        call = _call_text(tool, arguments)
        self.count("spelling", tool, bool(differ), [f"{name}: {call}" for name in ("action", *differ)],
                    [answer, *(others[name] for name in differ)],
                    f"differs from the Action's answer: {', '.join(differ)}" if differ else "")
        self.model.commit()
        self.history.append(HistoryItem(action=structured, observation=answer))
        return answer

    def read(self, profile: ToolProfile, arguments: dict[str, Any], repeat: bool) -> str:
        answer = self.call(profile.name, arguments)
        self._about(profile, arguments, answer)
        self._existence(profile, arguments, answer)
        if repeat:
            again = self.call(profile.name, arguments)
            call = _call_text(profile.name, arguments)
            self.count("repeated_reads", profile.name, not same_answer(answer, again), [call, call], [answer, again])
        return answer

    def write(self, profile: ToolProfile, arguments: dict[str, Any]) -> str:
        answer = self.call(profile.name, arguments)
        self._about(profile, arguments, answer)
        self._forget(arguments, answer)
        return answer

    def other(self, profile: ToolProfile, arguments: dict[str, Any]) -> str:
        answer = self.call(profile.name, arguments)
        self._forget(arguments, answer)
        return answer

    def _about(self, profile: ToolProfile, arguments: dict[str, Any], answer: str) -> None:
        if not profile.answers_about_id or profile.id_key is None or profile.id_argument not in arguments:
            return
        asked = arguments[profile.id_argument]
        about = answers_about(answer, profile.id_key, asked)
        if about is not None:
            copied = borrowed(answer, profile.id_key, asked, self.plan.recorded) if about else None
            why = (f"asked {profile.id_argument}={asked!r}; the answer's {profile.id_key} is another entity's"
                   if not about else f"asked {profile.id_argument}={asked!r}; the answer is the recorded "
                   f"{profile.id_key}={copied!r} with the id swapped in" if copied is not None else "")
            self.count("answers_about_id", profile.name, bool(why), [_call_text(profile.name, arguments)], [answer],
                       why)

    def _existence(self, profile: ToolProfile, arguments: dict[str, Any], answer: str) -> None:
        """Existence is tracked per (id argument, id) over the reads that answer about their id."""
        if not profile.answers_about_id or profile.id_argument not in arguments:
            return
        key = (profile.id_argument, str(arguments[profile.id_argument]))
        exists = shows_record(answer)
        if not exists and not self.plan.absent(profile.name, profile.id_key, key[1], answer):
            return  # an error that says nothing of whether the entity exists (a bad access token)
        call = _call_text(profile.name, arguments)
        before = self.existence.get(key)
        if before is not None:
            was, tool, earlier_call, earlier = before
            self.count("stable_existence", profile.name, was != exists, [earlier_call, call], [earlier, answer],
                        f"{'exists' if was else 'not found'} by {tool}, then {'exists' if exists else 'not found'}"
                        if was != exists else "")
        self.existence[key] = (exists, profile.name, call, answer)

    def _forget(self, arguments: dict[str, Any], answer: str) -> None:
        """A write (or a call of unknown effect) may create or delete what it names: existence starts over for
        every id its arguments or its answer name."""
        named = {str(v) for v in arguments.values() if isinstance(v, str | int) and not isinstance(v, bool)}
        self.existence = {key: seen for key, seen in self.existence.items()
                          if key[1] not in named and key[1] not in answer}


def _with_id(rng: random.Random, profile: ToolProfile, ident: Any) -> dict[str, Any]:
    """A recorded call of the tool with its id argument set to `ident`."""
    arguments = dict(rng.choice(profile.calls))
    if profile.id_argument is not None:
        arguments[profile.id_argument] = ident
    return arguments


def _play_session(session: _Session, plan: ProbePlan, rng: random.Random, steps: int) -> None:
    groups = sorted({t.id_argument for t in plan.tools_of("read") if t.id_argument is not None
                     and (plan.seen_ids.get(t.id_argument) or plan.unseen_ids.get(t.id_argument))})
    free = [t for t in plan.tools.values() if t.calls and t.role != "write"
            and (t.id_argument is None or t.id_argument not in groups)]
    argument = rng.choice(groups) if groups else None
    pool: list[Any] = []
    if argument is not None:
        seen, unseen = plan.seen_ids.get(argument, []), plan.unseen_ids.get(argument, [])
        pool = rng.sample(seen, min(2, len(seen))) + rng.sample(unseen, min(2, len(unseen)))
    reads = plan.tools_of("read", argument) if argument is not None else []
    writes = plan.tools_of("write", argument) if argument is not None else []
    for step in range(steps):
        session.step = step
        roll = rng.random()
        if writes and roll < WRITE_SHARE:
            profile, ident = rng.choice(writes), rng.choice(pool)
            write_arguments = _with_id(rng, profile, ident)
            written = session.write(profile, write_arguments)
            pairs = [p for p in plan.pairs.values() if p.write == profile.name
                     and plan.tools[p.read].id_argument == argument]
            if pairs:
                pair = rng.choice(pairs)
                reader = plan.tools[pair.read]
                arguments = _with_id(rng, reader, ident)
                read = session.read(reader, arguments, repeat=False)
                agreement = write_read_agreement(written, read, ident, pair.fields)
                if agreement is not None:
                    session.count("write_then_read", profile.name, not agreement[0],
                                   [_call_text(profile.name, write_arguments), _call_text(reader.name, arguments)],
                                   [written, read], agreement[1])
        elif free and (roll < WRITE_SHARE + FREE_SHARE or not reads):
            profile = rng.choice(free)
            arguments = dict(rng.choice(profile.calls))
            if profile.role == "read":
                session.read(profile, arguments, repeat=rng.random() < REPEAT_SHARE)
            else:
                session.other(profile, arguments)
        elif reads:
            profile = rng.choice(reads)
            session.read(profile, _with_id(rng, profile, rng.choice(pool)), repeat=rng.random() < REPEAT_SHARE)


def check_consistency(book: Worldbook, config: ConsistencyConfig = ConsistencyConfig(), *,
                      factory: Callable[[], WorldModel] | None = None, llm: LLM | None = None,
                      book_version: str | None = None, run_dir: str | Path | None = None,
                      progress: Callable[[int, int], None] | None = None) -> ConsistencyReport:
    """Probe a world model of `book` (`config.method` from the registry, on `llm` if it takes one; or `factory`)
    through `config.sessions` open-loop sessions and count each invariant's checks and violations.
    `progress(done, total)` after each session; `run_dir`: the report is also stored there (atomically)."""
    make = factory or (lambda: make_world_model(config.method, book, llm=llm))
    plan = plan_probes(book, seed=config.seed)
    report = ConsistencyReport(method=config.method, book=book.name, book_version=book_version, seed=config.seed,
                               sessions=config.sessions, steps=config.steps, plan=plan.to_json())
    for number in range(config.sessions):
        rng = random.Random(f"consistency:{config.seed}:{number}")
        _play_session(_Session(number, make, book, report, config, plan), plan, rng, config.steps)
        if progress is not None:
            progress(number + 1, config.sessions)
    spec = llm.spec if llm is not None else None
    report.provenance = report.source(model=spec or ("none" if factory is None else None), trained_on=trained_on(spec),
                                      run=Path(run_dir).name if run_dir is not None else None, recorded=True)
    if run_dir is not None:
        report.save(run_dir)
    return report
