"""EnvACE: one set of weights that acts (the next tool call) and rehearses (the tool's response).

    from worldsmith.envace import EnvACEConfig, Trainer
    summary = Trainer(EnvACEConfig.from_file("configs/envace_tiny.yaml")).train()

Dual-role data (`data`), joint supervised and role-wise GRPO training (`trainer` runs `supervised_step` or
`grpo_step`, both on the optimizer core `worldsmith.llm.training`; `grpo`),
rollouts from imagined / real / worldbook / cached answers with the act -> rehearse prefix
reused on one key/value cache (`rollouts`, `generate`), the rehearsal-fidelity probe (`probe`),
Ray Tune sweeps (`sweep`) and the run store (`runstore`).
"""

from worldsmith.envace.config import (
    ConfigError,
    DataConfig,
    EnvACEConfig,
    GRPOConfig,
    LoraSettings,
    ProbeConfig,
    RehearsalBudget,
    TemplateConfig,
)
from worldsmith.envace.data import (
    ROLE_ACT,
    ROLE_IDS,
    ROLE_REHEARSE,
    ChatFormat,
    DualRoleSample,
    DualRoleStream,
    EnvErrorOracle,
    Exchange,
    Templates,
    Transcript,
    build_samples,
    build_streams,
    environment_prompt,
    parse_call,
    policy_prompt,
    transcript_from_episode,
)
from worldsmith.envace.distributed import DataParallel
from worldsmith.envace.evaluate import EvalResult, EvalSettings, TaskRecord, evaluate_checkpoint
from worldsmith.envace.generate import DecodeStats, SegmentDecoder
from worldsmith.envace.grpo import group_advantages, grpo_loss
from worldsmith.envace.grpo_step import GrpoStep
from worldsmith.envace.modeling import collate_streams, load_policy, target_logprobs
from worldsmith.envace.probe import metric_functions, probe_transitions, rehearsal_fidelity
from worldsmith.envace.rehearsal import (
    RehearsalConfig,
    RehearsalPolicy,
    RehearsalRecord,
    is_irreversible,
    load_checkpoint_llm,
    templates_for_checkpoint,
)
from worldsmith.envace.rollouts import (
    SOURCES,
    CacheSource,
    ImaginedSource,
    RealResponseCache,
    RealSource,
    Reply,
    Rollout,
    RolloutGroup,
    RolloutSettings,
    RolloutSource,
    RolloutStep,
    TaskSpec,
    WorldbookSource,
    make_source_factory,
    rollout,
    score_rollouts,
    task_reward,
    task_specs,
)
from worldsmith.envace.supervised_step import SupervisedStep
from worldsmith.envace.trainer import Trainer, TrainSummary, load_episodes
from worldsmith.envace.trainer_state import TrainerState
from worldsmith.envace.training_runs import TrainingRunStore

__all__ = [
    "ROLE_ACT",
    "ROLE_IDS",
    "ROLE_REHEARSE",
    "SOURCES",
    "CacheSource",
    "ChatFormat",
    "ConfigError",
    "DataConfig",
    "DataParallel",
    "DecodeStats",
    "DualRoleSample",
    "DualRoleStream",
    "EnvACEConfig",
    "EnvErrorOracle",
    "EvalResult",
    "EvalSettings",
    "Exchange",
    "GRPOConfig",
    "GrpoStep",
    "ImaginedSource",
    "LoraSettings",
    "ProbeConfig",
    "RealSource",
    "RehearsalBudget",
    "RehearsalConfig",
    "RehearsalPolicy",
    "RehearsalRecord",
    "Reply",
    "RealResponseCache",
    "Rollout",
    "RolloutGroup",
    "RolloutSettings",
    "RolloutSource",
    "RolloutStep",
    "TrainingRunStore",
    "SegmentDecoder",
    "SupervisedStep",
    "TaskRecord",
    "TaskSpec",
    "TemplateConfig",
    "Templates",
    "TrainSummary",
    "Trainer",
    "TrainerState",
    "Transcript",
    "WorldbookSource",
    "build_samples",
    "build_streams",
    "collate_streams",
    "environment_prompt",
    "evaluate_checkpoint",
    "group_advantages",
    "grpo_loss",
    "is_irreversible",
    "load_checkpoint_llm",
    "load_episodes",
    "load_policy",
    "make_source_factory",
    "metric_functions",
    "parse_call",
    "policy_prompt",
    "probe_transitions",
    "rehearsal_fidelity",
    "rollout",
    "score_rollouts",
    "target_logprobs",
    "task_reward",
    "task_specs",
    "templates_for_checkpoint",
    "transcript_from_episode",
]
