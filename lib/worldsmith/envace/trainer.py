"""The EnvACE trainer: joint supervised or role-wise GRPO on one set of weights, resumable exactly.

    summary = Trainer(EnvACEConfig.from_file("configs/envace_tiny.yaml")).train()

Joint: L = CE(act) + λ·CE(rehearse) over packed dual-role streams (one forward per chunk).
GRPO: G rollouts per task from the configured source (`rollouts`), a task reward for the act
role and a fidelity reward for the rehearse role, advantages per (task, role) group broadcast to the
tokens (`advantages`), the clipped loss (`grpo`: optional KL to the starting model, Dr.GRPO, one role
only, an optional supervised term). Each step is a small class (`supervised_step.SupervisedStep`,
`grpo_step.GrpoStep`: generate-and-score, the per-token advantages, the update, the metrics row) over
the optimizer, schedule and batch order `train_tiny` uses too (`worldsmith.llm.training`); this module
keeps the orchestration: data, model, the loop, probes, logging, checkpoints and resume. Either
objective can start from the other's checkpoint: a checkpoint folder is a normal Hugging Face model
folder, so `model:` may name one.

Every logged step goes to `metrics.jsonl`; the probe (`probe.rehearsal_fidelity`) runs every N
steps on held-out real transitions, can move GRPO from real to imagined rollouts once it passes a
threshold (and back when it drifts), and flags drift. Checkpoints hold the weights
(safetensors), tokenizer, optimizer state (safetensors + JSON), every RNG state and
`trainer_state.json`, written beside the target and renamed into place; a run killed at any
moment resumes from its last checkpoint to the same numbers (same thread count and library
versions). Launched on several processes (`accelerate launch`, `torchrun`), the run is data-parallel
(`worldsmith.envace.distributed`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from worldsmith.envace.config import EnvACEConfig, resolve_path
from worldsmith.envace.data import ChatFormat, Templates
from worldsmith.envace.distributed import DataParallel
from worldsmith.envace.grpo_metrics import mean, rounded
from worldsmith.envace.grpo_step import GrpoPolicy, GrpoStep
from worldsmith.envace.modeling import load_policy, resolve_device
from worldsmith.envace.probe import rehearsal_fidelity
from worldsmith.envace.rollouts import RealResponseCache
from worldsmith.envace.run_data import build_run_data, load_episodes, split_episodes
from worldsmith.envace.supervised_step import RoleLosses, SupervisedStep
from worldsmith.envace.trainer_state import TrainerState
from worldsmith.envace.training_runs import TrainingRunStore
from worldsmith.llm.training import Optimization, OptimizationSettings, save_pretrained, staged_folder
from worldsmith.util.errors import BadInputError, MissingFileError

__all__ = ["TrainSummary", "Trainer", "load_episodes"]

_NOT_FINGERPRINTED = ("steps", "checkpoint_every", "keep_checkpoints", "out", "name", "workspace", "log_every",
                      "threads", "device")


@dataclass
class TrainSummary:
    """What a run did (also `summary.json`). Losses *_first/_last are the supervised CE of each role on
    a fixed set of training chunks before the first and after the last step (both objectives)."""

    run_dir: str
    objective: str
    steps: int
    act_loss_first: float | None
    act_loss_last: float | None
    rehearse_loss_first: float | None
    rehearse_loss_last: float | None
    rehearsal_fidelity: float | None
    fidelity: dict[str, Any] = field(default_factory=dict)
    tokens_per_s: float = 0.0
    time_s: float = 0.0
    reward_first: float | None = None
    reward_last: float | None = None
    rehearse_reward_first: float | None = None
    rehearse_reward_last: float | None = None
    checkpoint: str | None = None
    resumed_from: int | None = None
    drift: bool = False
    switched_at: int | None = None
    probe_source: str = "none"
    probe_split: str = ""  # the split (or share of families) the probe's episodes came from
    fingerprint: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _fingerprint(config: EnvACEConfig) -> str:
    data = {key: value for key, value in config.to_json().items() if key not in _NOT_FINGERPRINTED}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


class Trainer:
    """One EnvACE run (see the module docstring)."""

    def __init__(
        self,
        config: EnvACEConfig,
        *,
        out: str | Path | None = None,
        progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.config = config
        self.store = TrainingRunStore(config.run_dir(out))
        self.progress = progress
        self.templates = Templates.from_config(config.data)
        # joins the launcher's process group when launched on several processes; else a no-op
        self.parallel = DataParallel.from_environment(config.device)

    # ================================================================== setup

    def _setup(self) -> None:
        import torch

        config = self.config
        if config.threads is not None:
            torch.set_num_threads(config.threads)
        self.device = self.parallel.device or resolve_device(config.device)
        if config.batch_size < self.parallel.world:
            raise BadInputError(f"batch_size ({config.batch_size}) must be at least the number of processes "
                             f"({self.parallel.world}): each takes a share of every step's batch")
        episodes = split_episodes(config)
        if episodes.env != config.data.env:  # data.env follows the episodes: the run's config.json says which
            config = self.config = config.model_copy(
                update={"data": config.data.model_copy(update={"env": episodes.env})})
        torch.manual_seed(config.seed)
        self.model, self.tokenizer = load_policy(resolve_path(config.model, config.workspace), device=str(self.device),
                                                 dtype=config.dtype, lora=config.lora)
        self.model.train()
        self.fmt = ChatFormat(self.tokenizer)
        self.data = build_run_data(config, episodes, self.tokenizer)
        self.cache = RealResponseCache(config.grpo.cache_key)
        self.cache.add_transcripts(self.data.transcripts)
        self.book = None
        if config.objective == "grpo" and config.rollout_source == "worldbook":
            from worldsmith.workspace import Workspace
            from worldsmith.worldbook import WorldbookStore

            store = WorldbookStore.of_workspace(Workspace(config.workspace))
            self.book = store.load(str(config.worldbook), config.worldbook_version)
        self.reference = None
        if config.objective == "grpo" and config.grpo.kl_coef > 0:
            self.reference = copy.deepcopy(self.model).eval()
            for parameter in self.reference.parameters():
                parameter.requires_grad_(False)
        self.optimization = Optimization(self.model, OptimizationSettings(
            lr=config.lr, steps=config.steps, warmup_steps=config.warmup_steps, schedule=config.lr_schedule,
            weight_decay=config.weight_decay, grad_clip=config.grad_clip,
        ))
        self.losses = RoleLosses(self.model, pad_id=self.fmt.pad_id, device=self.device)
        # what a checkpoint carries besides tensors
        self.state = TrainerState.fresh(config.seed, config.rollout_source)
        # each process samples its own rollouts (process 0 draws what a single process would)
        self.generator = torch.Generator(device=self.device).manual_seed(config.seed + 1 + 7919 * self.parallel.rank)
        self.resumed_from: int | None = None

    # ================================================================== public

    def train(self, resume: bool = True) -> TrainSummary:
        """Run to `config.steps` (from the last checkpoint when `resume` and one exists)."""
        store = self.store
        main = self.is_main
        if main:
            store.root.mkdir(parents=True, exist_ok=True)
            store.write_status("running", step=0, steps=self.config.steps)
        try:
            self._setup()
            latest = store.latest_checkpoint() if resume else None
            if latest is not None:
                self._restore(*latest)
            else:
                self._fresh_start()
            self.objective_step = self._make_step()
            if main:
                store.write_config(self.config.to_json())  # exactly an EnvACEConfig: readers validate it
            summary = self._loop()
        except BaseException as error:
            if main:
                message = f"{type(error).__name__}: {error}"
                store.write_status("failed", error=message, traceback=traceback.format_exc()[-4000:],
                                   step=self.step_or_zero)
            raise
        if main:
            store.write_summary(summary.to_json())
            store.write_status("done", step=summary.steps, steps=self.config.steps)
        return summary

    @property
    def is_main(self) -> bool:
        """Whether this process writes the run store (the only one, unless launched on several processes)."""
        return self.parallel.is_main

    @property
    def step_or_zero(self) -> int:
        return self.state.step if hasattr(self, "state") else 0

    # ================================================================== loop

    def _fresh_start(self) -> None:
        store = self.store
        if self.is_main:
            for name in ("metrics.jsonl", "probes.jsonl", "summary.json"):
                (store.root / name).unlink(missing_ok=True)
            if store.checkpoints_dir.exists():
                shutil.rmtree(store.checkpoints_dir)
            store.prepare()
        self.parallel.barrier()
        losses = self._diagnostic_losses()
        self.state.first = {"act_loss": losses.get("act"), "rehearse_loss": losses.get("rehearse")}

    def _loop(self) -> TrainSummary:
        config = self.config
        started = time.perf_counter()
        tokens_total, seconds_total = 0, 0.0
        rows: list[dict[str, Any]] = []
        while self.state.step < config.steps:
            self.state.step += 1
            step_started = time.perf_counter()
            self.optimization.set_step(self.state.step - 1)
            row = self.parallel.merge_rows(self.objective_step(self.state))
            elapsed = time.perf_counter() - step_started
            tokens_total += row.pop("_tokens", 0)
            seconds_total += elapsed
            row.update(step=self.state.step, lr=self.optimization.lr, time_s=round(elapsed, 4),
                       tokens_per_s=round(row.get("tokens", 0) / max(elapsed, 1e-9), 1))
            last = self.state.step == config.steps
            if (config.probe.every and self.state.step % config.probe.every == 0) or last:
                row.update(self._probe())
            if self.is_main and (self.state.step % config.log_every == 0 or last or "rehearsal_fidelity" in row):
                clean = {key: value for key, value in row.items() if value is not None}
                self.store.append_metrics(clean)
                rows.append(clean)
                if self.progress is not None:
                    self.progress(clean)
            if last or (config.checkpoint_every and self.state.step % config.checkpoint_every == 0):
                self._save_checkpoint()
            if self.is_main:
                self.store.write_status("running", step=self.state.step, steps=config.steps)
        self.parallel.barrier()  # the main process's metrics are complete before anyone reads them
        losses = self._diagnostic_losses()
        history = self.store.metrics()
        rewards = [row["reward"] for row in history if row.get("reward") is not None]
        rehearse_rewards = [row["reward_rehearse"] for row in history if row.get("reward_rehearse") is not None]
        latest = self.store.latest_checkpoint()
        return TrainSummary(
            run_dir=str(self.store.root),
            objective=config.objective,
            steps=self.state.step,
            act_loss_first=rounded(self.state.first.get("act_loss")),
            act_loss_last=rounded(losses.get("act")),
            rehearse_loss_first=rounded(self.state.first.get("rehearse_loss")),
            rehearse_loss_last=rounded(losses.get("rehearse")),
            rehearsal_fidelity=rounded(self.state.last_fidelity.get(config.probe.metric)),
            fidelity={key: value for key, value in self.state.last_fidelity.items() if key != "examples"},
            tokens_per_s=round(tokens_total / max(seconds_total, 1e-9), 1),
            time_s=round(time.perf_counter() - started, 2),
            reward_first=rounded(rewards[0]) if rewards else None,
            reward_last=rounded(mean(rewards[-3:])) if rewards else None,
            rehearse_reward_first=rounded(rehearse_rewards[0]) if rehearse_rewards else None,
            rehearse_reward_last=rounded(mean(rehearse_rewards[-3:])) if rehearse_rewards else None,
            checkpoint=str(latest[1]) if latest else None,
            resumed_from=self.resumed_from,
            drift=self.state.drift,
            switched_at=self.state.switched_at,
            probe_source=self.data.episodes.probe_source,
            probe_split=self.data.episodes.probe_split,
            fingerprint=_fingerprint(config),
            data=self.data.counts(),
        )

    def _make_step(self) -> SupervisedStep | GrpoStep:
        """The step the objective takes, over this run's model, optimizer and data (built after a resume, which
        replaces the response cache)."""
        config = self.config
        supervised = SupervisedStep(self.losses, self.data.streams, self.optimization, self.parallel,
                                    batch_size=config.batch_size, lam=config.lam)
        if config.objective == "joint":
            return supervised
        policy = GrpoPolicy(self.model, self.tokenizer, self.reference, self.generator)
        return GrpoStep(config, policy, supervised, specs=self.data.specs, templates=self.templates,
                        diagnostic=self.data.diagnostic, book=self.book, cache=self.cache, pad_id=self.fmt.pad_id,
                        device=self.device)

    def _diagnostic_losses(self) -> dict[str, float | None]:
        return self.losses.evaluate(self.data.diagnostic)

    # ================================================================== probe

    def _probe(self) -> dict[str, Any]:
        config = self.config
        probe = config.probe
        result = rehearsal_fidelity(self.model, self.tokenizer, self.data.probe_samples,
                                    max_new_tokens=probe.max_new_tokens, lookup=config.prompt_lookup.settings())
        value = result.get(probe.metric)
        self.state.last_fidelity = result
        drift = False
        if value is not None:
            if self.state.best_fidelity is not None and self.state.best_fidelity - value > probe.drift_tolerance:
                drift = True
            if self.state.switched_at is not None and probe.threshold is not None and value < probe.threshold:
                drift = True
            self.state.best_fidelity = value if self.state.best_fidelity is None else max(self.state.best_fidelity, value)
        self.state.drift = self.state.drift or drift
        switched = None
        if (config.objective == "grpo" and probe.switch_to_imagined and probe.threshold is not None
                and value is not None):
            if self.state.source == "real" and value >= probe.threshold:
                self.state.source, self.state.switched_at, switched = "imagined", self.state.step, "imagined"
            elif self.state.source == "imagined" and self.state.switched_at is not None and drift:
                self.state.source, switched = "real", "real"  # back to the real environment until it passes again
        diagnostic = self._diagnostic_losses()
        if self.is_main:
            self.store.append_probe({"step": self.state.step, "metric": probe.metric, "value": value, "drift": drift,
                                     "source": self.data.episodes.probe_source,
                                     "split": self.data.episodes.probe_split,
                                     "skipped_for_length": self.data.probe.skipped_for_length, **result})
        row: dict[str, Any] = {
            "rehearsal_fidelity": rounded(value), "drift": drift,
            "act_loss_eval": rounded(diagnostic.get("act")), "rehearse_loss_eval": rounded(diagnostic.get("rehearse")),
        }
        for name in ("exact_match", "token_f1", "edit_similarity"):
            row[f"fidelity_{name}"] = rounded(result.get(name))
        if switched:
            row["switched_to"] = switched
        return row

    # ================================================================== checkpoints

    def _trainer_state(self) -> dict[str, Any]:
        return self.state.to_json(
            fingerprint=_fingerprint(self.config),
            cache=self.cache.to_json() if self.config.rollout_source == "cache" else None,
            lora=self.config.lora is not None, processes=self.parallel.world,
        )

    def _save_checkpoint(self) -> None:
        import torch
        from safetensors.torch import save_file

        # every process's RNG (each samples its own rollouts) and a checksum of its weights; only the main process
        # writes, after checking that the processes still hold the same weights
        checksum = (float(sum(p.detach().double().sum() for p in self.model.parameters()))
                    if self.parallel.active else 0.0)
        states = self.parallel.gather((torch.get_rng_state(), self.generator.get_state().to("cpu"), checksum))
        if len({state[2] for state in states}) > 1:
            raise RuntimeError(f"step {self.state.step}: the processes' weights differ (checksums "
                               f"{[state[2] for state in states]}); data-parallel training went out of step")
        if not self.is_main:
            self.parallel.barrier()
            return
        with staged_folder(self.store.checkpoint_dir(self.state.step), "checkpoint") as staging:
            if self.config.lora is not None:
                save_pretrained(staging, copy.deepcopy(self.model).merge_and_unload(), self.tokenizer)
                save_pretrained(staging / "adapter", self.model)
            else:
                save_pretrained(staging, self.model, self.tokenizer)
            # the run's config travels with the checkpoint (prompt templates for evaluation elsewhere)
            (staging / "envace_config.json").write_text(json.dumps(self.config.to_json(), indent=1), encoding="utf-8")
            self.optimization.save(staging)
            rng = {"torch_cpu": states[0][0], "sampler": states[0][1]}
            for rank, (cpu_state, sampler, _) in enumerate(states[1:], start=1):
                rng[f"torch_cpu_rank{rank}"], rng[f"sampler_rank{rank}"] = cpu_state, sampler
            if torch.cuda.is_available():
                for index, value in enumerate(torch.cuda.get_rng_state_all()):
                    rng[f"torch_cuda_{index}"] = value
            save_file(rng, str(staging / "rng.safetensors"))
            (staging / "trainer_state.json").write_text(json.dumps(self._trainer_state()), encoding="utf-8")
        for _, old in self.store.checkpoints()[: -self.config.keep_checkpoints]:
            shutil.rmtree(old, ignore_errors=True)
        self.parallel.barrier()

    def _restore(self, step: int, folder: Path) -> None:
        import torch
        from safetensors.torch import load_file

        state = json.loads((folder / "trainer_state.json").read_text(encoding="utf-8"))
        if state.get("fingerprint") != _fingerprint(self.config):
            raise BadInputError(f"{self.store.root} holds a run of another configuration (checkpoint {folder.name}); "
                             "use another --out, or train(resume=False) to start over")
        if self.config.lora is not None:
            from peft import set_peft_model_state_dict

            adapter = folder / "adapter"
            weights = next(iter(sorted(adapter.glob("*.safetensors"))), None)
            if weights is None:
                raise MissingFileError("no adapter weights to resume from", where=str(adapter))
            set_peft_model_state_dict(self.model, load_file(str(weights), device=str(self.device)))
        else:
            restored, _ = load_policy(folder, device=str(self.device), dtype=self.config.dtype)
            self.model.load_state_dict(restored.state_dict())
            del restored
        self.model.train()
        self.optimization.load(folder, self.device)
        rng = load_file(str(folder / "rng.safetensors"))
        suffix = f"_rank{self.parallel.rank}" if self.parallel.rank else ""
        if f"sampler{suffix}" not in rng:
            raise BadInputError(f"{folder}: written by fewer processes than this run's {self.parallel.world}; resume "
                             "with as many processes as the run was started with")
        torch.set_rng_state(rng[f"torch_cpu{suffix}"])
        sampler = rng[f"sampler{suffix}"]
        self.generator.set_state(sampler.to(self.generator.device) if self.device.type != "cpu" else sampler)
        cuda_states = [rng[key] for key in sorted(k for k in rng if k.startswith("torch_cuda_"))]
        if cuda_states and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(cuda_states)
        self.state = TrainerState.from_json(state, default_source=self.config.rollout_source)
        if state.get("cache"):
            self.cache = RealResponseCache.from_json(state["cache"])
        self.resumed_from = step
        if self.is_main:
            self.store.truncate(step)
