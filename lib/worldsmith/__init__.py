"""worldsmith: turn recorded agent interactions into simulators of the environments they came from.

The front door, as `gymnasium` has one: the names a notebook needs, imported on first use so that
`import worldsmith` stays fast (no torch, pydantic models or harness until asked for)::

    import worldsmith as ws
    workspace = ws.Workspace("workspace")
    book = ws.build_simulator_book(workspace.dataset("alfworld").episodes(), name="alfworld").book
    model = ws.make_world_model("harness", book)          # any of ws.world_models()
    env = ws.make("alfworld")                              # any registered environment

Everything else stays in its subpackage (`worldsmith.traces`, `.workspace`, `.envs`, `.llm`,
`.worldbook`, `.sim`, `.evals`, `.envace`, `.serve`); the `worldsmith` CLI and the workbench sit on them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the subpackage that defines it (imported when the name is first used)
_FRONT_DOOR: dict[str, str] = {
    # traces and the workspace
    "Action": "worldsmith.traces",
    "ContextEvent": "worldsmith.traces",
    "Episode": "worldsmith.traces",
    "ImportReport": "worldsmith.traces",
    "Observation": "worldsmith.traces",
    "Provenance": "worldsmith.traces",
    "Reject": "worldsmith.traces",
    "Turn": "worldsmith.traces",
    "read_traces": "worldsmith.traces",
    "Dataset": "worldsmith.workspace",
    "EpisodeFilter": "worldsmith.workspace",
    "Workspace": "worldsmith.workspace",
    # environments (Gymnasium-style registry)
    "Env": "worldsmith.envs",
    "EnvSpec": "worldsmith.envs",
    "make": "worldsmith.envs",
    "register": "worldsmith.envs",
    # models
    "open_llm": "worldsmith.llm",
    "register_backend": "worldsmith.llm",
    # worldbooks
    "Worldbook": "worldsmith.worldbook",
    "WorldbookStore": "worldsmith.worldbook",
    "build_worldbook": "worldsmith.worldbook",
    # world models and simulation
    "Session": "worldsmith.sim",
    "SimEnv": "worldsmith.sim",
    "WorldModel": "worldsmith.sim",
    "make_world_model": "worldsmith.sim",
    "build_simulator_book": "worldsmith.sim",
    "world_model": "worldsmith.sim",
    "world_models": "worldsmith.sim",
    # evaluation and training
    "EvalConfig": "worldsmith.evals",
    "metric": "worldsmith.evals",
    "run_eval": "worldsmith.evals",
    "EnvACEConfig": "worldsmith.envace",
    # errors: one root a caller catches (`worldsmith.util.errors`)
    "BadInputError": "worldsmith.util.errors",
    "BusyError": "worldsmith.util.errors",
    "ConflictError": "worldsmith.util.errors",
    "NotFoundError": "worldsmith.util.errors",
    "UnavailableError": "worldsmith.util.errors",
    "WorldsmithError": "worldsmith.util.errors",
}

__all__ = [
    "__version__",
    "Action",
    "BadInputError",
    "BusyError",
    "ConflictError",
    "ContextEvent",
    "Dataset",
    "Env",
    "EnvACEConfig",
    "EnvSpec",
    "Episode",
    "EpisodeFilter",
    "EvalConfig",
    "ImportReport",
    "NotFoundError",
    "Observation",
    "Provenance",
    "Reject",
    "Session",
    "SimEnv",
    "Turn",
    "UnavailableError",
    "Workspace",
    "WorldModel",
    "Worldbook",
    "WorldbookStore",
    "WorldsmithError",
    "build_simulator_book",
    "build_worldbook",
    "make",
    "make_world_model",
    "metric",
    "open_llm",
    "read_traces",
    "register",
    "register_backend",
    "run_eval",
    "world_model",
    "world_models",
]

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time `__getattr__` imports on first use
    from worldsmith.envace import EnvACEConfig
    from worldsmith.envs import Env, EnvSpec, make, register
    from worldsmith.evals import EvalConfig, metric, run_eval
    from worldsmith.llm import open_llm, register_backend
    from worldsmith.sim import (
        Session,
        SimEnv,
        WorldModel,
        build_simulator_book,
        make_world_model,
        world_model,
        world_models,
    )
    from worldsmith.traces import (
        Action,
        ContextEvent,
        Episode,
        ImportReport,
        Observation,
        Provenance,
        Reject,
        Turn,
        read_traces,
    )
    from worldsmith.util.errors import (
        BadInputError,
        BusyError,
        ConflictError,
        NotFoundError,
        UnavailableError,
        WorldsmithError,
    )
    from worldsmith.workspace import Dataset, EpisodeFilter, Workspace
    from worldsmith.worldbook import Worldbook, WorldbookStore, build_worldbook


def __getattr__(name: str) -> Any:
    """Import a front-door name's subpackage on first use (PEP 562) and keep the name here."""
    module = _FRONT_DOOR.get(name)
    if module is None:
        raise AttributeError(f"module 'worldsmith' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_FRONT_DOOR})
