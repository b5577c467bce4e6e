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

Exported: the protocol (`WorldModel`, `WorldModelBase`, `Prediction`, `Audit`), the registry (`world_model`,
`make_world_model`, `world_models`, ...), `canonical_action` (every spelling of a call one action), the
baselines and the harness, sessions (`Session`, `find_sessions`, ...), `SimEnv`, `build_simulator_book` and the
uncertainty score (`Uncertainty`, `assess`, `rank_actions`).
Namespaces: `sources` (the answer-source plug-in API), `sidebyside` (several models stepped through one
episode), `htmlview` (those steps as HTML). Prompts, scoring, routing internals: import from their modules.
"""

from worldsmith.sim import htmlview, sidebyside, sources
from worldsmith.sim.base import Audit, HistoryItem, Prediction, WorldModel, WorldModelBase
from worldsmith.sim.baselines import DirectPrompting, NearestEvidence, TraceRAG, WorldbookPrompting
from worldsmith.sim.canonical import canonical_action
from worldsmith.sim.exploring import ExploringPolicy
from worldsmith.sim.factory import DEFAULT_WORLD_MODEL
from worldsmith.sim.harness import Harness, HarnessConfig
from worldsmith.sim.registry import (
    UnknownWorldModelError,
    WorldModelSpec,
    make_world_model,
    needs_llm,
    takes_llm,
    world_model,
    world_model_names,
    world_model_spec,
    world_models,
)
from worldsmith.sim.route_learning import ROUTE_TURNS, SIMULATOR_STAGES, build_simulator_book
from worldsmith.sim.session import Session, SessionError, SessionTurn, find_sessions, new_session_name, session_name
from worldsmith.sim.simenv import SimEnv
from worldsmith.sim.uncertainty import Uncertainty, assess, rank_actions

__all__ = [
    "DEFAULT_WORLD_MODEL",
    "ROUTE_TURNS",
    "SIMULATOR_STAGES",
    "Audit",
    "DirectPrompting",
    "ExploringPolicy",
    "Harness",
    "HarnessConfig",
    "HistoryItem",
    "NearestEvidence",
    "Prediction",
    "Session",
    "SessionError",
    "SessionTurn",
    "SimEnv",
    "TraceRAG",
    "Uncertainty",
    "UnknownWorldModelError",
    "WorldModel",
    "WorldModelBase",
    "WorldModelSpec",
    "WorldbookPrompting",
    "assess",
    "build_simulator_book",
    "canonical_action",
    "find_sessions",
    "htmlview",
    "make_world_model",
    "needs_llm",
    "new_session_name",
    "rank_actions",
    "session_name",
    "sidebyside",
    "sources",
    "takes_llm",
    "world_model",
    "world_model_names",
    "world_model_spec",
    "world_models",
]
