"""Rollouts: the policy acts; the environment's answer comes from one of four sources.

- `imagined`: the model's own rehearse role answers every action;
- `real`: a real environment (one instance per rollout, e.g. BFCL's in-process backends);
- `worldbook`: the worldbook simulator (`worldsmith.sim` harness on a stored worldbook);
- `cache`: real responses seen before for the same call (after the same calls, by default),
  falling back to rehearsal for the rest.

`rollout` runs G rollouts per task in one batch on one key/value cache (`SegmentDecoder`): each
prompt is prefilled once for its G copies, and a rehearse step continues on the cache of the act
step (the act -> rehearse prefix is reused, never recomputed). With `rehearse="always"` the model
also rehearses the steps a source answers, which is how GRPO trains the rehearse role against
real answers; `rehearse="calls"` does so only for actions written as calls (text that is no call
gets a harness parse error, not an environment answer worth rehearsing). `score_rollouts` then
gives every rollout a task reward (the real environment's verdict; non-real rollouts are replayed
in it) and a rehearse reward (how close the rehearsed answers were to the real ones, per step and
their mean).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from worldsmith.envace.data import (
    HANDOVER_ACTIONS,
    ROLE_ACT,
    ROLE_REHEARSE,
    ChatFormat,
    DualRoleStream,
    Templates,
    Transcript,
    environment_prompt,
    parse_call,
    policy_prompt,
)
from worldsmith.envace.generate import DecodeStats, SegmentDecoder
from worldsmith.llm.prompt_lookup import PromptLookup
from worldsmith.util.errors import BadInputError

__all__ = [
    "SOURCES",
    "CacheSource",
    "ImaginedSource",
    "RealSource",
    "Reply",
    "RealResponseCache",
    "RehearseMode",
    "Rollout",
    "RolloutGroup",
    "RolloutSettings",
    "RolloutSource",
    "RolloutStep",
    "TaskSpec",
    "WorldbookSource",
    "make_source_factory",
    "rollout",
    "score_rollouts",
    "task_reward",
    "task_specs",
]

SOURCES = ("imagined", "real", "worldbook", "cache")


# ---------------------------------------------------------------------------------------------
# Tasks


@dataclass(frozen=True)
class TaskSpec:
    """What a rollout starts from: the task, its tools, the opening and the user's later turns."""

    task_id: str
    env: str
    task: str
    tools: list[dict[str, Any]]
    all_tools: list[dict[str, Any]]
    opening: str
    user_turns: list[str] = field(default_factory=list)  # replies to the hand-overs, in order (BFCL)
    turns: int | None = None  # hand-overs that end the episode (BFCL: the user turns)

    @classmethod
    def from_transcript(cls, transcript: Transcript) -> TaskSpec:
        handovers = [exchange for exchange in transcript.exchanges if exchange.kind == "handover"]
        replies = [exchange.response for exchange in handovers if exchange.response is not None]
        first = transcript.exchanges[0].observation if transcript.exchanges else "(start)"
        return cls(
            task_id=transcript.task_id or transcript.episode_id,
            env=transcript.env,
            task=transcript.task,
            tools=list(transcript.tools),
            all_tools=list(transcript.all_tools or transcript.tools),
            opening=first,
            user_turns=replies,
            turns=len(handovers) or None,
        )


def task_specs(transcripts: Iterable[Transcript]) -> list[TaskSpec]:
    """One spec per task id (its first transcript), sorted by task id so runs are reproducible."""
    specs: dict[str, TaskSpec] = {}
    for transcript in transcripts:
        spec = TaskSpec.from_transcript(transcript)
        specs.setdefault(spec.task_id, spec)
    return [specs[key] for key in sorted(specs)]


def _is_handover(action: str) -> bool:
    return parse_call(action)[0] in HANDOVER_ACTIONS


def _is_call(action: str) -> bool:
    """The action is one call with literal keyword arguments (what an environment can answer)."""
    return parse_call(action)[1] is not None


# ---------------------------------------------------------------------------------------------
# Sources


@dataclass
class Reply:
    """A source's answer to one action."""

    text: str
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class RolloutSource(Protocol):
    """Where the environment's answers come from during one rollout."""

    name: str

    def start(self, spec: TaskSpec) -> str:
        """Begin the task; returns the opening observation."""
        ...

    def respond(self, action: str) -> Reply | None:
        """The answer to `action`; None: this source has none (the model rehearses it)."""
        ...

    def close(self) -> None: ...


class ImaginedSource:
    """Every answer is the model's own rehearsal."""

    name = "imagined"

    def start(self, spec: TaskSpec) -> str:
        return spec.opening

    def respond(self, action: str) -> Reply | None:
        return None

    def close(self) -> None:
        return None


class RealSource:
    """A real environment from the registry; one instance per rollout."""

    name = "real"

    def __init__(self, env_name: str) -> None:
        from worldsmith.envs import make

        self.env = make(env_name)
        self.last_info: dict[str, Any] = {}
        self.done = False
        self.errors: list[bool | None] = []  # per answered action: did the environment report an error

    def start(self, spec: TaskSpec) -> str:
        observation, info = self.env.reset(spec.task_id)
        self.last_info, self.done, self.errors = dict(info), False, []
        return observation.text

    def respond(self, action: str) -> Reply | None:
        from worldsmith.envs import EnvError

        try:
            step = self.env.step(action)
        except EnvError as error:  # the environment refused the action outright: say so, as it would
            self.errors.append(True)
            return Reply(f"Error: {error}", False, {"error": True})
        error_flag = step.info.get("error")
        self.errors.append(bool(error_flag) if isinstance(error_flag, bool) else None)
        self.last_info = dict(step.info)
        self.done = bool(step.terminated or step.truncated)
        return Reply(step.observation.text, self.done, dict(step.info))

    def close(self) -> None:
        self.env.close()


class WorldbookSource:
    """A worldbook simulator (the harness by default); hand-overs get the task's recorded user turns."""

    name = "worldbook"

    def __init__(self, book: Any, kind: str = "harness") -> None:
        self.book, self.kind = book, kind
        self.model: Any = None
        self.spec: TaskSpec | None = None
        self.handovers = 0

    def start(self, spec: TaskSpec) -> str:
        from worldsmith.sim.registry import make_world_model

        self.model = make_world_model(self.kind, self.book)
        self.model.start(spec.opening)
        self.spec, self.handovers = spec, 0
        return spec.opening

    def respond(self, action: str) -> Reply | None:
        from worldsmith.traces.model import Action

        assert self.spec is not None and self.model is not None, "start() first"
        if _is_handover(action):
            return _recorded_handover(self.spec, self, action)
        name, arguments = parse_call(action)
        call = Action(name=name or action.strip(), arguments=arguments or {}, raw=action)
        prediction = self.model.predict(call)
        self.model.commit()
        return Reply(prediction.observation, bool(prediction.done), {"route": prediction.audit.route})

    def close(self) -> None:
        self.model = None


def _recorded_handover(spec: TaskSpec, source: Any, action: str) -> Reply | None:
    """The user's next recorded message after a hand-over (None when not recorded: rehearse it)."""
    index = source.handovers
    source.handovers += 1
    if spec.turns is not None and source.handovers >= spec.turns:
        return Reply("", True, {"handover": True})
    if index < len(spec.user_turns):
        return Reply(spec.user_turns[index], False, {"handover": True})
    return None


class RealResponseCache:
    """Real environment responses keyed by task and call (and, by default, the calls before it), kept in the
    trainer state; not `worldsmith.llm.ResponseCache`, which stores model completions on disk."""

    def __init__(self, key: Literal["prefix", "call"] = "prefix") -> None:
        self.key = key
        self.entries: dict[str, str] = {}

    def _key(self, task_id: str, prior: Sequence[str], action: str) -> str:
        norm = [" ".join(item.split()) for item in prior]
        head = norm if self.key == "prefix" else []
        return json.dumps([task_id, head, " ".join(action.split())], ensure_ascii=False)

    def add(self, task_id: str, prior: Sequence[str], action: str, response: str) -> None:
        self.entries[self._key(task_id, prior, action)] = response

    def get(self, task_id: str, prior: Sequence[str], action: str) -> str | None:
        return self.entries.get(self._key(task_id, prior, action))

    def add_transcripts(self, transcripts: Iterable[Transcript]) -> None:
        for transcript in transcripts:
            task = transcript.task_id or transcript.episode_id
            prior: list[str] = []
            for exchange in transcript.exchanges:
                if exchange.response is not None:
                    self.add(task, prior, exchange.action, exchange.response)
                prior.append(exchange.action)

    def __len__(self) -> int:
        return len(self.entries)

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "entries": self.entries}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RealResponseCache:
        cache = cls(data.get("key", "prefix"))
        cache.entries = {str(k): str(v) for k, v in (data.get("entries") or {}).items()}
        return cache


class CacheSource:
    """Cached real responses; a call not seen before is rehearsed (returns None)."""

    name = "cache"

    def __init__(self, cache: RealResponseCache) -> None:
        self.cache = cache
        self.spec: TaskSpec | None = None
        self.prior: list[str] = []
        self.handovers = 0
        self.hits = self.misses = 0

    def start(self, spec: TaskSpec) -> str:
        self.spec, self.prior, self.handovers = spec, [], 0
        return spec.opening

    def respond(self, action: str) -> Reply | None:
        assert self.spec is not None, "start() first"
        found = self.cache.get(self.spec.task_id, self.prior, action)
        self.prior.append(action)
        if _is_handover(action):
            return _recorded_handover(self.spec, self, action)
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        return Reply(found, False, {"cached": True})

    def close(self) -> None:
        return None


def make_source_factory(
    name: str, *, env: str | None = None, book: Any = None, cache: RealResponseCache | None = None
) -> Callable[[], RolloutSource]:
    """A maker of fresh sources of kind `name` (one per rollout)."""
    if name == "imagined":
        return ImaginedSource
    if name == "real":
        if not env:
            raise BadInputError("the real rollout source needs data.env (a registered environment)")
        return lambda: RealSource(env)
    if name == "worldbook":
        if book is None:
            raise BadInputError("the worldbook rollout source needs a worldbook")
        return lambda: WorldbookSource(book)
    if name == "cache":
        if cache is None:
            raise BadInputError("the cache rollout source needs a response cache")
        return lambda: CacheSource(cache)
    raise BadInputError(f"unknown rollout source {name!r} (choose from {', '.join(SOURCES)})")


# ---------------------------------------------------------------------------------------------
# Rollouts


@dataclass
class RolloutStep:
    """One action and the answer the rollout continued with."""

    action: str
    response: str  # what the agent saw next
    answered_by: str  # the source's name, or "rehearsal"
    rehearsed: str | None = None  # the model's rehearsal of the answer, when it made one
    reference: str | None = None  # the real answer (filled by score_rollouts)
    error: bool | None = None  # the real environment said the call failed (info["error"])


@dataclass
class Rollout:
    task_id: str
    index: int  # 0..G-1 within its group
    steps: list[RolloutStep]
    stream: DualRoleStream
    logprobs: list[float]  # sampling log-probs of the stream's target tokens, in column order
    done: bool = False
    final_info: dict[str, Any] = field(default_factory=dict)
    task_reward: float | None = None
    rehearse_reward: float | None = None
    rehearse_rewards: list[float | None] = field(default_factory=list)  # per step: its rehearsal's fidelity
    source: RolloutSource | None = field(default=None, repr=False)  # kept until scored

    @property
    def actions(self) -> list[str]:
        return [step.action for step in self.steps]


@dataclass
class RolloutGroup:
    spec: TaskSpec
    rollouts: list[Rollout]
    source: str


RehearseMode = Literal["needed", "always", "calls"]


@dataclass(frozen=True)
class RolloutSettings:
    """How `rollout` samples: one value the trainer, the benchmarks and the tests pass around, instead of a
    dozen keyword arguments. `rehearse`: rehearse only when the source has no answer (`needed`), always, or
    for every action written as a call; `lookup`: prompt-lookup decoding of the rehearse step (answers mostly
    copy the context; the sampled distribution is unchanged)."""

    group_size: int
    templates: Templates = field(default_factory=Templates)
    max_steps: int = 6
    max_new_tokens: int = 48
    temperature: float = 1.0
    rehearse: RehearseMode = "needed"
    lookup: PromptLookup | None = None

    def rehearses(self, reply: Reply | None, action: str) -> bool:
        """Whether the model rehearses the answer to `action` (it must when the source has none)."""
        return reply is None or self.rehearse == "always" or (self.rehearse == "calls" and _is_call(action))


@dataclass
class _Row:
    """One rollout while it runs: its task, source and what happened so far."""

    spec: TaskSpec
    index: int
    source: RolloutSource
    opening: str
    steps: list[RolloutStep] = field(default_factory=list)
    done: bool = False
    final: dict[str, Any] = field(default_factory=dict)
    handovers: int = 0

    def record(self, action: str, reply: Reply | None, rehearsed: str | None) -> tuple[str, bool]:
        """Add the step; returns what the agent sees next and whether the episode ended."""
        text = reply.text if reply is not None else rehearsed
        assert text is not None, "an action without an answer is rehearsed"
        answered_by = self.source.name if reply is not None else "rehearsal"
        self.steps.append(RolloutStep(action, text, answered_by, rehearsed))
        finished = bool(reply.done) if reply is not None else False
        if reply is not None:
            self.final = reply.info
        if _is_handover(action):
            self.handovers += 1
            finished = finished or (self.spec.turns is not None and self.handovers >= self.spec.turns)
        return text, finished


class _Rollouts:
    """G rollouts per task on one `SegmentDecoder`: rows are (task, copy); a decoder row maps to a rollout row
    through `live` (finished rollouts leave the decoder)."""

    def __init__(self, model: Any, tokenizer: Any, specs: Sequence[TaskSpec], source: Callable[[], RolloutSource],
                 settings: RolloutSettings, generator: Any) -> None:
        self.specs, self.settings = list(specs), settings
        self.fmt = ChatFormat(tokenizer)
        pairs = [(spec, index) for spec in specs for index in range(settings.group_size)]
        sources = [source() for _ in pairs]
        self.rows = [_Row(spec, index, src, src.start(spec)) for (spec, index), src in zip(pairs, sources, strict=True)]
        self.decoder = SegmentDecoder(model, eos_id=self.fmt.eos_id, pad_id=self.fmt.pad_id, generator=generator)
        self.states: list[Any] = []  # the decoder's row states (stream, log-probs), one per rollout row

    def run(self) -> None:
        """Act, answer (source or rehearsal) and observe, up to `max_steps` times or until every rollout ends."""
        logits = self._start()
        live = list(range(len(self.rows)))  # decoder row -> rollout row
        for _ in range(self.settings.max_steps):
            if not live:
                break
            logits, live = self._step(logits, live)

    def _start(self) -> Any:
        """Prefill the prompts: once per task for its G copies when they share it."""
        templates, size = self.settings.templates, self.settings.group_size
        prompts = [self.fmt.opening(policy_prompt(templates, row.spec.env, row.spec.task, row.spec.tools), row.opening)
                   for row in self.rows]
        shared = all(prompts[i] == prompts[i - i % size] for i in range(len(prompts)))
        if shared:
            logits = self.decoder.start([prompts[i * size] for i in range(len(self.specs))], repeats=size,
                                        episode_ids=[f"{spec.task_id}" for spec in self.specs])
        else:
            logits = self.decoder.start(prompts, episode_ids=[f"{row.spec.task_id}#{row.index}" for row in self.rows])
        self.states = list(self.decoder.rows)
        return logits

    def _step(self, logits: Any, live: list[int]) -> tuple[Any, list[int]]:
        """One action per live rollout and its answer; returns the next logits and the rollouts still going."""
        settings, fmt = self.settings, self.fmt
        batch = list(range(len(live)))
        acted = self.decoder.generate(logits, batch, role=ROLE_ACT, max_new_tokens=settings.max_new_tokens,
                                      temperature=settings.temperature)
        actions = {b: fmt.decode(acted[b]).strip() for b in batch}
        replies = {b: self.rows[live[b]].source.respond(actions[b]) for b in batch}
        rehearsed = self._rehearse(live, [b for b in batch if settings.rehearses(replies[b], actions[b])], actions)
        keep: list[int] = []
        chunks: list[list[int]] = []
        for b in batch:
            row = self.rows[live[b]]
            text, finished = row.record(actions[b], replies[b], rehearsed.get(b))
            if finished or not actions[b]:
                row.done = finished
                continue
            keep.append(b)
            chunks.append(fmt.observation(text))
        if not keep:
            return logits, []
        self.decoder.keep(keep)
        return self.decoder.feed(chunks), [live[b] for b in keep]

    def _rehearse(self, live: list[int], batch: list[int], actions: dict[int, str]) -> dict[int, str]:
        """The model's answers to the actions of decoder rows `batch`, each in a rehearse segment on its act cache."""
        if not batch:
            return {}
        settings, fmt = self.settings, self.fmt
        headers: list[list[int] | None] = [None] * len(live)
        for b in batch:
            spec = self.rows[live[b]].spec
            self.decoder.open_segment(b)
            headers[b] = fmt.rehearse_header(
                environment_prompt(settings.templates, spec.env, spec.task, spec.all_tools, actions[b]))
        logits = self.decoder.feed(headers)
        answered = self.decoder.generate(logits, batch, role=ROLE_REHEARSE, max_new_tokens=settings.max_new_tokens,
                                         temperature=settings.temperature, lookup=settings.lookup)
        rehearsed: dict[int, str] = {}
        for b in batch:
            self.decoder.close_segment(b)
            rehearsed[b] = fmt.decode(answered[b]).strip()
        return rehearsed

    def close_sources(self) -> None:
        """Close every source but the real ones (`score_rollouts` still asks those for the verdict)."""
        for row in self.rows:
            if row.source.name != "real":
                row.source.close()

    def groups(self) -> list[RolloutGroup]:
        size = self.settings.group_size
        groups: list[RolloutGroup] = []
        for position, spec in enumerate(self.specs):
            members = []
            for index in range(size):
                number = position * size + index
                row, state = self.rows[number], self.states[number]
                members.append(Rollout(spec.task_id, index, row.steps, state.stream, list(state.logprobs), row.done,
                                       row.final, source=row.source))
            groups.append(RolloutGroup(spec, members, self.rows[0].source.name if self.rows else "none"))
        return groups


def rollout(
    model: Any,
    tokenizer: Any,
    specs: Sequence[TaskSpec],
    source: Callable[[], RolloutSource],
    settings: RolloutSettings,
    *,
    generator: Any = None,
    stats: DecodeStats | None = None,
) -> list[RolloutGroup]:
    """`settings.group_size` rollouts of each task, batched on one cache (see the module docstring). `generator`
    seeds the sampling; `stats` (when given) adds the decoder's counts."""
    import torch

    run = _Rollouts(model, tokenizer, specs, source, settings, generator)
    was_training = bool(getattr(model, "training", False))
    model.eval()
    try:
        with torch.inference_mode():
            run.run()
    finally:
        if was_training:
            model.train()
        run.close_sources()
    if stats is not None:
        stats.add(run.decoder.stats)
    return run.groups()


# ---------------------------------------------------------------------------------------------
# Rewards


def task_reward(
    info: dict[str, Any], kind: Literal["binary", "partial", "shaped"] = "partial", steps: Sequence[RolloutStep] = ()
) -> float:
    """Task success from a real environment's final info.

    binary: `won`; partial: BFCL's share of ground-truth calls run (else `won`); shaped: the mean of
    partial and the share of the rollout's calls the environment ran without an error (a signal a
    weak policy can climb before it ever hits a ground-truth call).
    """
    if kind == "shaped":
        judged = [step.error for step in steps if step.error is not None]
        valid = (sum(1 for error in judged if not error) / len(judged)) if judged else 0.0
        return 0.5 * task_reward(info, "partial") + 0.5 * valid
    calls = info.get("ground_truth_calls")
    if kind == "partial" and isinstance(calls, int) and calls > 0:
        return float(info.get("ground_truth_ok", 0)) / calls
    if "won" in info:
        return float(bool(info["won"]))
    score = info.get("score")
    return float(score) if isinstance(score, int | float) and not isinstance(score, bool) else 0.0


def _finish(env: Any, spec: TaskSpec, info: dict[str, Any]) -> dict[str, Any]:
    """Hand over the remaining user turns so a multi-turn environment gives its verdict."""
    if spec.turns is None:
        return info
    for _ in range(spec.turns + 1):
        step = env.step("respond()")
        info = dict(step.info)
        if step.terminated or step.truncated:
            break
    return info


def score_rollouts(
    groups: Sequence[RolloutGroup],
    *,
    env: str | None,
    reward: Literal["binary", "partial", "shaped"] = "partial",
    rehearse_metric: str = "token_f1",
    cache: RealResponseCache | None = None,
) -> None:
    """Fill each rollout's task reward, rehearse reward and per-step references (the real answers).

    Real rollouts are scored on their own environment (finished with hand-overs when cut short);
    the others are replayed action by action in a fresh real environment, which also gives the
    real answer to every step they imagined. Real answers seen are added to `cache`. Without a
    real environment, only a source's own `won` counts and the rehearse reward stays None.
    """
    from worldsmith.envace.probe import metric_functions

    metric = metric_functions()[rehearse_metric]
    replay_env = None
    try:
        for group in groups:
            spec = group.spec
            for item in group.rollouts:
                handle, item.source = item.source, None
                if isinstance(handle, RealSource):
                    for step, error in zip(item.steps, handle.errors, strict=False):
                        step.reference = step.response
                        step.error = error
                    info = item.final_info if handle.done else _finish(handle.env, spec, handle.last_info)
                    handle.close()
                elif env:
                    if replay_env is None:
                        from worldsmith.envs import make

                        replay_env = make(env)
                    replay_env.reset(spec.task_id)
                    info, finished = {}, False
                    for step in item.steps:
                        if finished:
                            break
                        result = replay_env.step(step.action)
                        step.reference = result.observation.text
                        error = result.info.get("error")
                        step.error = bool(error) if isinstance(error, bool) else None
                        info = dict(result.info)
                        finished = bool(result.terminated or result.truncated)
                    if not finished:
                        info = _finish(replay_env, spec, info)
                else:
                    info = item.final_info
                item.final_info = info
                item.task_reward = task_reward(info, reward, item.steps) if (env or info) else None
                item.rehearse_rewards = [float(metric(step.rehearsed, step.reference))
                                         if step.rehearsed is not None and step.reference is not None else None
                                         for step in item.steps]
                scored = [value for value in item.rehearse_rewards if value is not None]
                item.rehearse_reward = sum(scored) / len(scored) if scored else None
                if cache is not None:
                    prior: list[str] = []
                    for step in item.steps:
                        if step.reference is not None:
                            cache.add(spec.task_id, prior, step.action, step.reference)
                        prior.append(step.action)
    finally:
        if replay_env is not None:
            replay_env.close()
