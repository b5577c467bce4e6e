"""`ShellEnv`: the chores of `shell_tasks` played in a sandboxed shell, rendered like a terminal."""

from __future__ import annotations

from typing import Any

from worldsmith.envs.base import (
    EnvBase,
    EnvError,
    EnvUnavailableError,
    InvalidActionError,
    Step,
    TaskLoadError,
    UnknownTaskError,
    as_action,
)
from worldsmith.envs.shell.bash_session import Limits, Sandbox
from worldsmith.envs.shell.sandbox import HOME, HOSTNAME, USER, display_cwd, find_bwrap, sandbox_available
from worldsmith.envs.shell_tasks import CHORES, Chore, SandboxView, snapshot
from worldsmith.traces.actions import action_line
from worldsmith.traces.model import Action, Observation
from worldsmith.util.errors import BadInputError

__all__ = ["ShellEnv"]

_MAX_COMMAND = 1 << 16


def _prompt(cwd: str) -> str:
    return f"{USER}@{HOSTNAME}:{display_cwd(cwd)}$ "


def _command_of(action: Action | str) -> str:
    """The command line to run: text as given; a tool call's `command` argument; else the action's text."""
    if isinstance(action, str):
        return action
    if not isinstance(action, Action):
        raise InvalidActionError(f"an action must be an Action or text, not {type(action).__name__}")
    arguments = action.arguments
    if isinstance(arguments, dict) and isinstance(arguments.get("command"), str):
        return arguments["command"]
    return action_line(action, command=True)


class ShellEnv(EnvBase):
    """Scripted chores in a sandboxed bash (see the `worldsmith.envs.shell` docstring for the sandbox and the rendering)."""

    name = "shell"

    def __init__(
        self,
        *,
        timeout_s: float = 10.0,
        memory_mb: int = 1024,
        cpu_s: int = 10,
        file_mb: int = 64,
        max_procs: int = 64,
        tmp_mb: int = 64,
        max_output_bytes: int = 16384,
        disk_mb: int = 512,
    ) -> None:
        numbers = {"timeout_s": timeout_s, "memory_mb": memory_mb, "cpu_s": cpu_s, "file_mb": file_mb,
                   "max_procs": max_procs, "tmp_mb": tmp_mb, "max_output_bytes": max_output_bytes,
                   "disk_mb": disk_mb}
        for key, value in numbers.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise BadInputError(f"{key} must be a positive number, not {value!r}")
        if max_procs < 8:
            raise BadInputError("max_procs must be at least 8 (the shell and its pipes need a few)")
        self._limits = Limits(float(timeout_s), int(memory_mb), int(cpu_s), int(file_mb), int(max_procs),
                              int(tmp_mb), int(max_output_bytes), int(disk_mb))
        available, reason = sandbox_available()
        if not available:
            raise EnvUnavailableError(f"the shell environment never runs commands unsandboxed: {reason}")
        self._bwrap = find_bwrap() or "bwrap"
        self._sandbox: Sandbox | None = None
        self._chore: Chore | None = None
        self._cwd = HOME
        self._expert_next = 0
        self._won = False

    def tasks(self) -> list[str]:
        return list(CHORES)

    @property
    def sandbox_path(self) -> str | None:
        """The host directory seen inside as the home (for inspection; None between episodes)."""
        return None if self._sandbox is None else self._sandbox.home

    def reset(self, task: str | None = None, *, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        chore = self._chore_for(task)
        self._close_sandbox()
        sandbox = Sandbox(self._bwrap, self._limits)
        try:
            sandbox.prepare(chore)
        except OSError as error:
            sandbox.close()
            raise TaskLoadError(f"shell task {chore.id!r} could not be set up: {error}") from error
        try:
            sandbox.start(HOME)
        except BaseException:
            sandbox.close()
            raise
        self._sandbox, self._chore = sandbox, chore
        self._cwd, self._expert_next = HOME, 0
        self._won = self._check()
        info = {"task": chore.instruction, "env_id": f"shell/{chore.id.split('/')[0]}", "won": self._won,
                "exit_code": 0, "cwd": HOME}
        return Observation(text=f"Task: {chore.instruction}\n{_prompt(HOME)}"), info

    def _chore_for(self, task: str | None) -> Chore:
        if task is None:
            return next(iter(CHORES.values()))
        chore = CHORES.get(task)
        if chore is None:
            raise UnknownTaskError(
                f"unknown shell task {task!r}; ShellEnv().tasks() lists the {len(CHORES)} chores "
                f"(e.g. {', '.join(list(CHORES)[:3])})"
            )
        return chore

    def step(self, action: Action | str) -> Step:
        if self._sandbox is None or self._chore is None:
            raise EnvError("call reset() before step()")
        command = _command_of(action).replace("\x00", "")
        if len(command) > _MAX_COMMAND:
            raise InvalidActionError(f"a command line is limited to {_MAX_COMMAND} characters, not {len(command)}")
        before = _prompt(self._cwd)
        result = self._sandbox.run(command)
        self._cwd = result.cwd
        gold = self._chore.gold
        if self._expert_next < len(gold) and command == gold[self._expert_next]:
            self._expert_next += 1
        was_won, self._won = self._won, self._check()
        info = {"task": self._chore.instruction, "won": self._won, "exit_code": result.exit_code,
                "cwd": result.cwd, "timed_out": result.timed_out}
        text = _render(before, command, result.output, result.notes, _prompt(result.cwd))
        reward = 1.0 if self._won and not was_won else 0.0
        return Step(Observation(text=text), reward, self._won, False, info)

    def _check(self) -> bool:
        assert self._sandbox is not None and self._chore is not None
        try:
            return bool(self._chore.check(SandboxView(self._sandbox.home)))
        except OSError:
            return False

    def expert_action(self) -> Action | None:
        if self._chore is None or self._won or self._expert_next >= len(self._chore.gold):
            return None
        return as_action(self._chore.gold[self._expert_next])

    def state(self) -> dict[str, Any] | None:
        if self._sandbox is None or self._chore is None:
            return None
        return {"task": self._chore.id, "cwd": self._cwd, "won": self._won,
                **snapshot(SandboxView(self._sandbox.home))}

    def _close_sandbox(self) -> None:
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            sandbox.close()

    def close(self) -> None:
        self._close_sandbox()
        self._chore = None


def _render(prompt: str, command: str, output: str, notes: tuple[str, ...], next_prompt: str) -> str:
    """Prompt, echoed command, output, notes, next prompt: what a terminal would show."""
    text = prompt + command.rstrip("\n").replace("\n", "\n> ") + "\n" + output
    if notes:
        if not text.endswith("\n"):
            text += "\n"
        text += "".join(f"[{note}]\n" for note in notes)
    return text + next_prompt
