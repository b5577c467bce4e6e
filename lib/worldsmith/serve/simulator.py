"""A worldbook served to outside clients: the book, its world model, and one `Session` per client.

Every client (an MCP connection) gets its own saved, audited session under
`<workspace>/sessions/`, so what a remote agent did can be reopened, forked and compared like
any session made with `worldsmith simulate`. A call is predicted by a fresh world model of the
chosen kind and committed to that client's session.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from worldsmith.llm import LLMError, default_model_spec, open_llm, resolve_spec
from worldsmith.serve.tool_schemas import ToolSpec, action_for_call, book_tools
from worldsmith.sim.base import WorldModel
from worldsmith.sim.factory import DEFAULT_WORLD_MODEL
from worldsmith.sim.registry import make_world_model, needs_llm, world_model_spec
from worldsmith.sim.session import Session, SessionTurn
from worldsmith.sim.simenv import SimEnv
from worldsmith.traces.model import Action, Episode
from worldsmith.util.errors import BadInputError
from worldsmith.workspace import Workspace
from worldsmith.worldbook import Worldbook, WorldbookStore

__all__ = ["ServeConfig", "ServedSession", "ServedWorldbook", "task_episodes"]


class ServeConfig(BaseModel):
    """What to serve: a worldbook version of a workspace, answered by a world model."""

    model_config = ConfigDict(extra="forbid")

    book: str = Field(min_length=1, description="Worldbook name in the workspace.")
    version: str | None = Field(default=None, description="Worldbook version (default: HEAD).")
    workspace: str | None = Field(default=None, description="Workspace folder (default: $WORLDSMITH_WORKSPACE).")
    method: str = Field(default=DEFAULT_WORLD_MODEL, description="World model name (`worldsmith.sim.world_models()`).")
    model: str | None = Field(default=None, description="LLM spec for world models that use one.")
    max_tokens: int = Field(default=256, ge=1)
    initial: str = Field(default="", description="Opening observation of each client's session.")
    task: str | None = None
    sessions: str | None = Field(default=None, description="Where client sessions go (default: <workspace>/sessions).")


class ServedSession:
    """One client's session: its world model started on it; each call is predicted and committed.

    Not thread-safe, and SQLite ties it to the thread that opened it: use it from one thread.
    """

    def __init__(self, book: Worldbook, session: Session, model: WorldModel) -> None:
        self.book = book
        self.session = session
        self.model = model
        session.attach(model)

    def call(self, name: str, arguments: dict[str, Any] | None) -> SessionTurn:
        """A tool call: checked against the book's schema (`UnknownToolError`, `ToolArgumentError`), then played."""
        return self.play(action_for_call(self.book, name, arguments))

    def play(self, action: Action) -> SessionTurn:
        return self.session.play(self.model, action)

    def close(self) -> None:
        closer = getattr(self.model, "close", None)
        if callable(closer):
            closer()
        self.session.close()


class ServedWorldbook:
    """The book loaded once; sessions opened per client."""

    def __init__(self, config: ServeConfig) -> None:
        world_model_spec(config.method)  # ValueError naming the registered world models
        self.config = config
        self.workspace = Workspace(config.workspace)
        store = WorldbookStore.of_workspace(self.workspace)
        self.version = config.version or store.head(config.book)
        self.book = store.load(config.book, self.version)
        self.tools: list[ToolSpec] = book_tools(self.book)
        self.sessions_dir = Path(config.sessions) if config.sessions else self.workspace.layout.sessions_dir

    @property
    def book_ref(self) -> str:
        return f"{self.config.book}@{self.version}"

    def redact(self, text: str) -> str:
        """`text` with the server's folders (sessions, workspace; as given and resolved) replaced by
        `<sessions>` / `<workspace>`: what clients are told never says where the server keeps its files."""
        folders = [(self.sessions_dir, "<sessions>"), (self.workspace.root, "<workspace>")]
        spelled = [(str(spelling), name) for folder, name in folders for spelling in {folder, folder.resolve()}]
        for spelling, name in sorted(spelled, key=lambda pair: -len(pair[0])):  # the longest (innermost) first
            text = text.replace(spelling, name)
        return text

    def world_model(self) -> WorldModel:
        """A fresh world model of the configured kind (an LLM opened when the kind needs or is given one)."""
        config = self.config
        spec = config.model or (default_model_spec() if needs_llm(config.method) else None)
        if spec is None:
            if needs_llm(config.method):
                raise BadInputError(f"world model {config.method!r} needs a model: pass an LLM spec")
            return make_world_model(config.method, self.book)
        root = self.workspace.root
        try:
            llm = open_llm(resolve_spec(spec, root), root, component="serve")
        except LLMError as error:
            raise BadInputError(f"cannot open model {spec!r}: {error}") from None
        return make_world_model(config.method, self.book, llm=llm, max_tokens=config.max_tokens)

    def open_session(self, label: str = "client") -> ServedSession:
        """A new saved session for one client, named `<label>-<book>-<time>-<id>`."""
        name = f"{label}-{self.config.book}-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        session = Session.create(self.sessions_dir / name, book_ref=self.book_ref, model=self.config.method,
                                 initial_observation=self.config.initial, task=self.config.task,
                                 env_id=self.book.env_id, metadata={"served": label})
        try:
            return ServedSession(self.book, session, self.world_model())
        except BaseException:
            session.close()
            raise

    def sim_env(self, tasks: Mapping[str, str] | Sequence[Episode] | None = None, *, max_steps: int = 50) -> SimEnv:
        """The book as an `Env` with a fresh world model: `tasks` are recorded episodes (openings and expert
        actions) or id -> opening text; none: one task, "default", opening with the configured text."""
        return SimEnv(self.world_model(), tasks=tasks if tasks else {"default": self.config.initial},
                      book=self.book, max_steps=max_steps)


def task_episodes(paths: Sequence[str | Path] = (), *, dataset: str | None = None, split: str | None = None,
                  workspace: str | Path | None = None) -> list[Episode]:
    """Episodes to serve as tasks: from trace files (any importable format) and/or a workspace dataset.

    A line that is not an episode raises `ValueError` naming its file and line.
    """
    from worldsmith.workspace.sources import episodes_from

    return episodes_from([Path(path) for path in paths], dataset=dataset, split=split, workspace=workspace)
