"""Evaluate an EnvACE checkpoint in real environments, with and without test-time rehearsal.

The same checkpoint plays the same tasks once per method: `plain` (act only) and each rehearsal
budget (`k2`, `n4`, `k1-irr`, ...). Success rates and partial scores come with paired bootstrap
intervals over tasks (`worldsmith.evals.bootstrap.summarize`, tasks as clusters), so "k2 vs plain"
is the mean per-task difference with its interval, not two overlapping bars. Costs (model calls,
prompt / cached / generated tokens, wall time) are reported per method: rehearsal is bought with
compute, and the prefix cache's share is visible in `cached_tokens`.

BFCL first: its backends run in-process, so a task takes seconds. An episode that runs out of
steps on BFCL is closed with empty hand-overs (not recorded as the policy's actions) so the
checker still scores the ground-truth calls that ran (`score`); success needs every call of every
turn. Other environments (ALFWorld, TextWorld, ...) score `won` and the environment's own score.

Run store (`out`): `config.json`, `records.jsonl` (one line per method x task), `rehearsals.jsonl`
(what each committed call rehearsed), `episodes.jsonl` (the real episodes, native format),
`report.json`; every file written atomically.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worldsmith.envace.rehearsal import RehearsalConfig, RehearsalPolicy, load_checkpoint_llm, templates_for_checkpoint
from worldsmith.envs import Env, EnvError, make
from worldsmith.envs.recorder import EpisodeRecorder
from worldsmith.traces.model import Episode
from worldsmith.util.atomic import atomic_write, atomic_write_json
from worldsmith.util.errors import BadInputError
from worldsmith.util.progress import Progress

__all__ = [
    "METRICS",
    "EvalResult",
    "EvalSettings",
    "TaskRecord",
    "evaluate_checkpoint",
    "training_task_ids",
]

METRICS = ("success", "score")


class EvalSettings(BaseModel):
    """What to evaluate: a checkpoint, an environment and its tasks, the rehearsal budgets to compare."""

    model_config = ConfigDict(extra="forbid")

    checkpoint: str = Field(description="a checkpoint folder (weights + tokenizer), e.g. <run>/checkpoints/step-40")
    env: str = "bfcl"
    env_kwargs: dict[str, Any] = Field(default_factory=dict, description="e.g. {'categories': ['multi_turn_base']}")
    tasks: list[str] = Field(default_factory=list, description="task ids (default: the first n_tasks)")
    n_tasks: int = Field(default=5, ge=1)
    exclude_training_tasks: bool = Field(default=True, description="skip tasks the checkpoint's run trained on")
    budgets: list[RehearsalConfig] = Field(default_factory=lambda: [RehearsalConfig(k=1)],
                                           description="rehearsal settings compared with the plain policy")
    max_steps: int = Field(default=20, ge=1, description="actions per episode")
    resamples: int = Field(default=2000, ge=100)
    seed: int = 0
    device: str | None = None
    threads: int | None = Field(default=None, ge=1)

    @classmethod
    def build(cls, checkpoint: str | Path, *, env: str = "bfcl", rehearse: int = 1, parallel: int = 0,
              depth: int = 1, irreversible_only: bool = False, **options: Any) -> EvalSettings:
        """Settings for one rehearsal budget (K sequential and/or N parallel) against the plain policy."""
        budget = RehearsalConfig(k=rehearse, n=parallel, depth=depth, irreversible_only=irreversible_only,
                                 seed=int(options.get("seed", 0)))
        budgets = [budget] if budget.rehearses else []
        try:
            return cls(checkpoint=str(checkpoint), env=env, budgets=budgets, **options)
        except ValidationError as error:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
            raise BadInputError(f"envace eval settings: {problems}") from None


@dataclass
class TaskRecord:
    """One method on one task: outcome, partial score and what it cost."""

    method: str
    task: str
    success: float
    score: float
    steps: int
    finished: bool  # the episode ended by itself (not by max_steps)
    rehearsed_steps: int = 0
    changed_steps: int = 0
    model_calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class EvalResult:
    """Per-task records, the report (means, paired differences, costs), the episodes and where it was written."""

    settings: EvalSettings
    records: list[TaskRecord]
    report: dict[str, Any]
    episodes: list[Episode] = field(default_factory=list)
    rehearsals: list[dict[str, Any]] = field(default_factory=list)
    out: Path | None = None

    def summary(self) -> dict[str, Any]:
        return {"out": str(self.out) if self.out else None, **self.report}


# ---------------------------------------------------------------------------------------------
# Tasks


def training_task_ids(run_config: dict[str, Any] | None) -> set[str]:
    """Task ids of the episodes a run trained on (its data paths or workspace dataset); empty if unknown."""
    if not run_config:
        return set()
    data = run_config.get("data") or {}
    episodes: Iterable[Episode] = ()
    if data.get("paths"):
        from worldsmith.envace.config import resolve_path
        from worldsmith.traces import read_traces

        paths = [resolve_path(path) for path in data["paths"]]
        if all(path.exists() for path in paths):
            episodes = (item for item in read_traces(paths) if isinstance(item, Episode))
    elif data.get("dataset"):
        from worldsmith.workspace import DatasetNotFound, Workspace

        try:
            dataset = Workspace(run_config.get("workspace")).dataset(str(data["dataset"]))
            episodes = dataset.iter_episodes(data.get("split"))
        except DatasetNotFound:
            episodes = ()
    return {episode.task_id for episode in episodes if episode.task_id}


def _choose_tasks(env: Env, settings: EvalSettings, excluded: set[str]) -> list[str]:
    if settings.tasks:
        return list(settings.tasks)
    chosen = [task for task in env.tasks() if task not in excluded][: settings.n_tasks]
    if not chosen:
        raise BadInputError(f"environment {settings.env!r} lists no tasks to evaluate (give --tasks)")
    return chosen


# ---------------------------------------------------------------------------------------------
# Playing


def _bfcl_close(env: Env) -> dict[str, Any]:
    """Hand over the remaining BFCL turns (not recorded) so the checker scores the calls that ran; {} if it cannot."""
    for _ in range(64):
        try:
            step = env.step("respond()")
        except EnvError:
            return {}
        if step.terminated:
            return step.info
    return {}


def _outcome(env_name: str, recorder: EpisodeRecorder, closing: dict[str, Any]) -> tuple[float, float]:
    """(success, score): BFCL's share of ground-truth calls run for the score, else the env's own score."""
    info = closing or recorder.last_info
    won = bool(info.get("won")) if recorder.error is None else False
    if env_name == "bfcl" and info.get("ground_truth_calls"):
        return float(won), float(info.get("ground_truth_ok", 0)) / float(info["ground_truth_calls"])
    score = info.get("score")
    if isinstance(score, int | float) and not isinstance(score, bool):
        return float(won), float(score)
    return float(won), float(won)


def _play(env: Env, policy: RehearsalPolicy, task: str, settings: EvalSettings) -> tuple[TaskRecord, Episode]:
    started = time.perf_counter()
    recorder = EpisodeRecorder(env, task, policy=policy.name, seed=settings.seed,
                               env_kwargs=settings.env_kwargs, record_state=False)
    policy.reset(env, recorder.initial_observation, recorder.initial_info)
    try:
        while recorder.steps < settings.max_steps and not recorder.finished:
            action = policy.act(recorder.last_observation, recorder.last_info)
            if action is None:
                break
            recorder.step(action)
    except EnvError as error:
        recorder.fail(error)
    finished = recorder.terminated
    if not recorder.finished:
        recorder.truncated = True
    closing = _bfcl_close(env) if settings.env == "bfcl" and not finished and recorder.error is None else {}
    success, score = _outcome(settings.env, recorder, closing)
    episode = recorder.episode(max_steps=settings.max_steps, method=policy.name,
                               rehearsal=policy.config.model_dump(mode="json"))
    usage = policy.usage()
    record = TaskRecord(
        method=policy.config.label(), task=task, success=success, score=score, steps=recorder.steps,
        finished=finished, rehearsed_steps=usage["rehearsed_steps"], changed_steps=usage["changed_steps"],
        model_calls=usage["model_calls"], prompt_tokens=usage["prompt_tokens"], cached_tokens=usage["cached_tokens"],
        completion_tokens=usage["completion_tokens"], wall_s=round(time.perf_counter() - started, 4),
        error=recorder.error,
    )
    return record, episode


# ---------------------------------------------------------------------------------------------
# Report


def _report(records: list[TaskRecord], methods: list[str], settings: EvalSettings,
            excluded: set[str]) -> dict[str, Any]:
    import pandas as pd

    from worldsmith.evals.bootstrap import summarize

    frame = pd.DataFrame([record.to_json() for record in records])
    frame["episode_id"] = frame["task"]
    frame["turn"] = 0
    # rehearsal methods first, plain last: the pair "k2 vs plain" is k2 - plain
    order = [method for method in methods if method != "plain"] + ["plain"]
    summary = summarize(frame, metrics=list(METRICS), methods=order, resamples=settings.resamples,
                        seed=settings.seed, cluster="episode_id", unit=("episode_id",))
    pairs = {name: value for name, value in summary["pairs"].items() if name.endswith(" vs plain")}
    cost: dict[str, Any] = {}
    for method in order:
        rows = frame[frame["method"] == method]
        steps = max(int(rows["steps"].sum()), 1)
        cost[method] = {
            "tasks": len(rows),
            "steps": int(rows["steps"].sum()),
            "rehearsed_steps": int(rows["rehearsed_steps"].sum()),
            "changed_steps": int(rows["changed_steps"].sum()),
            "model_calls_per_step": round(float(rows["model_calls"].sum()) / steps, 3),
            "tokens_per_step": round(float((rows["prompt_tokens"] + rows["completion_tokens"]).sum()) / steps, 1),
            "prefill_tokens_per_step": round(float((rows["prompt_tokens"] - rows["cached_tokens"]).sum()) / steps, 1),
            "cached_share": round(float(rows["cached_tokens"].sum()) / max(float(rows["prompt_tokens"].sum()), 1.0), 4),
            "wall_s": round(float(rows["wall_s"].sum()), 3),
            "finished": int(rows["finished"].sum()),
            "errors": int(rows["error"].notna().sum()),
        }
    return {
        "checkpoint": settings.checkpoint,
        "env": settings.env,
        "tasks": list(dict.fromkeys(frame["task"])),
        "excluded_training_tasks": len(excluded),
        "methods": summary["methods"],
        "pairs": pairs,
        "cost": cost,
        "resamples": settings.resamples,
        "seed": settings.seed,
        "interval": "95% percentile bootstrap over tasks (paired)",
    }


def _as_trained(budget: RehearsalConfig, run_config: dict[str, Any] | None) -> RehearsalConfig:
    """The budget with the run's chunk length and observation clipping, unless the budget sets its own."""
    data = (run_config or {}).get("data") or {}
    update = {field: data[key] for field, key in (("max_seq_len", "max_seq_len"),
                                                  ("max_observation_chars", "max_observation_chars"))
              if key in data and field not in budget.model_fields_set}
    return budget.model_copy(update=update) if update else budget


def _write(out: Path, result: EvalResult) -> None:
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "config.json", result.settings.model_dump(mode="json"))
    for name, rows in (("records.jsonl", [record.to_json() for record in result.records]),
                       ("rehearsals.jsonl", result.rehearsals),
                       ("episodes.jsonl", [episode.model_dump(mode="json") for episode in result.episodes])):
        with atomic_write(out / name) as handle:
            for row in rows:
                handle.write(orjson.dumps(row, default=str) + b"\n")
    atomic_write_json(out / "report.json", result.report)


def default_out(checkpoint: str | Path, settings: EvalSettings) -> Path | None:
    """`<run>/evals/<env>-<methods>-<time>` for a checkpoint inside a run (`<run>/checkpoints/step-N`), else None."""
    folder = Path(checkpoint).resolve()
    if folder.parent.name != "checkpoints":
        return None
    methods = "-".join(budget.label() for budget in settings.budgets) or "plain"
    return folder.parent.parent / "evals" / f"{settings.env}-{methods}-{folder.name}-{time.strftime('%Y%m%dT%H%M%S')}"


def evaluate_checkpoint(settings: EvalSettings, *, out: str | Path | None = None, llm: Any | None = None,
                        progress: Progress | None = None) -> EvalResult:
    """Play every task with the plain policy and each rehearsal budget; paired intervals over tasks.

    `llm` (optional) is an already loaded backend over the checkpoint (tests and notebooks reuse one);
    `out` (default: inside the checkpoint's run, if it is one) receives the run store.
    """
    checkpoint = Path(settings.checkpoint)
    if llm is None and not (checkpoint / "config.json").is_file():
        raise BadInputError(f"{checkpoint}: not a checkpoint folder (no config.json with the model's weights beside it)")
    templates, run_config = templates_for_checkpoint(checkpoint)
    excluded = training_task_ids(run_config) if settings.exclude_training_tasks else set()
    model = llm if llm is not None else load_checkpoint_llm(checkpoint, device=settings.device,
                                                            threads=settings.threads)
    budgets = [_as_trained(budget, run_config) for budget in (RehearsalConfig(seed=settings.seed), *settings.budgets)]
    labels = [budget.label() for budget in budgets]
    if len(set(labels)) != len(labels):
        raise BadInputError(f"two rehearsal budgets share a name: {labels}")
    env = make(settings.env, **settings.env_kwargs)
    records: list[TaskRecord] = []
    episodes: list[Episode] = []
    rehearsals: list[dict[str, Any]] = []
    try:
        tasks = _choose_tasks(env, settings, excluded)
        total, done = len(tasks) * len(budgets), 0
        for task in tasks:
            for budget in budgets:
                policy = RehearsalPolicy(model, budget, templates=templates)
                if progress is not None:
                    progress(done, total, f"{budget.label()} on {task}")
                record, episode = _play(env, policy, task, settings)
                records.append(record)
                episodes.append(episode)
                rehearsals += [{"method": record.method, "task": task, **item.to_json()} for item in policy.records]
                done += 1
        if progress is not None:
            progress(done, total, "done")
    finally:
        env.close()
        if llm is None:
            model.close()
    report = _report(records, labels, settings, excluded)
    result = EvalResult(settings=settings, records=records, report=report, episodes=episodes, rehearsals=rehearsals)
    target = Path(out) if out is not None else default_out(checkpoint, settings)
    if target is not None:
        _write(target, result)
        result.out = target
    return result
