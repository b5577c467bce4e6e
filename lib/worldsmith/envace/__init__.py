"""EnvACE: one set of weights that acts (the next tool call) and rehearses (the tool's response).

    from worldsmith.envace import EnvACEConfig, Trainer
    summary = Trainer(EnvACEConfig.from_file("configs/envace_tiny.yaml")).train()

Dual-role data (`data`), joint supervised and role-wise GRPO training (`trainer` runs `supervised_step` or
`grpo_step`, both on the optimizer core `worldsmith.llm.training`; `grpo`),
rollouts from imagined / real / worldbook / cached answers with the act -> rehearse prefix
reused on one key/value cache (`rollouts`, `generate`), the rehearsal-fidelity probe (`probe`),
Ray Tune sweeps (`sweep`) and the run store (`training_runs`).

Exported: the configuration (`EnvACEConfig` and its parts, `ConfigError`, `resolve_path`), training
(`Trainer`, `TrainSummary`, `TrainerState`, and its steps `SupervisedStep` and `GrpoStep`), evaluation and rehearsal of a checkpoint (`evaluate_checkpoint`,
`RehearsalPolicy`, `rehearsal_fidelity`), the dual-role prompts (`Templates`, `ChatFormat`, `policy_prompt`,
...), `SweepConfig` and the run store (`TrainingRunStore`). Namespace: `training_runs` (run folders and launched
jobs). Rollout sources, GRPO losses and modeling helpers: import from their modules.
"""

from worldsmith.envace import training_runs
from worldsmith.envace.config import (
    DEFAULT_MODEL,
    ConfigError,
    DataConfig,
    EnvACEConfig,
    GRPOConfig,
    LoraSettings,
    ProbeConfig,
    RehearsalBudget,
    TemplateConfig,
    resolve_path,
)
from worldsmith.envace.data import (
    ROLE_ACT,
    ROLE_REHEARSE,
    ChatFormat,
    Templates,
    build_samples,
    environment_prompt,
    policy_prompt,
    transcript_from_episode,
)
from worldsmith.envace.evaluate import EvalResult, EvalSettings, evaluate_checkpoint
from worldsmith.envace.generate import SegmentDecoder
from worldsmith.envace.grpo_step import GrpoStep
from worldsmith.envace.modeling import load_policy
from worldsmith.envace.probe import probe_transitions, rehearsal_fidelity
from worldsmith.envace.rehearsal import RehearsalConfig, RehearsalPolicy, load_checkpoint_llm
from worldsmith.envace.rollouts import task_specs
from worldsmith.envace.supervised_step import SupervisedStep
from worldsmith.envace.sweep import SweepConfig
from worldsmith.envace.trainer import Trainer, TrainSummary, load_episodes
from worldsmith.envace.trainer_state import TrainerState
from worldsmith.envace.training_runs import TrainingRunStore

__all__ = [
    "DEFAULT_MODEL",
    "ROLE_ACT",
    "ROLE_REHEARSE",
    "ChatFormat",
    "ConfigError",
    "DataConfig",
    "EnvACEConfig",
    "EvalResult",
    "EvalSettings",
    "GRPOConfig",
    "GrpoStep",
    "LoraSettings",
    "ProbeConfig",
    "RehearsalBudget",
    "RehearsalConfig",
    "RehearsalPolicy",
    "SegmentDecoder",
    "SupervisedStep",
    "SweepConfig",
    "TemplateConfig",
    "Templates",
    "TrainSummary",
    "Trainer",
    "TrainerState",
    "TrainingRunStore",
    "build_samples",
    "environment_prompt",
    "evaluate_checkpoint",
    "load_checkpoint_llm",
    "load_episodes",
    "load_policy",
    "policy_prompt",
    "probe_transitions",
    "rehearsal_fidelity",
    "resolve_path",
    "task_specs",
    "training_runs",
    "transcript_from_episode",
]
