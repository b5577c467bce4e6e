"""The evaluation protocols, each turning one method on one held-out episode into records.

- **next-obs** (teacher forcing): for every turn t the method starts on the real prefix (turns before t)
  and predicts the observation of the recorded action at t;
- **drift** (open loop): the method starts on the opening only, then predicts and commits every
  recorded action in turn, never seeing a real observation again; fidelity by step, the first step
  that diverges, and whether it says "done" where the real episode ended;
- **w2r** (world to real): a policy acts in `SimEnv` over the method until done or `max_steps`; its
  action sequence is replayed in the real environment (real success), and the same policy also acts
  in the real environment directly (Real). W2R / Real is the simulator's consistency;
- **live** (open loop against the real environment): a policy acts on the episode's task in the real
  environment, and each of its actions also goes to the method running open loop (started on the real
  opening, its own answers as history); the two answers are compared per step, the real one the reference.
  The policy sees the REAL observations, so it stays on realistic paths and every method is scored on the
  same actions (`live_episode` plays them once per episode; seeded, so a resumed run plays the same ones).

Open loop (drift, live) is how a simulator is used: an agent acting in it never supplies the real
observations a teacher-forced (next-obs) method reads, so a run scores both by default, open loop first.

Records are `records.EvalRecord`s (their fields are the run store's columns); the run fills in the
run-level ones. Methods are the world models registered in `sim.registry`, by the same names
(deprecated aliases such as `book` or `harness-schema` resolve to them).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from worldsmith.envs.base import Env
from worldsmith.envs.policies import Policy
from worldsmith.envs.recorder import HANDOVER_PREFIX, record_episode
from worldsmith.envs.replay import replay
from worldsmith.evals.eval_records import JUDGE_COLUMNS, EvalRecord
from worldsmith.evals.judge import Judge
from worldsmith.evals.metrics import METRICS, metric_scores
from worldsmith.llm.base import LLM, Completion, Message
from worldsmith.sim.base import Prediction, WorldModel, action_line
from worldsmith.sim.prompts import prefix_before
from worldsmith.sim.registry import make_world_model, world_model_names, world_model_spec
from worldsmith.sim.registry import needs_llm as _needs_llm
from worldsmith.sim.registry import takes_llm as _takes_llm
from worldsmith.sim.simenv import SimEnv
from worldsmith.traces.model import Action, Episode
from worldsmith.util.errors import BadInputError
from worldsmith.worldbook.model import Worldbook

__all__ = [
    "ABLATIONS",
    "DEFAULT_PROTOCOLS",
    "OPEN_LOOP",
    "PROTOCOLS",
    "PROTOCOL_ORDER",
    "Protocol",
    "UsageMeter",
    "drift_records",
    "first_divergence",
    "live_episode",
    "make_method",
    "method_kind",
    "method_models",
    "needs_llm",
    "next_obs_records",
    "takes_llm",
    "w2r_record",
    "with_handovers",
]

Protocol = Literal["next-obs", "drift", "w2r", "live"]
PROTOCOLS: tuple[Protocol, ...] = ("next-obs", "drift", "w2r", "live")
OPEN_LOOP: tuple[Protocol, ...] = ("live", "drift")  # the model runs on its own answers
PROTOCOL_ORDER: tuple[Protocol, ...] = ("live", "drift", "next-obs", "w2r")  # how a run orders (and reports) them
DEFAULT_PROTOCOLS: tuple[Protocol, ...] = ("drift", "next-obs")  # open loop and teacher forced, together
# The ablations of the issue: no worldbook knowledge, no persistent state, single-shot instead of the tool loop,
# no fallback (each beside the full harness).
ABLATIONS = ("harness", "harness-no-book", "harness-no-state", "harness-single-shot", "harness-no-fallback")


def method_kind(method: str) -> str:
    """The registered world-model name of a method (an alias resolved); ValueError naming the choices."""
    try:
        return world_model_spec(method).name
    except ValueError:
        raise BadInputError(f"unknown method {method!r} (choose from {', '.join(world_model_names())})") from None


def needs_llm(method: str) -> bool:
    return _needs_llm(method_kind(method))


def takes_llm(method: str) -> bool:
    """Whether the method declares it uses a model: only such a method is given the run's model."""
    return _takes_llm(method_kind(method))


NO_MODEL = "none"


def method_models(methods: Sequence[str], llm_spec: str | None) -> dict[str, dict[str, str | None]]:
    """Per method the model it used: `model` (the spec, or "none") and `trained_on` (from the model folder's training
    record, where it has one). A method gets the run's model only when it declares it uses one (`takes_llm`)."""
    from worldsmith.llm.provenance import trained_on

    trained = trained_on(llm_spec)
    return {method: ({"model": llm_spec, "trained_on": trained} if llm_spec and takes_llm(method)
                     else {"model": NO_MODEL, "trained_on": None}) for method in methods}


class UsageMeter:
    """An `LLM` that passes calls through and counts their tokens (the audit only has a total)."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm
        self.spec = llm.spec
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.calls = 0

    def _count(self, batches: list[list[Completion]]) -> None:
        for completions in batches:
            self.calls += 1
            self.prompt_tokens += sum(c.prompt_tokens for c in completions)
            self.completion_tokens += sum(c.completion_tokens for c in completions)

    def chat(self, messages: Sequence[Message], **params: Any) -> list[Completion]:
        return self.chat_many([messages], **params)[0]

    def chat_many(self, conversations: Sequence[Sequence[Message]], **params: Any) -> list[list[Completion]]:
        out = self.llm.chat_many(conversations, **params)
        self._count(out)
        return out

    def take(self) -> tuple[int, int, int]:
        """(calls, prompt tokens, completion tokens) since the last `take`, and start counting afresh."""
        counts = (self.calls, self.prompt_tokens, self.completion_tokens)
        self.calls = self.prompt_tokens = self.completion_tokens = 0
        return counts

    def close(self) -> None:
        self.llm.close()


def make_method(method: str, book: Worldbook, *, llm: LLM | None = None, **options: Any) -> WorldModel:
    """The world model a method name stands for; model methods need `llm`, a method that uses none never gets it
    (`harness` is the harness without a model, whatever the run gives the others; `harness+llm` has one)."""
    kind = method_kind(method)
    if _needs_llm(kind) and llm is None:
        raise BadInputError(f"method {method!r} needs a model: give an LLM spec (--llm)")
    if kind == "nearest":
        options = {k: v for k, v in options.items() if k == "k"}
    return make_world_model(kind, book, llm=llm if _takes_llm(kind) else None, **options)


@dataclass
class Pricing:
    """USD per million prompt / completion tokens (from the model spec's `price_in` / `price_out`)."""

    price_in: float = 0.0
    price_out: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.price_in + completion_tokens * self.price_out) / 1e6


@dataclass
class Scorer:
    """What each prediction is scored with: the text metrics, the judge when there is one, and cost."""

    meter: UsageMeter | None = None
    judge: Judge | None = None
    pricing: Pricing = field(default_factory=Pricing)
    judge_usage: dict[str, int] = field(default_factory=lambda: {"calls": 0, "prompt_tokens": 0,
                                                                  "completion_tokens": 0, "judged": 0, "valid": 0})

    def usage(self, prediction: Prediction | None) -> dict[str, Any]:
        calls, prompt, completion = self.meter.take() if self.meter is not None else (0, 0, 0)
        audit = prediction.audit if prediction is not None else None
        if audit is not None and not (prompt or completion) and audit.tokens:
            prompt = audit.tokens  # a model outside the meter: the audit's total counts as prompt tokens
        return {"model_calls": max(calls, audit.model_calls if audit else 0), "prompt_tokens": prompt,
                "completion_tokens": completion, "latency_s": float(audit.latency_s) if audit else 0.0,
                "cost_usd": round(self.pricing.cost(prompt, completion), 8)}

    def judged(self, episode: Episode, turn: int, reference: str, prediction: str) -> dict[str, Any]:
        empty: dict[str, Any] = dict.fromkeys(JUDGE_COLUMNS)
        if self.judge is None:
            return empty
        history = [(action_line(t.action), t.observation.text) for t in episode.turns[:turn]]
        verdict = self.judge.judge(env_id=episode.env_id, action=action_line(episode.turns[turn].action),
                                   reference=reference, prediction=prediction, task=episode.task, history=history)
        usage = self.judge_usage
        usage["calls"] += verdict.model_calls
        usage["prompt_tokens"] += verdict.prompt_tokens
        usage["completion_tokens"] += verdict.completion_tokens
        usage["judged"] += 1
        usage["valid"] += verdict.valid
        return {"judge_total": verdict.total,
                **{f"judge_{d}": (float(v) if v is not None else None) for d, v in verdict.scores.items()}}


def _turn_record(scorer: Scorer, episode: Episode, turn: int, prediction: Prediction | None,
                 error: str | None) -> EvalRecord:
    recorded = episode.turns[turn]
    reference = recorded.observation.text
    text = prediction.observation if prediction is not None else ""
    scores = metric_scores(text, reference)
    return EvalRecord(
        turn=turn, action=action_line(recorded.action), reference=reference, prediction=text,
        exact_match=scores["exact_match"], edit_similarity=scores["edit_similarity"], token_f1=scores["token_f1"],
        json_f1=scores["json_f1"], **scorer.judged(episode, turn, reference, text),
        route=prediction.audit.route if prediction is not None else "error",
        source=(prediction.audit.source or prediction.audit.route) if prediction is not None else "error",
        rules=list(prediction.audit.rules) if prediction is not None else [],
        **scorer.usage(prediction),
        diverged=None, outcome=prediction.outcome if prediction is not None else "unknown",
        done_pred=bool(prediction.done) if prediction is not None else False, done_real=bool(recorded.done),
        error=error, metrics={name: score for name, score in scores.items() if name not in METRICS},
    )


def _predict(model: WorldModel, action: Any) -> tuple[Prediction | None, str | None]:
    try:
        return model.predict(action), None
    except Exception as failure:  # noqa: BLE001 - one failing prediction is a scored failure, not a lost run
        return None, f"{type(failure).__name__}: {failure}"[:500]


def next_obs_records(model: WorldModel, episode: Episode, scorer: Scorer, *,
                     max_turns: int | None = None) -> list[EvalRecord]:
    """Teacher forcing: each turn predicted from the real prefix before it."""
    out = []
    for t in range(len(episode.turns) if max_turns is None else min(max_turns, len(episode.turns))):
        try:
            model.start(prefix_before(episode, t))  # keeps the log's system prompt at turn 0
        except Exception as failure:  # noqa: BLE001
            out.append(_turn_record(scorer, episode, t, None, f"start failed: {type(failure).__name__}: {failure}"))
            continue
        prediction, error = _predict(model, episode.turns[t].action)
        out.append(_turn_record(scorer, episode, t, prediction, error))
    return out


def first_divergence(records: Sequence[EvalRecord], *, metric: str = "exact_match",
                     threshold: float = 1.0) -> int | None:
    """The first turn whose `metric` is below `threshold` (exact match: any miss); None when none is."""
    for record in records:
        value = record.value(metric)
        if value is None or value < threshold:
            return int(record.turn or 0)
    return None


def drift_records(model: WorldModel, episode: Episode, scorer: Scorer, *, max_turns: int | None = None,
                  divergence_metric: str = "exact_match", divergence_threshold: float = 1.0) -> list[EvalRecord]:
    """Open loop: start on the opening, predict and commit every recorded action; `diverged` from the first miss."""
    out: list[EvalRecord] = []
    failed: str | None = None
    try:
        model.start(prefix_before(episode, 0))
    except Exception as failure:  # noqa: BLE001
        failed = f"start failed: {type(failure).__name__}: {failure}"
    for t in range(len(episode.turns) if max_turns is None else min(max_turns, len(episode.turns))):
        if failed is not None:
            out.append(_turn_record(scorer, episode, t, None, failed))
            continue
        prediction, error = _predict(model, episode.turns[t].action)
        if prediction is not None:
            try:
                model.commit()
            except Exception as failure:  # noqa: BLE001
                error = f"commit failed: {type(failure).__name__}: {failure}"
        out.append(_turn_record(scorer, episode, t, prediction, error))
        if error is not None:
            failed = f"the world model failed at turn {t}: {error}"
    first = first_divergence(out, metric=divergence_metric, threshold=divergence_threshold)
    for record in out:
        record.diverged = first is not None and (record.turn or 0) >= first
    return out


def live_episode(env: Env, policy: Policy, episode: Episode, *, max_steps: int, seed: int | None) -> Episode:
    """The policy on `episode`'s task in the real environment, recorded: the actions and real observations a
    live unit scores every method on (`drift_records` over it). Raises `BadInputError` when the episode names no
    task the environment can start."""
    if not episode.task_id:
        raise BadInputError(f"episode {episode.id!r} has no task id: live needs a task the real environment runs")
    return record_episode(env, policy, episode.task_id, max_steps=max_steps, seed=seed, record_state=False,
                          episode_id=episode.id)


@dataclass
class RealOutcome:
    """The policy in the real environment on one task (computed once per episode, shared by the methods)."""

    success: bool
    steps: int
    error: str | None = None


def real_outcome(env: Env, policy: Policy, task: str, *, max_steps: int, seed: int | None) -> RealOutcome:
    episode = record_episode(env, policy, task, max_steps=max_steps, seed=seed, record_state=False)
    return RealOutcome(success=bool(episode.success), steps=len(episode.turns),
                       error=episode.metadata.get("error"))


def _handover(event: Any) -> Action | None:
    if event.role == "assistant" and (event.name or "").startswith(HANDOVER_PREFIX):
        return Action(name=event.name[len(HANDOVER_PREFIX):], arguments={"text": event.content})
    return None


def with_handovers(episode: Episode, actions: Sequence[Action]) -> tuple[list[Action], bool]:
    """The actions with the recording's hand-overs (e.g. BFCL's replies to the user) put back where they were.

    Hand-overs are the environment's protocol (the next user turn), not something a simulator predicts,
    so a policy that followed the recording gets them replayed with its actions; one that left the
    recording is replayed as it acted. Returns (actions, whether hand-overs were inserted).
    """
    recorded = [turn.action for turn in episode.turns]
    followed = len(actions) <= len(recorded) and all(
        action_line(a) == action_line(r) for a, r in zip(actions, recorded, strict=False))
    has_handovers = any(_handover(e) for turn in episode.turns for e in turn.context) or any(
        _handover(e) for e in episode.final_context)
    if not followed or not has_handovers:
        return list(actions), False
    out: list[Action] = []
    for index, action in enumerate(actions):
        out += [h for e in episode.turns[index].context if (h := _handover(e)) is not None]
        out.append(action)
    if len(actions) == len(recorded):
        out += [h for e in episode.final_context if (h := _handover(e)) is not None]
    return out, True


def w2r_record(model: WorldModel, episode: Episode, scorer: Scorer, *, book: Worldbook, policy: Policy,
               real_env: Env, real: Callable[[], RealOutcome], policy_name: str, max_steps: int = 50,
               seed: int | None = None) -> EvalRecord:
    """One episode of world-to-real: the policy in the simulator, its actions replayed for real, and Real."""
    task = episode.task_id
    if not task:
        return EvalRecord(turn=-1, policy=policy_name, rules=[], sim_steps=0,
                          error=f"episode {episode.id!r} has no task id: it cannot be replayed")
    sim = SimEnv(model, tasks=[episode], book=book, max_steps=max_steps)
    calls = prompt = completion = 0
    latency = 0.0
    done_pred = False
    error = None
    started = time.perf_counter()
    try:
        observation, info = sim.reset(episode.task_id or episode.id)
        policy.reset(sim, observation, info)
        for _ in range(max_steps):
            action = policy.act(observation, info)
            if action is None:
                break
            result = sim.step(action)
            audit = result.info.get("audit") or {}
            usage = scorer.usage(None)
            calls += max(usage["model_calls"], int(audit.get("model_calls", 0)))
            prompt += usage["prompt_tokens"] or (int(audit.get("tokens", 0)) if scorer.meter is None else 0)
            completion += usage["completion_tokens"]
            latency += float(audit.get("latency_s", 0.0))
            observation, info = result.observation, result.info
            if result.terminated:
                done_pred = True
            if result.terminated or result.truncated:
                break
    except Exception as failure:  # noqa: BLE001 - the actions chosen so far are still replayed
        error = f"simulation failed: {type(failure).__name__}: {failure}"[:500]
    actions = sim.actions
    replayed_actions, inserted = with_handovers(episode, actions)
    try:
        replayed = replay(real_env, task, replayed_actions, seed=seed)
        w2r_success = bool(replayed.success)
        done_real = bool(replayed.steps and replayed.steps[-1].terminated)
    except Exception as failure:  # noqa: BLE001
        error = (error + "; " if error else "") + f"replay failed: {type(failure).__name__}: {failure}"[:500]
        w2r_success, done_real = False, False
    outcome = real()
    if outcome.error:
        error = (error + "; " if error else "") + f"real run: {outcome.error}"
    return EvalRecord(
        turn=-1, policy=policy_name, rules=[], route="replayed with the recording's hand-overs" if inserted else None,
        real_success=outcome.success, w2r_success=w2r_success, sim_steps=len(actions), model_calls=calls,
        prompt_tokens=prompt, completion_tokens=completion,
        latency_s=round(latency or (time.perf_counter() - started), 6),
        cost_usd=round(scorer.pricing.cost(prompt, completion), 8), outcome="success" if w2r_success else "failure",
        done_pred=done_pred, done_real=done_real, error=error)
