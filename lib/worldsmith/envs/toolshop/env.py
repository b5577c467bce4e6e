"""`ToolshopEnv`: a customer-service tool API over a seeded shop database, one customer goal per episode.

Task ids are `db=<seed>:task=<index>`; `tasks()` lists `tasks_per_db` of them for each seed in
`dbs`, and any seed >= 0 may be reset. Every task of a seed shares that seed's database; each
episode starts from it unchanged. Reset's observation is the customer's message; a step is one
tool call (an `Action` named after the tool with JSON arguments, or call text such as
`get_order(order_id='#O12345')`, positional arguments taken in the schema's order) answered with
the tool's text; the action `respond` (`{"text": ...}`) is the agent's reply to the customer: it
ends the episode (`record: False`, like BFCL's hand-over), reward 1.0 when won.

Info: reset has `task`, `env_id` (`toolshop`), `db`, `goals` (the goal kinds) and `tools` (OpenAI
function schemas); a tool step has `tool`, `write` (the tool changes state) and `error` (the answer
reports a failure); the reply has `won`, `wrong_records` and `missing_answers`. `state()` is the
task customer's current record plus every record the episode changed or created (`changed`, by
kind and id); everything else is the seed's database, the same in every episode.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from worldsmith.envs.base import EnvBase, EnvError, Step, UnknownTaskError
from worldsmith.envs.bfcl import _call_from_action
from worldsmith.envs.toolshop.db import Store, base_db
from worldsmith.envs.toolshop.expert import Seen
from worldsmith.envs.toolshop.tasks import RESPOND, Task, check, expert_action, resolve, task_book
from worldsmith.envs.toolshop.tools import TOOLS, is_error_text, run_tool, tool_schemas
from worldsmith.traces.model import Action, Observation
from worldsmith.util.errors import BadInputError

__all__ = ["TASKS_PER_DB", "ToolshopEnv", "parse_task_id"]

TASKS_PER_DB = 20_000
_TASK_ID = re.compile(r"^db=(\d+):task=(\d+)$")


def parse_task_id(task: str) -> tuple[int, int]:
    match = _TASK_ID.match(task.strip())
    if match is None:
        raise UnknownTaskError(f"unknown toolshop task {task!r}: ids look like db=0:task=123")
    return int(match.group(1)), int(match.group(2))


@dataclass
class _Episode:
    task_id: str
    task: Task
    store: Store
    calls: list[Seen]
    finished: bool = False


class ToolshopEnv(EnvBase):
    """A stateful shop backend (users, orders, products, tickets) behind ~20 tools; the expert reads, then writes."""

    name = "toolshop"

    def __init__(self, *, dbs: Sequence[int] = (0,), tasks_per_db: int = TASKS_PER_DB) -> None:
        if not dbs or any(not isinstance(db, int) or db < 0 for db in dbs):
            raise BadInputError(f"dbs must be database seeds >= 0, not {list(dbs)!r}")
        if tasks_per_db < 1:
            raise BadInputError("tasks_per_db must be at least 1")
        self.dbs, self.tasks_per_db = list(dbs), tasks_per_db
        self._episode: _Episode | None = None

    def tasks(self) -> list[str]:
        return [f"db={db}:task={index}" for db in self.dbs for index in range(self.tasks_per_db)]

    def reset(self, task: str | None = None, *, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        """Start `task` on a fresh view of its database (seed is unused: the task id fixes everything)."""
        task_id = task if task is not None else f"db={self.dbs[0]}:task=0"
        db, index = parse_task_id(task_id)
        if index >= self.tasks_per_db:
            raise UnknownTaskError(f"toolshop task {task_id!r}: index beyond the {self.tasks_per_db} tasks per database")
        spec = task_book(db).spec(index)
        self._episode = _Episode(task_id, resolve(spec), Store(base_db(db)), [])
        info = {"task": spec.text, "env_id": "toolshop", "db": db, "goals": [goal.kind for goal in spec.goals],
                "tools": tool_schemas(), "context": []}
        return Observation(text=spec.text), info

    def step(self, action: Action | str) -> Step:
        episode = self._running()
        call = _call_from_action(action)
        if call.name == RESPOND:
            text = call.kwargs.get("text", call.args[0] if call.args else "")
            return self._reply(episode, text if isinstance(text, str) else str(text))
        tool = TOOLS.get(call.name)
        names = list(tool.properties) if tool is not None else []
        arguments: dict[str, Any] = {}
        if call.problem is not None:
            observation = f"Error: {call.problem}"
        elif len(call.args) > len(names) and tool is not None:
            observation = f"Error: {call.name} takes at most {len(names)} arguments"
        else:  # positional arguments in the schema's order
            arguments = {**dict(zip(names, call.args, strict=False)), **call.kwargs}
            observation = run_tool(episode.store, call.name, arguments)
        error = is_error_text(observation)
        write = tool is not None and tool.writes
        episode.calls.append(Seen(call.name, arguments, observation, error, write))
        return Step(Observation(text=observation), 0.0, False, False, {"tool": call.name, "write": write, "error": error})

    def expert_action(self) -> Action | None:
        episode = self._episode
        if episode is None or episode.finished:
            return None
        return expert_action(episode.task.spec, episode.calls)

    def state(self) -> dict[str, Any] | None:
        episode = self._episode
        if episode is None:
            return None
        state = {"db": episode.task.spec.db, "user": episode.store.get("users", episode.task.spec.user_id),
                 "changed": episode.store.snapshot()}
        copied: dict[str, Any] = orjson.loads(orjson.dumps(state))  # a snapshot: later writes must not show in it
        return copied

    def close(self) -> None:
        self._episode = None

    def _running(self) -> _Episode:
        if self._episode is None:
            raise EnvError("call reset() before step()")
        if self._episode.finished:
            raise EnvError(f"the episode of {self._episode.task_id!r} is over (the agent replied); reset()")
        return self._episode

    @staticmethod
    def _reply(episode: _Episode, text: str) -> Step:
        episode.finished = True
        verdict = check(episode.task, episode.store, text)
        info = {"record": False, "context": [], **verdict}
        return Step(Observation(text=""), 1.0 if verdict["won"] else 0.0, True, False, info)
