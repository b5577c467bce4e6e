"""Active collection: spend a budget of real environment steps in rounds, rebuilding the book between them.

    config = ExploreConfig(env="toolshop", budget=400, rounds=4, strategy="explore",
                           heldout=HeldOut(dataset="toolshop-heldout", split="test"))
    report = explore(workspace, "toolshop-explored", config)
    [(r.total_steps, r.exact_match) for r in report.rounds]    # the curve: held-out fidelity vs real steps

Each round plays episodes until its share of the budget (`budget * r // rounds` cumulative) is spent, ingests
them into the dataset (content-hash dedupe), rebuilds the book from every episode of the dataset
(`sim.build_simulator_book`), saves it as a new version of the book in the workspace's worldbook store (so its
rules' provenance links back to the turns that taught them) and scores it on the held-out set (the no-model
harness under teacher forcing, `evals.heldout.score_version`).

Equal budgets are equal in real `env.step` calls, exactly: a round is played in waves, each wave planning
episodes whose step allowances add up to what is left of the round (an allowance is at most the step cap; the
last one cuts its episode at the budget), and every `env.step` call is counted by a wrapper around the
environment (a hand-over such as toolshop's `respond` is a real step too; it records no turn). The plan does not
depend on where episodes run, so a round played as Ray tasks (`ray_address`, the book travelling as JSON)
spends and records exactly what the in-process round does.

Strategies (the policy that acts in a round; a fresh one per episode, seeded by the episode's index):

- `explore`: `sim.exploring.ExploringPolicy` over the round's book (`explore` is its exploration weight);
- `expert`: the environment's expert;
- `random`: every step uniform over the candidate set the exploring policy draws from (`UniformCandidatePolicy`):
  the expert's action, the admissible actions where the environment lists them (text worlds, a seeded sample of
  at most 48), and the curious policy's proposals (revisits, reads after writes, invalid actions) or on a tool
  API, which lists none, the probing policy's (re-reads after writes, queries that may find nothing, calls that
  must fail); the expert's hand-over (`respond`) is no candidate, so a tool episode runs to its step cap;
- `mix`: the expert's action with probability `explore`, else the random strategy's choice (the exploring
  policy's mixture, detour cap and way back, with the uniform choice).

Every episode ends when the expert has nothing left (the task is done) or at its step allowance.

The run lives in `<workspace>/runs/explore/<dataset>/`: `config.json`, `rounds.jsonl` (one `ExploreRound` per
finished round, appended) and `curve.json` (the report). A rerun with the same configuration skips the finished
rounds and continues from the last round's book version; a different configuration in the same folder is
refused (use another dataset).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from worldsmith.envs.base import Env, TaskLoadError, UnknownTaskError
from worldsmith.envs.collect import list_tasks
from worldsmith.envs.policies import ExpertPolicy, Policy
from worldsmith.envs.recorder import episode_id_for, record_episode
from worldsmith.envs.registry import EnvSpec, spec
from worldsmith.evals.bootstrap import bootstrap_mean
from worldsmith.evals.heldout import HeldOut, load_heldout, score_version
from worldsmith.sim.exploring import ExploringPolicy
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.sim.uncertainty import Uncertainty
from worldsmith.traces.model import Action, Episode
from worldsmith.util.atomic import atomic_write_bytes, atomic_write_json
from worldsmith.util.executors import make_executor
from worldsmith.workspace import Workspace
from worldsmith.workspace.layout import WorkspaceLayout
from worldsmith.worldbook.induce import episode_of
from worldsmith.worldbook.model import Worldbook
from worldsmith.worldbook.store import WorldbookStore, check_book_name

__all__ = ["STRATEGIES", "ExploreConfig", "ExploreProgress", "ExploreReport", "ExploreRound", "RuleChange", "Strategy",
           "UniformCandidatePolicy", "explore", "explore_unit", "load_explore_report", "run_dir", "strategy_policy"]

Strategy = Literal["explore", "random", "expert", "mix"]
STRATEGIES: tuple[str, ...] = ("explore", "random", "expert", "mix")
TURNS_PER_RULE = 5  # provenance turn ids a round's rule change lists
# What may differ between a run and its resume (where it runs, not what it does).
_RUNTIME_FIELDS = frozenset({"ray_address", "workers", "episode_timeout"})


class ExploreConfig(BaseModel):
    """What an active collection does; every field says what it is for (the CLI's help comes from here)."""

    model_config = ConfigDict(extra="forbid")

    env: str = Field(description="A registered environment (worldsmith envs list).")
    budget: int = Field(ge=1, description="Real env.step calls to spend in all rounds together.")
    rounds: int = Field(default=4, ge=1, description="Rebuild and score the book this many times.")
    strategy: Strategy = Field(default="explore", description="Which policy acts: explore, random, expert or mix.")
    tasks: list[str] | None = Field(default=None, description="Tasks to play, cycled in order (None: the env's own).")
    seed: int = Field(default=0, ge=0, description="Seeds the policies (episode i gets seed*100003 + i).")
    max_steps: int | None = Field(default=None, ge=1, description="Step cap per episode (None: the env's).")
    explore: float = Field(default=0.5, ge=0.0, le=1.0, description="The exploring policy's exploration weight; for "
                           "mix, the share of expert actions.")
    explore_schedule: list[float] | None = Field(default=None, description="The explore weight of each round (the "
                                                 "last one repeats), e.g. [1.0, 0.75, 0.5]: explore while the book is "
                                                 "small; None: `explore` every round.")
    policy_options: dict[str, Any] = Field(default_factory=dict, description="Keywords of the exploring policy "
                                           "(explore strategy only), e.g. write_weight, max_detour, draws.")
    book: str | None = Field(default=None, description="The book the rounds are saved as (None: the dataset's name); "
                             "when it exists, round 1 acts with its current version.")
    heldout: HeldOut | None = Field(default=None, description="Where each round's book is scored (None: no curve).")
    ray_address: str | None = Field(default=None, description="Run a round's episodes as Ray tasks ('local' or an "
                                    "address).")
    workers: int = Field(default=0, ge=0, description="Ray tasks at once (0: all CPUs).")
    episode_timeout: float = Field(default=600.0, gt=0, description="Seconds before a Ray episode is abandoned.")
    env_kwargs: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments of the environment.")

    @model_validator(mode="after")
    def _budget_covers_rounds(self) -> ExploreConfig:
        if self.budget < self.rounds:
            raise ValueError(f"a budget of {self.budget} steps cannot be split over {self.rounds} rounds")
        return self

    @model_validator(mode="after")
    def _schedule_weights(self) -> ExploreConfig:
        if self.explore_schedule is not None and (
                not self.explore_schedule or any(not 0.0 <= w <= 1.0 for w in self.explore_schedule)):
            raise ValueError(f"explore_schedule needs weights in [0, 1], not {self.explore_schedule}")
        return self

    def weight(self, index: int) -> float:
        """The explore weight of round `index` (1-based)."""
        if not self.explore_schedule:
            return self.explore
        return self.explore_schedule[min(index, len(self.explore_schedule)) - 1]

    def round_budget(self, index: int) -> int:
        """The steps of round `index` (1-based): the cumulative shares differ by at most one step."""
        return self.budget * index // self.rounds - self.budget * (index - 1) // self.rounds

    def book_name(self, dataset: str) -> str:
        return self.book or dataset

    def identity(self) -> dict[str, Any]:
        """What a resume must share with the run it continues."""
        return {k: v for k, v in self.model_dump(mode="json").items() if k not in _RUNTIME_FIELDS}


class RuleChange(BaseModel):
    """A rule a round added or changed, with the turns that taught it (this round's first, then older ones)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    kind: Literal["new", "changed"]
    action: str
    status: str
    turns: list[str] = Field(description=f"Up to {TURNS_PER_RULE} supporting turn ids, this round's turns first.")
    new_turns: int = Field(description="Supporting turns listed in the rule's provenance that this round recorded.")


class ExploreRound(BaseModel):
    """One finished round: what it spent and what the rebuilt book scores on the held-out set."""

    model_config = ConfigDict(extra="forbid")

    round: int
    steps: int = Field(description="Real env.step calls this round.")
    total_steps: int = Field(description="Real env.step calls up to and including this round.")
    episodes: int
    weight: float | None = Field(default=None, description="The explore weight this round played with.")
    planned: int = Field(description="Episodes planned (their indices seed the next round); some may not start.")
    episode_ids: list[str]
    turns: int = Field(description="Recorded turns this round (hand-overs are steps but not turns).")
    ingested: int
    duplicates: int
    version: str = Field(description="The book version this round saved.")
    rules: int
    supported_rules: int
    new_rules: list[RuleChange]
    exact_match: float | None = Field(default=None, description="Held-out next-observation exact match.")
    low: float | None = None
    high: float | None = None
    heldout_turns: int = 0
    heldout_episodes: int = 0
    skipped_tasks: dict[str, str] = Field(default_factory=dict, description="Tasks found unloadable this round "
                                          "(task -> why): left out of every later episode, their budget spent on "
                                          "the others.")
    seconds: dict[str, float] = Field(default_factory=dict, description="Wall seconds: play, build, score.")


class ExploreReport(BaseModel):
    """The whole run: its configuration and every round so far (the curve)."""

    model_config = ConfigDict(extra="forbid")

    dataset: str
    book: str
    config: ExploreConfig
    rounds: list[ExploreRound]
    resumed: int = Field(default=0, description="Rounds finished by an earlier run and skipped.")
    run_dir: str

    @property
    def steps(self) -> int:
        return self.rounds[-1].total_steps if self.rounds else 0

    @property
    def skipped_tasks(self) -> dict[str, str]:
        """Every task found unloadable so far (task -> why)."""
        return _skipped(self.rounds)

    def curve(self) -> list[dict[str, Any]]:
        """One point per round: steps spent so far, held-out exact match and its interval, rules."""
        return [{"round": r.round, "steps": r.total_steps, "exact_match": r.exact_match, "low": r.low,
                 "high": r.high, "rules": r.rules, "version": r.version} for r in self.rounds]

    def summary(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "book": self.book, "env": self.config.env, "strategy": self.config.strategy,
                "budget": self.config.budget, "steps": self.steps, "rounds": len(self.rounds),
                "resumed": self.resumed, "heldout": self.config.heldout.label() if self.config.heldout else None,
                "skipped": len(self.skipped_tasks), "skipped_tasks": self.skipped_tasks,
                "curve": self.curve(), "run_dir": self.run_dir}


@dataclass
class ExploreProgress:
    """A progress event: an episode finished (`episode_id`), or a round did (`finished`)."""

    round: int
    rounds: int
    steps: int  # real steps spent so far, all rounds
    budget: int
    what: str
    episode_id: str | None = None
    episode_steps: int = 0
    finished: ExploreRound | None = None


ProgressCallback = Callable[[ExploreProgress], None]


def run_dir(workspace_root: Path, dataset: str) -> Path:
    return WorkspaceLayout.of(workspace_root).run_dir("explore", dataset)


# ------------------------------------------------------------------------------------------------ policies


class UniformCandidatePolicy(ExploringPolicy):
    """The random and mix strategies: the exploring policy with its choice made uniformly, not by uncertainty.

    Same candidates (`ExploringPolicy._candidates`: the expert's action, the curious or probing policy's
    proposals, the admissible actions), same mixture with the expert (`explore` = the share of candidate
    steps), same detour cap and way back; only the choice among the candidates differs. So explore vs random
    (`explore=1.0` both) and explore vs mix (the same share of expert steps) isolate what the uncertainty signal
    adds.
    """

    choice_label = "random"

    def __init__(self, book: Worldbook, *, seed: int | None = None, explore: float = 1.0, name: str = "random") -> None:
        super().__init__(book, seed=seed, explore=explore, assess_expert=False)
        self.name = name

    def choose(self, candidates: list[tuple[Action, str]]) -> tuple[Action, str, Uncertainty | None]:
        action, origin = self._rng.choice(candidates)
        return action, origin, None


def strategy_policy(strategy: str, book: Worldbook, *, seed: int, explore: float = 0.5,
                    options: dict[str, Any] | None = None) -> Policy:
    """The policy a strategy plays an episode with (a fresh one per episode); `options` go to the exploring policy."""
    if options and strategy != "explore":
        raise ValueError(f"policy options are for the explore strategy, not {strategy!r}")
    if strategy == "expert":
        return ExpertPolicy()
    if strategy == "random":
        return UniformCandidatePolicy(book, seed=seed, explore=1.0)
    if strategy == "mix":  # the expert with probability `explore`, else a uniform candidate
        return UniformCandidatePolicy(book, seed=seed, explore=1.0 - explore, name="mix")
    if strategy == "explore":
        try:
            return ExploringPolicy(book, seed=seed, explore=explore, **(options or {}))
        except TypeError as error:  # an unknown option name
            raise ValueError(f"exploring policy: {error}") from None
    raise ValueError(f"unknown strategy {strategy!r} (choose from {', '.join(STRATEGIES)})")


class _CountingEnv:
    """The environment with every `step` call counted: the budget's unit, hand-overs and failing calls included."""

    def __init__(self, env: Env) -> None:
        self._env = env
        self.steps = 0

    def step(self, action: Any) -> Any:
        self.steps += 1
        return self._env.step(action)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)


# ------------------------------------------------------------------------------------------------ playing


@dataclass(frozen=True)
class _Unit:
    """One planned episode: its index in the run, task, policy seed, step allowance and explore weight."""

    index: int
    task: str
    seed: int
    allowance: int
    episode_id: str
    weight: float


def _plan_wave(config: ExploreConfig, tasks: list[str], start: int, remaining: int, cap: int,
               weight: float) -> list[_Unit]:
    """Episodes whose allowances add up to `remaining` (each at most `cap`), numbered from `start`."""
    units = []
    index = start
    while remaining > 0:
        allowance = min(cap, remaining)
        task = tasks[index % len(tasks)]
        seed = config.seed * 100_003 + index
        units.append(_Unit(index, task, seed, allowance, episode_id_for(config.env, task, config.strategy, seed),
                           weight))
        remaining -= allowance
        index += 1
    return units


def _play_unit(env: Env, config: ExploreConfig, book: Worldbook, unit: _Unit) -> dict[str, Any]:
    """Play one planned episode; the result says how many real steps it spent (0 and an error if it never started)."""
    counted = _CountingEnv(env)
    policy = strategy_policy(config.strategy, book, seed=unit.seed, explore=unit.weight,
                             options=config.policy_options)
    try:
        episode = record_episode(counted, policy, unit.task, max_steps=unit.allowance, seed=unit.seed,
                                 episode_id=unit.episode_id, env_kwargs=config.env_kwargs)
    except (UnknownTaskError, TaskLoadError) as error:
        return {"index": unit.index, "steps": counted.steps, "episode": None, "error": str(error),
                "unloadable": unit.task}
    except Exception as error:  # noqa: BLE001 - the reset itself failed (errors after it end the episode instead)
        return {"index": unit.index, "steps": counted.steps, "episode": None, "unloadable": unit.task,
                "error": f"task {unit.task!r} failed to start: {type(error).__name__}: {error}"}
    episode.metadata["explore"] = {"strategy": config.strategy, "weight": unit.weight, "allowance": unit.allowance,
                                   "real_steps": counted.steps,
                                   "choices": list(getattr(policy, "choices", []) or [])}
    return {"index": unit.index, "steps": counted.steps, "episode": episode.model_dump(mode="json", exclude_defaults=True),
            "error": None}


_UNIT_ENV: dict[str, Env] = {}  # per Ray worker process: the environment of the run it serves


def explore_unit(context: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """One planned episode in an executor's worker (a Ray task): the book arrives as JSON, the environment is built
    on the worker's first episode of the run and kept for the next."""
    config = ExploreConfig.model_validate(context["config"])
    key = context["key"]
    if key not in _UNIT_ENV:
        for env in _UNIT_ENV.values():
            env.close()
        _UNIT_ENV.clear()
        fields = context["spec"]
        _UNIT_ENV[key] = EnvSpec(**{**fields, "requires": tuple(fields["requires"])}).make(**config.env_kwargs)
    book = Worldbook.model_validate(context["book"])
    return _play_unit(_UNIT_ENV[key], config, book, _Unit(**payload))


def _run_units(config: ExploreConfig, env: Env | None, book: Worldbook,
               units: list[_Unit]) -> Iterator[dict[str, Any]]:
    """The wave's episodes, in this process on `env`, or as Ray tasks; results in plan order either way."""
    if config.ray_address is None:
        assert env is not None
        for unit in units:
            yield _play_unit(env, config, book, unit)
        return
    env_spec = spec(config.env)
    context: dict[str, Any] = {"config": config.model_dump(mode="json"), "spec": asdict(env_spec)}
    context["key"] = hashlib.sha256(orjson.dumps(context, option=orjson.OPT_SORT_KEYS)).hexdigest()
    context["book"] = book.model_dump(mode="json")
    executor = make_executor(config.workers if env_spec.parallel else 1, config.ray_address)
    results: dict[int, dict[str, Any]] = {}
    for outcome in executor.run(explore_unit, context, [asdict(u) for u in units], timeout=config.episode_timeout):
        unit = units[outcome.index]
        if outcome.kind == "ok":
            results[outcome.index] = outcome.value
        else:  # the worker's steps are unknown: the episode is lost and its allowance counted as spent
            results[outcome.index] = {"index": unit.index, "steps": unit.allowance, "episode": None,
                                      "error": f"{outcome.kind}: {outcome.message or outcome.error}"}
    for position in range(len(units)):
        yield results[position]


def _play_round(config: ExploreConfig, env: Env | None, book: Worldbook, tasks: list[str], start: int, share: int,
                cap: int, weight: float, report: Callable[[dict[str, Any]], None],
                skipped: dict[str, str]) -> tuple[list[Episode], int, int, dict[str, str]]:
    """Waves of episodes until `share` real steps are spent: (episodes, steps, next episode index, the tasks found
    unloadable this round and why). A task that cannot start (unknown, broken game, a reset that raises) is left out
    of the later waves, as `collect` skips it: its allowance goes to the others. `skipped` holds the tasks earlier
    rounds found unloadable; ValueError when no task is left, or a wave spent nothing."""
    episodes: list[Episode] = []
    found: dict[str, str] = {}
    spent, index = 0, start
    while spent < share:
        playable = [task for task in tasks if task not in skipped and task not in found]
        if not playable:
            reasons = "; ".join(f"{why}" for why in list({**skipped, **found}.values())[-3:])
            raise ValueError(f"no task of {config.env!r} can be played: every one failed to load ({reasons})")
        units = _plan_wave(config, playable, index, share - spent, cap, weight)
        wave, newly = 0, 0
        for result in _run_units(config, env, book, units):
            wave += int(result["steps"])
            if result["episode"] is not None:
                episodes.append(Episode.model_validate(result["episode"]))
            task = result.get("unloadable")
            if task is not None and task not in found:
                found[task] = str(result["error"])
                newly += 1
            report(result)
        spent += wave
        index += len(units)
        if wave == 0 and not newly:  # episodes started but none stepped: stop rather than loop
            raise ValueError(f"no episode of {config.env!r} spent a step (the expert had nothing to do)")
    return episodes, spent, index, found


def _skipped(rounds: list[ExploreRound]) -> dict[str, str]:
    """The tasks the finished rounds found unloadable (task -> why), in the order found."""
    return {task: why for round_ in rounds for task, why in round_.skipped_tasks.items()}


# ------------------------------------------------------------------------------------------------ rounds


def rule_changes(before: Worldbook | None, after: Worldbook, new_episodes: set[str]) -> list[RuleChange]:
    """Rules `after` added or changed relative to `before`, each with the turns that taught it."""
    old = {rule.id: rule for rule in before.rules} if before is not None else {}
    changes = []
    for rule in after.rules:
        kind: Literal["new", "changed"]
        if rule.id not in old:
            kind = "new"
        elif old[rule.id] != rule:
            kind = "changed"
        else:
            continue
        supporting = rule.provenance.supporting
        fresh = [turn for turn in supporting if episode_of(turn) in new_episodes]
        listed = (fresh + [turn for turn in supporting if turn not in fresh])[:TURNS_PER_RULE]
        changes.append(RuleChange(id=rule.id, kind=kind, action=rule.action, status=rule.status.value, turns=listed,
                                  new_turns=len(fresh)))
    return changes


def _read_rounds(path: Path) -> list[ExploreRound]:
    """The finished rounds, in order; a torn last line (a killed run) is dropped."""
    rounds: list[ExploreRound] = []
    if path.exists():
        for line in path.read_bytes().splitlines():
            try:
                rounds.append(ExploreRound.model_validate_json(line))
            except ValidationError:
                continue
    return rounds


def _check_resume(folder: Path, config: ExploreConfig) -> None:
    path = folder / "config.json"
    if not path.exists():
        return
    try:
        earlier = ExploreConfig.model_validate_json(path.read_bytes()).identity()
    except ValidationError as error:
        raise ValueError(f"{path}: not an explore configuration ({error.errors()[0]['msg']}); remove the folder") \
            from None
    now = config.identity()
    differ = sorted(k for k in now if now[k] != earlier.get(k))
    if differ:
        raise ValueError(f"{folder} holds an explore run with other settings ({', '.join(differ)}): explore into "
                         "another dataset, or remove that folder to start over")


def load_explore_report(workspace_root: Path, dataset: str) -> ExploreReport | None:
    """The explore run of `dataset` as far as it got (None: there is none)."""
    folder = run_dir(workspace_root, dataset)
    if not (folder / "config.json").exists():
        return None
    config = ExploreConfig.model_validate_json((folder / "config.json").read_bytes())
    return ExploreReport(dataset=dataset, book=config.book_name(dataset), config=config,
                         rounds=_read_rounds(folder / "rounds.jsonl"), run_dir=str(folder))


def _starting_book(store: WorldbookStore, name: str, done: list[ExploreRound], env_id: str) -> Worldbook:
    if done:
        return store.load(name, done[-1].version)
    if name in store.names():
        return store.load(name)
    return Worldbook(name=name, env_id=env_id)


def explore(workspace: Workspace, dataset: str, config: ExploreConfig,
            progress: ProgressCallback | None = None) -> ExploreReport:
    """Run `config` into `dataset` of `workspace`, round by round (resuming a run of the same settings)."""
    env_spec = spec(config.env)
    if env_spec.missing():
        env_spec.make()  # raises EnvUnavailableError with the install hint
    name = check_book_name(config.book_name(dataset))
    if config.heldout is not None and config.heldout.dataset == dataset:
        raise ValueError(f"the held-out set cannot be the dataset explored into ({dataset!r}): its episodes would "
                         "become construction episodes")
    strategy_policy(config.strategy, Worldbook(name=name), seed=config.seed, explore=config.explore,  # fail early
                    options=config.policy_options)
    held = load_heldout(config.heldout, workspace) if config.heldout is not None else None
    folder = run_dir(workspace.root, dataset)
    folder.mkdir(parents=True, exist_ok=True)
    _check_resume(folder, config)
    atomic_write_json(folder / "config.json", config.model_dump(mode="json"))
    rounds_path = folder / "rounds.jsonl"
    done = _read_rounds(rounds_path)[: config.rounds]
    kept = b"".join(r.model_dump_json().encode() + b"\n" for r in done)
    if rounds_path.exists() and rounds_path.read_bytes() != kept:  # drop a torn line before appending after it
        atomic_write_bytes(rounds_path, kept)
    tasks = config.tasks or list_tasks(config.env, config.env_kwargs)
    if not tasks:
        raise ValueError(f"environment {config.env!r} has no tasks to play: pass tasks")
    store = WorldbookStore.of_workspace(workspace)
    book = _starting_book(store, name, done, config.env)
    cap = config.max_steps or env_spec.max_steps
    index = sum(r.planned for r in done)  # the next episode's index
    spent = done[-1].total_steps if done else 0
    rounds = list(done)
    env = env_spec.make(**config.env_kwargs) if config.ray_address is None else None
    try:
        for number in range(len(done) + 1, config.rounds + 1):
            rounds.append(_one_round(workspace, dataset, config, env, store, book, tasks, number, index, spent, cap,
                                     held, progress, _skipped(rounds)))
            finished = rounds[-1]
            book = store.load(name, finished.version)
            index += finished.planned
            spent = finished.total_steps
            with open(rounds_path, "ab") as handle:
                handle.write(finished.model_dump_json().encode() + b"\n")
            report = ExploreReport(dataset=dataset, book=name, config=config, rounds=rounds, resumed=len(done),
                                   run_dir=str(folder))
            atomic_write_json(folder / "curve.json", report.summary())
            if progress:
                progress(ExploreProgress(number, config.rounds, spent, config.budget, f"round {number} finished",
                                         finished=finished))
    finally:
        if env is not None:
            env.close()
    report = ExploreReport(dataset=dataset, book=name, config=config, rounds=rounds, resumed=len(done),
                           run_dir=str(folder))
    atomic_write_json(folder / "curve.json", report.summary())
    return report


def _one_round(workspace: Workspace, dataset: str, config: ExploreConfig, env: Env | None, store: WorldbookStore,
               book: Worldbook, tasks: list[str], number: int, index: int, spent: int, cap: int,
               held: tuple[list[Episode], int] | None, progress: ProgressCallback | None,
               skipped: dict[str, str]) -> ExploreRound:
    share = config.round_budget(number)
    started = time.perf_counter()
    so_far = [spent]

    def report(result: dict[str, Any]) -> None:
        so_far[0] += int(result["steps"])
        if progress:
            episode = result["episode"]
            progress(ExploreProgress(number, config.rounds, so_far[0], config.budget,
                                     f"round {number}: episode {result['index'] + 1}",
                                     episode_id=episode["id"] if episode else None, episode_steps=int(result["steps"])))

    episodes, steps, next_index, unloadable = _play_round(config, env, book, tasks, index, share, cap,
                                                          config.weight(number), report, skipped)
    played = time.perf_counter()
    ingested = duplicates = 0
    if episodes:
        added = workspace.add_episodes(dataset, episodes, label=f"explore-r{number}")
        ingested, duplicates = added.episodes, added.duplicates
    if progress:
        progress(ExploreProgress(number, config.rounds, spent + steps, config.budget, f"round {number}: rebuilding"))
    everything = [e for e in workspace.dataset(dataset).iter_episodes() if e.turns]
    name = config.book_name(dataset)
    built = build_simulator_book(everything, name=name, workspace_root=workspace.root,
                                 cache_dir=run_dir(workspace.root, dataset) / "cache").book
    parent = store.head(name) if name in store.names() else None
    info = store.save(built, parent=parent, author="explore",
                      message=f"explore round {number}/{config.rounds}: {config.strategy}, "
                              f"{spent + steps} real steps of {config.budget}",
                      build={"builder": "deterministic", "explore": {"round": number, "strategy": config.strategy}},
                      sources=[{"dataset": dataset, "split": None, "env": None, "episodes": len(everything)}])
    built_at = time.perf_counter()
    scored: dict[str, Any] = {}
    if held is not None and config.heldout is not None:
        if progress:
            progress(ExploreProgress(number, config.rounds, spent + steps, config.budget, f"round {number}: scoring"))
        scores = score_version(built, config.heldout, workspace, episodes=held[0], revision=held[1])
        turns = scores.turns
        if turns:
            interval = bootstrap_mean([t.episode_id for t in turns], [t.exact_match for t in turns])
            scored = {"exact_match": round(interval.mean, 6), "low": round(interval.low, 6),
                      "high": round(interval.high, 6), "heldout_turns": len(turns),
                      "heldout_episodes": len({t.episode_id for t in turns})}
    ids = [e.id for e in episodes]
    return ExploreRound(
        round=number, weight=config.weight(number), steps=steps, total_steps=spent + steps, episodes=len(episodes), planned=next_index - index,
        episode_ids=ids,
        turns=sum(len(e.turns) for e in episodes), ingested=ingested, duplicates=duplicates, version=info.version,
        rules=len(built.rules), supported_rules=sum(r.status.value == "supported" for r in built.rules),
        new_rules=rule_changes(book, built, set(ids)), skipped_tasks=unloadable, **scored,
        seconds={"play": round(played - started, 3), "build": round(built_at - played, 3),
                 "score": round(time.perf_counter() - built_at, 3)},
    )
