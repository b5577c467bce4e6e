"""Sweeps over EnvACE knobs (λ, learning rate, model size, rehearsal budgets K and N, any config field) with Ray Tune.

    name: lam-lr
    base: configs/envace_tiny.yaml        # a config file, or the config inline
    grid: {lam: [0.0, 0.5], lr: [0.001, 0.003], model: [data_samples/models/tiny]}
    metric: rehearsal_fidelity
    mode: max
    evaluate: {env: bfcl, n_tasks: 3}    # optional: each checkpoint in the real env, plain vs rehearsal.k/n

Every grid point is one trial: a full `Trainer` run in its own run folder (under the sweep's
folder), then, if `evaluate` is set, the final checkpoint played in the real environment with
and without test-time rehearsal at the trial's `rehearsal.k` / `rehearsal.n`. Ray runs on this
machine with the CPUs given (or joins a cluster at `address`); a failed trial is recorded with
its error and the others go on. `sweep.json` (written atomically as trials finish) is the table.
"""

from __future__ import annotations

import itertools
import os
import time
import traceback
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worldsmith.envace.config import ConfigError, EnvACEConfig, apply_overrides, resolve_path
from worldsmith.envace.training_runs import runs_dir
from worldsmith.util.atomic import atomic_write_json

__all__ = ["SweepConfig", "SweepEvaluation", "SweepResult", "grid_points", "run_sweep", "run_trial"]

_REPORTED = ("act_loss_first", "act_loss_last", "rehearse_loss_first", "rehearse_loss_last", "rehearsal_fidelity",
             "reward_first", "reward_last", "rehearse_reward_last", "tokens_per_s", "time_s", "steps", "drift")


class SweepEvaluation(BaseModel):
    """Evaluate each trial's checkpoint in a real environment (worldsmith.envace.evaluate)."""

    model_config = ConfigDict(extra="forbid")

    env: str = "bfcl"
    n_tasks: int = Field(default=3, ge=1)
    tasks: list[str] = Field(default_factory=list)
    max_steps: int = Field(default=10, ge=1)
    resamples: int = Field(default=1000, ge=100)


class SweepConfig(BaseModel):
    """A grid of dotted config overrides over a base EnvACE config."""

    model_config = ConfigDict(extra="forbid")

    name: str = "sweep"
    base: str | dict[str, Any] = Field(description="an EnvACE config file, or the config itself")
    grid: dict[str, list[Any]] = Field(default_factory=dict, description="dotted field -> values (every combination)")
    metric: str = "rehearsal_fidelity"
    mode: Literal["max", "min"] = "max"
    cpus_per_trial: float = Field(default=1.0, gt=0)
    max_concurrent: int = Field(default=0, ge=0, description="0: as many as the CPUs allow")
    evaluate: SweepEvaluation | None = None
    out: str | None = Field(default=None, description="default: <workspace>/runs/envace/sweeps/<name>")

    @classmethod
    def from_file(cls, path: str | Path) -> SweepConfig:
        import yaml

        path = Path(path)
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as error:
            raise ConfigError(f"{path}: cannot read the sweep config: {error.strerror or error}") from None
        except yaml.YAMLError as error:
            raise ConfigError(f"{path}: not valid YAML: {error}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: the sweep config must be a mapping")
        try:
            config = cls.model_validate(raw)
        except ValidationError as error:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
            raise ConfigError(f"{path}: invalid sweep config: {problems}") from None
        if isinstance(config.base, str) and not Path(config.base).is_absolute():
            beside = path.parent / config.base
            if beside.exists() and not Path(config.base).exists():
                config.base = str(beside)
        return config

    def base_config(self) -> EnvACEConfig:
        if isinstance(self.base, dict):
            return EnvACEConfig.from_dict(self.base, source=f"sweep {self.name} base")
        return EnvACEConfig.from_file(resolve_path(self.base))


def grid_points(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, in a stable order."""
    keys = list(grid)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(grid[key] for key in keys))]


def _absolute(config: dict[str, Any]) -> dict[str, Any]:
    """Paths in a config made absolute (trials run in other working directories)."""
    out = dict(config)
    if out.get("model"):
        out["model"] = str(resolve_path(out["model"]).resolve())
    for section in ("data", "probe"):
        if isinstance(out.get(section), dict) and out[section].get("paths"):
            out[section] = {**out[section], "paths": [str(resolve_path(p).resolve()) for p in out[section]["paths"]]}
    if out.get("workspace"):
        out["workspace"] = str(Path(out["workspace"]).resolve())
    return out


def _trial_name(index: int, overrides: dict[str, Any]) -> str:
    parts = [f"{key.split('.')[-1]}={value}" for key, value in overrides.items()]
    text = ",".join(parts)[:80]
    safe = "".join(ch if ch.isalnum() or ch in "=.,_-" else "_" for ch in text)
    return f"t{index:03d}-{safe}" if safe else f"t{index:03d}"


def run_trial(params: dict[str, Any]) -> dict[str, Any]:
    """One trial (what Ray runs): train with the overrides, optionally evaluate; returns the metrics."""
    from worldsmith.envace.trainer import Trainer

    base, overrides, run_dir = params["base"], params["overrides"], params["run_dir"]
    config = EnvACEConfig.from_dict(apply_overrides(base, overrides), source=f"trial {Path(run_dir).name}")
    config = config.with_overrides(_absolute({"model": config.model}))
    summary = Trainer(config, out=run_dir).train(resume=True)
    metrics: dict[str, Any] = {key: value for key, value in summary.to_json().items() if key in _REPORTED}
    evaluation = params.get("evaluate")
    if evaluation and summary.checkpoint:
        from worldsmith.envace.evaluate import EvalSettings, evaluate_checkpoint

        settings = EvalSettings.build(
            summary.checkpoint, env=evaluation["env"], rehearse=config.rehearsal.k, parallel=config.rehearsal.n,
            irreversible_only=config.rehearsal.irreversible_only, tasks=evaluation.get("tasks") or [],
            n_tasks=evaluation["n_tasks"], max_steps=evaluation["max_steps"], resamples=evaluation["resamples"],
            seed=config.seed, threads=config.threads,
        )
        report = evaluate_checkpoint(settings, out=Path(run_dir) / "eval").summary()
        for method, entry in (report.get("methods") or {}).items():
            for metric, stats in entry.items():
                if isinstance(stats, dict) and stats.get("mean") is not None:
                    metrics[f"eval_{method}_{metric}"] = stats["mean"]
    metrics["run_dir"] = str(run_dir)
    return metrics


def _ray_trial(config: dict[str, Any]) -> dict[str, Any]:
    """Ray's function trainable: threads limited to the trial's CPUs, the result returned as the final metrics."""
    params = config["params"]
    threads = max(1, int(params.get("threads") or 1))
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import torch

    torch.set_num_threads(threads)
    return run_trial(params)


class SweepResult(BaseModel):
    """The sweep's table (also `sweep.json`)."""

    name: str
    out: str
    metric: str
    mode: str
    trials: list[dict[str, Any]]
    best: dict[str, Any] | None = None
    seconds: float = 0.0

    @property
    def failed(self) -> int:
        return sum(1 for trial in self.trials if trial["status"] != "ok")


def run_sweep(
    config: SweepConfig,
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    out: str | Path | None = None,
    workspace: str | None = None,
) -> SweepResult:
    """Run every grid point as a Ray Tune trial; failures are recorded, never fatal to the sweep."""
    import ray
    from ray import tune

    started = time.perf_counter()
    base = config.base_config()
    if workspace is not None:
        base = base.with_overrides({"workspace": workspace})
    folder = Path(out or config.out or (runs_dir(_workspace_root(base)) / "sweeps" / config.name)).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    base_json = _absolute(base.to_json())
    points = grid_points(config.grid) or [{}]
    threads = max(1, int(config.cpus_per_trial))
    trials: list[dict[str, Any]] = []
    for index, overrides in enumerate(points):
        name = _trial_name(index, overrides)
        trials.append({"trial": name, "overrides": overrides, "run_dir": str(folder / "trials" / name)})
    for trial in trials:  # a bad grid point fails here as a trial, not the sweep
        try:
            EnvACEConfig.from_dict(apply_overrides(base_json, trial["overrides"]), source=trial["trial"])
        except ConfigError as error:
            trial["invalid"] = str(error)
    started_ray = False
    if not ray.is_initialized():
        env_vars = {"OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                    "RAY_CHDIR_TO_TRIAL_DIR": "0"}
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "ignore_reinit_error": True,
                                  "runtime_env": {"env_vars": env_vars}}
        if address:
            kwargs["address"] = address
        else:
            kwargs["num_cpus"] = num_cpus or max(1, int(os.cpu_count() or 1))
        ray.init(**kwargs)
        started_ray = True
    table: dict[str, dict[str, Any]] = {}
    try:
        runnable = [trial for trial in trials if "invalid" not in trial]
        for trial in trials:
            if "invalid" in trial:
                table[trial["trial"]] = {**trial, "status": "failed", "error": trial.pop("invalid")}
        if runnable:
            space = [{"base": base_json, "overrides": trial["overrides"], "run_dir": trial["run_dir"],
                      "threads": threads, "trial": trial["trial"],
                      "evaluate": config.evaluate.model_dump() if config.evaluate else None} for trial in runnable]
            trainable = tune.with_resources(_ray_trial, {"cpu": config.cpus_per_trial})
            tuner = tune.Tuner(
                trainable,
                param_space={"params": tune.grid_search(space)},
                tune_config=tune.TuneConfig(max_concurrent_trials=config.max_concurrent or None,
                                            trial_dirname_creator=_trial_dirname),
                run_config=tune.RunConfig(
                    name=config.name, storage_path=str(folder / "ray"), verbose=0,
                    failure_config=tune.FailureConfig(max_failures=0, fail_fast=False),
                ),
            )
            grid = tuner.fit()
            for position in range(len(grid)):  # a ResultGrid is indexed, not iterable by its type
                trial_result = grid[position]
                params = (trial_result.config or {}).get("params", {})
                name = params.get("trial", "?")
                row: dict[str, Any] = {"trial": name, "overrides": params.get("overrides", {}),
                                       "run_dir": params.get("run_dir")}
                if trial_result.error is not None:
                    row.update(status="failed", error=_error_text(trial_result.error))
                else:
                    metrics = {k: v for k, v in (trial_result.metrics or {}).items() if k in _REPORTED or k.startswith("eval_")}
                    row.update(status="ok", error=None, **metrics)
                table[name] = row
    finally:
        if started_ray:
            ray.shutdown()
    rows = [table.get(trial["trial"], {**trial, "status": "failed", "error": "no result"}) for trial in trials]
    scored = [row for row in rows if row["status"] == "ok" and isinstance(row.get(config.metric), int | float)]
    best = None
    if scored:
        pick = max if config.mode == "max" else min
        best = pick(scored, key=lambda row: row[config.metric])
    result = SweepResult(name=config.name, out=str(folder), metric=config.metric, mode=config.mode, trials=rows,
                         best=best, seconds=round(time.perf_counter() - started, 2))
    atomic_write_json(folder / "sweep.json", result.model_dump())
    return result


def _trial_dirname(trial: Any) -> str:
    return str(trial.config.get("params", {}).get("trial") or trial.trial_id)


def _workspace_root(config: EnvACEConfig) -> Path:
    from worldsmith.workspace import Workspace

    return Workspace(config.workspace).root


def _error_text(error: BaseException) -> str:
    cause = getattr(error, "cause", None) or error.__cause__ or error
    lines = traceback.format_exception_only(type(cause), cause)
    return "".join(lines).strip()[-2000:]
