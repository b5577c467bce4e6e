"""A tiny deterministic environment for unit tests of the envs machinery (runner, recorder, replay).

Real adapters have their own integration tests; this one exists to exercise the logic around
them (timeouts, crashes, resume) quickly and without heavy packages. Importable by spawned
worker processes because `tests/` is on the path.
"""

from __future__ import annotations

import os
import time
from typing import Any

from worldsmith.envs import EnvBase, EnvSpec, Step, TaskLoadError, UnknownTaskError, register, registry
from worldsmith.traces import Action, Observation
from worldsmith.traces.actions import action_line

TASKS = ["reach-2", "reach-3", "talk-2"]
SPECIAL = ["hang", "crash", "broken", "raise"]


class CounterEnv(EnvBase):
    """Count up to a target with `inc`; `talk-N` hands over to the user once after the first step."""

    name = "counter"

    def __init__(self, start: int = 0) -> None:
        self.start = start
        self.count = start
        self.target = 0
        self.task = self.kind = ""
        self.talked = False
        self.closed = 0

    def tasks(self) -> list[str]:
        return list(TASKS)

    def reset(self, task: str | None = None, *, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        task = task or TASKS[0]
        kind, _, number = task.partition("-")
        if task == "broken":
            raise TaskLoadError("task 'broken' cannot load: the game file is corrupt")
        if kind not in ("reach", "talk", "hang", "crash", "raise"):
            raise UnknownTaskError(f"unknown task {task!r}")
        self.task, self.kind, self.target, self.count, self.talked = task, kind, int(number or 2), self.start, False
        return Observation(text=f"count {self.count}, target {self.target}"), {"task": f"count to {self.target}"}

    def step(self, action: Action | str) -> Step:
        text = action_line(action, command=True)
        if self.kind == "hang":
            time.sleep(3600)
        if self.kind == "crash":
            os._exit(3)
        if self.kind == "raise" and self.count - self.start >= 1:
            raise RuntimeError("the simulator fell over")
        if text.startswith("respond"):
            self.talked = True
            return Step(Observation(text="user: go on"), 0.0, False, False,
                        {"record": False, "context": [{"role": "user", "content": "go on"}]})
        if text == "inc":
            self.count += 1
        elif text == "dec":
            self.count -= 1
        else:
            return Step(Observation(text=f"I don't know how to {text!r}."), 0.0, False, False, {"won": False})
        won = self.count >= self.target
        return Step(Observation(text=f"count {self.count}"), 1.0 if won else 0.0, won, False, {"won": won})

    def admissible_actions(self) -> list[str] | None:
        return ["dec", "inc"]

    def expert_action(self) -> Action | None:
        if self.kind == "talk" and self.count - self.start == 1 and not self.talked:
            return Action(name="respond", arguments={"text": "one done"})
        return Action(name="inc", arguments={}, raw="inc") if self.count < self.target else None

    def state(self) -> dict[str, Any] | None:
        return {"count": self.count, "target": self.target}

    def close(self) -> None:
        self.closed += 1


if "counter" not in registry():
    register(EnvSpec(name="counter", entry_point="fake_envs:CounterEnv", description="unit-test counter", max_steps=10))
