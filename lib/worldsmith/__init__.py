"""worldsmith: turn recorded agent interactions into simulators of the environments they came from.

The foundation is one trace model (`worldsmith.traces`) and the on-disk workspace
(`worldsmith.workspace`); the `worldsmith` CLI and the Streamlit workbench sit on them.
"""

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
from worldsmith.workspace import Dataset, EpisodeFilter, Workspace

__version__ = "0.1.0"

__all__ = [
    "Action",
    "ContextEvent",
    "Dataset",
    "Episode",
    "EpisodeFilter",
    "ImportReport",
    "Observation",
    "Provenance",
    "Reject",
    "Turn",
    "Workspace",
    "__version__",
    "read_traces",
]
