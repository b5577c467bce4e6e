"""EnvACE run configuration: one pydantic model, read from YAML or JSON with errors that name the field.

Why one model: the CLI, the sweep (which overrides dotted fields per trial), the workbench form and
the run store (`config.json`) all speak the same shape, and a typo in a config file must fail
before minutes of training, naming the file and the field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from worldsmith.envace.training_runs import runs_dir
from worldsmith.llm.prompt_lookup import PromptLookup
from worldsmith.util.errors import BadInputError
from worldsmith.util.names import MAX_NAME, check_name
from worldsmith.util.paths import resolve_user_path

__all__ = [
    "DEFAULT_MODEL",
    "ConfigError",
    "DataConfig",
    "EnvACEConfig",
    "GRPOConfig",
    "LoraSettings",
    "ProbeConfig",
    "PromptLookupSettings",
    "RehearsalBudget",
    "TemplateConfig",
    "apply_overrides",
    "resolve_path",
]

DEFAULT_MODEL = "data_samples/models/tiny"
_STRICT = ConfigDict(extra="forbid")


def resolve_path(text: str | Path, workspace: str | Path | None = None) -> Path:
    """A config path, resolved as the page, the CLI and a background job all do (`util.paths.resolve_user_path`):
    absolute as is; relative to the workspace root, else to the source checkout.

    So the bundled example config (data_samples/...) runs from any directory.
    """
    return resolve_user_path(text, workspace)


class ConfigError(BadInputError):
    """A configuration file or value is invalid; the message names the file and the field."""


class TemplateConfig(BaseModel):
    """The two role prompts (None: the defaults in `worldsmith.envace.data`).

    Slots: `{env}`, `{task}`, `{tools}` (all tool signatures); the environment prompt also gets
    `{tool}` (the called tool's schema) and `{error_example}` (how an invalid call is answered).
    """

    model_config = _STRICT

    policy_system: str | None = None
    environment_system: str | None = None


class DataConfig(BaseModel):
    """Where the trajectories come from and how they become dual-role samples."""

    model_config = _STRICT

    dataset: str | None = Field(default=None, description="workspace dataset name")
    paths: list[str] = Field(default_factory=list, description="JSONL files of episodes (worldsmith format)")
    split: str | None = Field(default=None, description="split of the dataset to train on")
    env: str | None = Field(default=None, description="registered real environment (rollouts, rewards, errors); "
                            "default: the one of the episodes' environment id (`bfcl/...` -> bfcl)")
    max_episodes: int | None = Field(default=None, ge=1)
    max_seq_len: int = Field(default=1024, ge=64, description="tokens per packed episode chunk")
    tool_detail: Literal["names", "signatures", "full"] = "signatures"
    max_observation_chars: int = Field(default=800, ge=16)
    handovers: bool = Field(default=True, description="hand-overs to the user (BFCL's respond) as samples")
    invalid_call_rate: float = Field(default=0.0, ge=0.0, le=1.0,
                                     description="share of tool steps that also get an invalid-call rehearse sample")
    templates: TemplateConfig = Field(default_factory=TemplateConfig)

    @model_validator(mode="after")
    def _source(self) -> DataConfig:
        if self.dataset is None and not self.paths:
            raise BadInputError("give data.dataset (a workspace dataset) or data.paths (JSONL episode files)")
        return self


class GRPOConfig(BaseModel):
    """Role-wise GRPO: G rollouts per task, advantages normalised per (task, role) group."""

    model_config = _STRICT

    group_size: int = Field(default=4, ge=2, description="G: rollouts per task")
    clip: float = Field(default=0.2, gt=0.0)
    kl_coef: float = Field(default=0.0, ge=0.0, description="KL to the starting model (0: no reference model)")
    dr_grpo: bool = Field(default=False, description="Dr.GRPO: no std normalisation, token sums over a constant")
    train_roles: Literal["both", "act", "rehearse"] = "both"
    max_new_tokens: int = Field(default=48, ge=1, description="tokens per action and per rehearsed response")
    temperature: float = Field(default=1.0, gt=0.0)
    max_steps: int = Field(default=6, ge=1, description="actions per rollout")
    updates_per_batch: int = Field(default=1, ge=1, description="optimizer steps on one batch of rollouts")
    reward: Literal["binary", "partial", "shaped"] = Field(
        default="partial", description="task success; BFCL's share of ground-truth calls run; or that share "
        "averaged with the share of calls that ran without an error")
    rehearse_metric: Literal["exact_match", "token_f1", "edit_similarity"] = "token_f1"
    rehearse_in_real: bool = Field(default=True, description="also rehearse each real step (trains the rehearse role)")
    rehearse_calls_only: bool = Field(
        default=False, description="rehearse real steps only where the action is a call (text that is no call "
        "is answered by the harness's parse error, not by the environment)")
    rehearse_credit: Literal["rollout", "transition"] = Field(
        default="rollout", description="rehearse advantages per rollout (its mean fidelity against the task's other "
        "rollouts) or per transition (each rehearsal against the group's other rehearsals of the same call after "
        "the same calls: the real answer is the same for all of them, so the baseline is exact; a rehearsal with "
        "no such sibling gets no advantage)")
    sft_coef: float = Field(default=0.0, ge=0.0,
                            description="add this times the joint supervised loss on data batches (0: pure GRPO)")
    log_alignment: bool = Field(
        default=False, description="log, per step and role, the cosine between the gradient of the role's policy-"
        "gradient loss and that of its supervised loss on the diagnostic chunks (pg_align_act, pg_align_rehearse; "
        "> 0: a small gradient step of that role's GRPO loss alone lowers its cross-entropy); a few extra backward "
        "passes a step")
    cache_key: Literal["prefix", "call"] = Field(
        default="prefix", description="cache source: a response is reused for the same call after the same calls "
        "(prefix) or for the same call anywhere in the task (call)")


class ProbeConfig(BaseModel):
    """The rehearsal-fidelity probe on held-out real transitions."""

    model_config = _STRICT

    every: int = Field(default=0, ge=0, description="steps between probes (0: only at the end)")
    n_transitions: int = Field(default=16, ge=1)
    paths: list[str] = Field(default_factory=list, description="held-out episode files (else the dataset's split)")
    dataset: str | None = None
    split: str | None = None
    metric: Literal["exact_match", "token_f1", "edit_similarity"] = "token_f1"
    threshold: float | None = Field(default=None, ge=0.0, le=1.0,
                                    description="fidelity the probe must reach before switching to imagined")
    switch_to_imagined: bool = False
    drift_tolerance: float = Field(default=0.1, ge=0.0, description="a drop below the best probe that flags drift")
    holdout: int = Field(default=0, ge=0, description="episodes held out of training for the probe when no probe "
                         "data is given (the last ones by id); 0: the data's test/validation split, else a "
                         "`holdout_share` of its trajectory families")
    holdout_share: float = Field(default=0.2, gt=0.0, lt=1.0, description="share of the trajectory families held "
                                 "out of training for the probe when the data has no test/validation split")
    source: Literal["held-out", "train"] = Field(
        default="held-out", description="held-out: the probe never sees a training episode; train: probe training "
        "transitions (a fit check, labelled as such)")
    max_new_tokens: int = Field(default=96, ge=1)


class LoraSettings(BaseModel):
    """Optional LoRA adapters (needs peft: pip install 'worldsmith[envace]')."""

    model_config = _STRICT

    r: int = Field(default=8, ge=1)
    alpha: int = Field(default=16, ge=1)
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    target_modules: list[str] = Field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])


class PromptLookupSettings(BaseModel):
    """Prompt-lookup decoding of rehearsals (`worldsmith.llm.prompt_lookup`): a draft copied from the context,
    verified in one forward pass; greedy text is unchanged and sampled text keeps its distribution."""

    model_config = _STRICT

    enabled: bool = Field(default=True, description="use it for the probe's greedy rehearsals")
    rollouts: bool = Field(
        default=False, description="also for the rehearse step of GRPO rollouts (sampled): off by default, as on "
        "the bundled tiny checkpoint at temperature 1 too few drafts are accepted to pay for the wider passes "
        "(benchmarks/RESULTS.md)")
    draft: int = Field(default=4, ge=1, description="tokens drafted per pass")
    ngram: int = Field(default=3, ge=1, description="longest n-gram of the context matched (then shorter ones)")

    def settings(self, *, rollouts: bool = False) -> PromptLookup | None:
        """The decoder's settings for the probe (or, with `rollouts`, for GRPO rollouts); None when off there."""
        if not self.enabled or (rollouts and not self.rollouts):
            return None
        return PromptLookup(True, self.draft, self.ngram)


class RehearsalBudget(BaseModel):
    """Test-time rehearsal knobs (K sequential imagined steps, N parallel continuations) that sweeps vary."""

    model_config = _STRICT

    k: int = Field(default=0, ge=0)
    n: int = Field(default=0, ge=0)
    irreversible_only: bool = False


class EnvACEConfig(BaseModel):
    """One EnvACE training run."""

    model_config = _STRICT

    name: str | None = Field(default=None, description="run name (default: derived from the config)")
    model: str = Field(default=DEFAULT_MODEL, description="local Hugging Face folder, or a checkpoint of a run")
    workspace: str | None = Field(default=None, description="workspace root (datasets, worldbooks, runs)")
    out: str | None = Field(default=None, description="run folder (default: <workspace>/runs/envace/<name>)")
    data: DataConfig
    objective: Literal["joint", "grpo"] = "joint"
    lam: float = Field(default=1.0, ge=0.0, description="λ: weight of the rehearse loss (0: the plain agent)")
    lr: float = Field(default=1e-3, gt=0.0)
    lr_schedule: Literal["constant", "cosine"] = Field(default="cosine", description="after warmup; cosine ends at 0.1×")
    warmup_steps: int = Field(default=0, ge=0)
    weight_decay: float = Field(default=0.0, ge=0.0)
    grad_clip: float = Field(default=1.0, gt=0.0)
    steps: int = Field(default=40, ge=1)
    batch_size: int = Field(default=2, ge=1, description="episode chunks per step (joint); tasks per step (grpo)")
    seed: int = 0
    threads: int | None = Field(default=None, ge=1, description="torch CPU threads (default: OMP_NUM_THREADS)")
    device: str | None = Field(default=None, description="cpu, cuda, cuda:1 (default: cuda when available)")
    dtype: Literal["float32", "bfloat16", "float16"] | None = Field(
        default=None, description="training dtype (default: float32 on CPU, bfloat16 on GPU)")
    grpo: GRPOConfig = Field(default_factory=GRPOConfig)
    rollout_source: Literal["imagined", "real", "worldbook", "cache"] = "real"
    worldbook: str | None = Field(default=None, description="worldbook name for the worldbook source")
    worldbook_version: str | None = None
    probe: ProbeConfig = Field(default_factory=ProbeConfig)
    log_every: int = Field(default=1, ge=1)
    checkpoint_every: int = Field(default=0, ge=0, description="steps between checkpoints (0: only the last)")
    keep_checkpoints: int = Field(default=2, ge=1)
    lora: LoraSettings | None = None
    rehearsal: RehearsalBudget = Field(default_factory=RehearsalBudget)
    prompt_lookup: PromptLookupSettings = Field(default_factory=PromptLookupSettings)

    @field_validator("name", "worldbook")
    @classmethod
    def _folder_name(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A run or worldbook name becomes a folder: the one name rule (`--set name=../../X` never escapes)."""
        return None if value is None else check_name(value, "run" if info.field_name == "name" else "worldbook")

    @model_validator(mode="after")
    def _consistent(self) -> EnvACEConfig:
        if self.rollout_source == "worldbook" and self.objective == "grpo" and not self.worldbook:
            raise BadInputError("rollout_source 'worldbook' needs worldbook (a worldbook name in the workspace)")
        return self

    # -------------------------------------------------------------- files

    @classmethod
    def from_file(cls, path: str | Path, overrides: dict[str, Any] | None = None) -> EnvACEConfig:
        """Read a YAML or JSON config; relative paths inside stay relative to the working directory."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"cannot read the config: {error.strerror or error}", where=str(path)) from None
        try:
            if path.suffix.lower() == ".json":
                raw = json.loads(text)
            else:
                import yaml

                raw = yaml.safe_load(text)
        except (json.JSONDecodeError, ValueError) as error:
            raise ConfigError(f"not valid JSON: {error}", where=str(path)) from None
        except Exception as error:  # noqa: BLE001 - yaml's errors carry the line and column
            raise ConfigError(f"not valid YAML: {error}", where=str(path)) from None
        if not isinstance(raw, dict):
            raise ConfigError(f"the config must be a mapping of fields, not {type(raw).__name__}", where=str(path))
        return cls.from_dict(apply_overrides(raw, overrides or {}), source=str(path))

    @classmethod
    def from_dict(cls, raw: dict[str, Any], *, source: str = "config") -> EnvACEConfig:
        try:
            return cls.model_validate(raw)
        except ValidationError as error:
            problems = []
            for item in error.errors():
                field = ".".join(str(part) for part in item["loc"]) or "(top level)"
                problems.append(f"{field}: {item['msg']}")
            raise ConfigError(f"{source}: invalid config: " + "; ".join(problems)) from None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def with_overrides(self, overrides: dict[str, Any]) -> EnvACEConfig:
        """A copy with dotted fields replaced (`{"grpo.group_size": 2, "lam": 0}`), validated again."""
        return EnvACEConfig.from_dict(apply_overrides(self.to_json(), overrides), source="overrides")

    def run_name(self) -> str:
        if self.name:
            return self.name
        data = self.data.dataset or (Path(self.data.paths[0]).stem if self.data.paths else "data")
        data = re.sub(r"[^A-Za-z0-9._-]+", "_", data).lstrip("._-") or "data"  # a file stem may hold anything
        return check_name(f"{self.objective}-{data}-lam{self.lam:g}-s{self.seed}"[:MAX_NAME], "run")

    def run_dir(self, out: str | Path | None = None) -> Path:
        """Where the run store lives: `out`, else `config.out`, else `<workspace>/runs/envace/<name>`."""
        if out is not None:
            return Path(out)
        if self.out:
            return Path(self.out)
        from worldsmith.workspace import Workspace

        return runs_dir(Workspace(self.workspace).root) / self.run_name()


def apply_overrides(raw: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """`raw` with dotted keys set (`"grpo.clip": 0.1` sets raw["grpo"]["clip"]); `raw` is not changed."""
    out = json.loads(json.dumps(raw))
    for dotted, value in overrides.items():
        parts = dotted.split(".")
        node = out
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(f"override {dotted!r}: {part!r} is not a section")
            node = child
        node[parts[-1]] = value
    return out
