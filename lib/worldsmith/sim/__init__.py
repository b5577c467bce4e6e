"""Simulators: the `WorldModel` protocol, persistent sessions, baselines, and the simulator as an `Env`.

The harness answers from plug-in answer sources (`sim.sources`: one module each behind `AnswerSource`, one
registry, `@answer_source`); routing (`sim.routing`) picks among them by held-out evidence and every
prediction's audit names its source (`Audit.source`).

    from worldsmith.sim import NearestEvidence, Session, SimEnv
    model = NearestEvidence(book)                      # or DirectPrompting(llm), TraceRAG(llm, book), ...
    session = Session.create("runs/s1", book_ref="alfworld@abc123", model=model.name,
                             initial_observation=opening)
    session.attach(model)
    turn = session.play(model, "go to desk 1")         # predict, commit (SQLite + mirrors), accept
    print(turn.prediction.observation, turn.prediction.audit.route)
"""

from worldsmith.sim.agent import Submission, run_agent
from worldsmith.sim.base import (
    Audit,
    HistoryItem,
    NothingToCommitError,
    Prediction,
    WorldModel,
    WorldModelBase,
    action_line,
    episode_prefix,
)
from worldsmith.sim.baselines import DirectPrompting, NearestEvidence, Searcher, TraceRAG, WorldbookPrompting
from worldsmith.sim.exploring import ExploringPolicy
from worldsmith.sim.factory import DEFAULT_WORLD_MODEL
from worldsmith.sim.harness import Harness, HarnessConfig, schema_problems
from worldsmith.sim.oracle_model import RealEnvOracle
from worldsmith.sim.prompts import (
    PromptContext,
    PromptFit,
    episode_preamble,
    fit_simulator_messages,
    parse_observation,
    render_worldbook,
    simulator_messages,
)
from worldsmith.sim.registry import (
    UnknownWorldModelError,
    WorldModelSpec,
    canonical_world_model,
    make_world_model,
    world_model,
    world_model_names,
    world_model_spec,
    world_models,
)
from worldsmith.sim.retrieval import EvidenceScorer, ScoredEvidence, action_arguments
from worldsmith.sim.route_learning import (
    ROUTE_TURNS,
    SIMULATOR_STAGES,
    RouteStage,
    build_simulator_book,
    fold_book,
    learn_routes,
    route_sample,
    simulator_stages,
)
from worldsmith.sim.routing import choose_route
from worldsmith.sim.scoring import (
    DiffSegment,
    Score,
    edit_similarity,
    exact_match,
    observation_score,
    token_f1,
    word_diff,
)
from worldsmith.sim.session import (
    MemoryItem,
    Session,
    SessionError,
    SessionExistsError,
    SessionNotFoundError,
    SessionTurn,
    StaleSessionError,
    TurnRecord,
    find_sessions,
    fork_directory,
    new_session_name,
    session_name,
    state_differences,
)
from worldsmith.sim.sidebyside import (
    MethodStatus,
    MethodStep,
    SideBySide,
    StateChange,
    StepView,
    evidence_without,
    model_failure,
    state_changes,
)
from worldsmith.sim.simenv import GYMNASIUM_AVAILABLE, GymnasiumSimEnv, SimEnv
from worldsmith.sim.sources import (
    SOURCE_PLUGINS_VARIABLE,
    Answer,
    AnswerSource,
    SourceContext,
    SourceSpec,
    Step,
    TrackerSource,
    answer_source,
    register_source,
    source_specs,
    unregister_source,
)
from worldsmith.sim.sources.aligned import AlignedEvidence
from worldsmith.sim.sources.base import CandidateAnswer
from worldsmith.sim.sources.entities import EntityTracker
from worldsmith.sim.sources.fields import FieldTracker
from worldsmith.sim.sources.inventory import Carriers, InventoryTracker
from worldsmith.sim.sources.places import PlaceTracker
from worldsmith.sim.sources.scope import ScopeTracker
from worldsmith.sim.sources.shell import ShellTracker
from worldsmith.sim.sources.views import ViewEdits
from worldsmith.sim.uncertainty import (
    SOURCE_LEVELS,
    BookCounts,
    Uncertainty,
    assess,
    book_counts,
    information,
    rank_actions,
    situation,
)

__all__ = [
    "ExploringPolicy",
    "SOURCE_LEVELS",
    "BookCounts",
    "Uncertainty",
    "assess",
    "book_counts",
    "information",
    "rank_actions",
    "situation",
    "SOURCE_PLUGINS_VARIABLE",
    "Answer",
    "AnswerSource",
    "SourceContext",
    "SourceSpec",
    "Step",
    "TrackerSource",
    "answer_source",
    "register_source",
    "source_specs",
    "unregister_source",
    "AlignedEvidence",
    "Carriers",
    "EntityTracker",
    "FieldTracker",
    "InventoryTracker",
    "PlaceTracker",
    "CandidateAnswer",
    "ScopeTracker",
    "ShellTracker",
    "ViewEdits",
    "choose_route",
    "learn_routes",
    "ROUTE_TURNS",
    "RouteStage",
    "route_sample",
    "SIMULATOR_STAGES",
    "build_simulator_book",
    "fold_book",
    "simulator_stages",
    "DiffSegment",
    "MethodStatus",
    "MethodStep",
    "Score",
    "SideBySide",
    "StateChange",
    "StepView",
    "edit_similarity",
    "exact_match",
    "observation_score",
    "state_changes",
    "evidence_without",
    "model_failure",
    "token_f1",
    "word_diff",
    "schema_problems",
    "run_agent",
    "make_world_model",
    "Submission",
    "HarnessConfig",
    "Harness",
    "UnknownWorldModelError",
    "WorldModelSpec",
    "canonical_world_model",
    "world_model",
    "world_model_names",
    "world_model_spec",
    "world_models",
    "DEFAULT_WORLD_MODEL",
    "GYMNASIUM_AVAILABLE",
    "Audit",
    "DirectPrompting",
    "EvidenceScorer",
    "GymnasiumSimEnv",
    "HistoryItem",
    "MemoryItem",
    "NearestEvidence",
    "NothingToCommitError",
    "Prediction",
    "PromptContext",
    "PromptFit",
    "RealEnvOracle",
    "ScoredEvidence",
    "Searcher",
    "Session",
    "SessionError",
    "SessionExistsError",
    "SessionNotFoundError",
    "SessionTurn",
    "SimEnv",
    "StaleSessionError",
    "TraceRAG",
    "TurnRecord",
    "WorldModel",
    "WorldModelBase",
    "WorldbookPrompting",
    "action_arguments",
    "action_line",
    "episode_prefix",
    "episode_preamble",
    "find_sessions",
    "fit_simulator_messages",
    "fork_directory",
    "new_session_name",
    "session_name",
    "parse_observation",
    "render_worldbook",
    "simulator_messages",
    "state_differences",
]
