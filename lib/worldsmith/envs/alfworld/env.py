"""`ALFWorldEnv`: ALFWorld games behind the `Env` protocol, with the combined expert that escalates."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from worldsmith._resources import samples_root, source_checkout
from worldsmith.envs.alfworld.experts import HandcodedExpert, PlannerExpert
from worldsmith.envs.alfworld.oracle import Goal, NoPlan, World, oracle_action
from worldsmith.envs.alfworld.planner import PlannerServer
from worldsmith.envs.alfworld.speedups import memoised_engine, preserved_argv
from worldsmith.envs.base import (
    EnvBase,
    EnvError,
    EnvUnavailableError,
    Step,
    TaskLoadError,
    UnknownTaskError,
    as_action,
)
from worldsmith.traces.actions import action_line
from worldsmith.traces.model import Action, Observation
from worldsmith.util.errors import BadInputError

__all__ = ["EXPERTS", "GAME_FILE", "GAMES_ENV_VAR", "ALFWorldEnv", "default_games_root"]

GAME_FILE = "game.tw-pddl"
GAMES_ENV_VAR = "WORLDSMITH_ALFWORLD_GAMES"
BANNER = "-= Welcome to TextWorld, ALFRED! =-"
TASK_MARKER = "Your task is to: "
EXPERTS = ("combined", "oracle", "planner", "handcoded", "handcoded_fixed")
# The oracle hands over to the planner once the expert's own moves bring the game back to the same
# state this often, and the planner to the handcoded expert at the second limit.
_LOOP_LIMITS = (3, 5)
_UNKNOWN_GOAL = "UNKNOWN GOAL"


def default_games_root() -> Path:
    """`$WORLDSMITH_ALFWORLD_GAMES`, else the shared data folder beside the repository, else the six
    games bundled in `data_samples/alfworld` (one per task type; in the wheel too), so a fresh install can play."""
    configured = os.environ.get(GAMES_ENV_VAR)
    if configured:
        return Path(configured).expanduser()
    checkout = source_checkout()
    shared = checkout.parent / "shared" / "data" / "alfworld" if checkout is not None else None
    return shared if shared is not None and shared.is_dir() else samples_root() / "alfworld"


def _readable(entity_infos: dict[str, Any], fact: Any) -> tuple[str, tuple[str, ...]]:
    names = []
    for variable in fact.arguments:
        info = entity_infos.get(variable.name)
        names.append((info.name if info is not None and info.name else variable.name).strip())
    return fact.name, tuple(names)


def _opening_text(feedback: str) -> str:
    text = feedback.lstrip()
    if text.startswith(BANNER):
        text = text[len(BANNER):].lstrip("\n")
    return text


def _instruction(feedback: str) -> str:
    _, marker, rest = feedback.rpartition(TASK_MARKER)
    return rest.strip() if marker else ""


class ALFWorldEnv(EnvBase):
    """ALFWorld games from a folder in the release layout, with a combined expert that wins them.

    Keyword arguments: `games` (the games root; see the package docstring), `expert` (one of
    `EXPERTS`), `planner_timeout` (seconds one planner search may take before it is given up),
    `memoise` (reuse TextWorld's parses and the game's translation: same text, several times faster).
    """

    name = "alfworld"

    def __init__(
        self, games: str | None = None, expert: str = "combined", planner_timeout: float = 60.0, memoise: bool = True
    ) -> None:
        if expert not in EXPERTS:
            raise BadInputError(f"unknown ALFWorld expert {expert!r} (choose from {', '.join(EXPERTS)})")
        self.games_root = Path(games).expanduser() if games else default_games_root()
        self.expert = expert
        self.planner_timeout = float(planner_timeout)
        self.memoise = bool(memoise)
        self._tasks: list[str] | None = None
        self._env: Any = None  # the wrapped TextWorld environment, built on first use
        self._loaded: Path | None = None
        self._game_dir: Path | None = None
        self._goal: Goal | None = None
        self._goals: dict[Path, Goal | None] = {}  # read from traj_data.json once per game
        self._states: list[Any] = []  # the TextWorld game state after each move (0: the opening)
        self._commands: list[str] = []
        self._seed = 0
        self._expert_level = 0  # 0 oracle, 1 planner, 2 handcoded (the combined expert escalates)
        self._visits: dict[int, set[int]] = {}
        self._suggested: tuple[int, str] | None = None
        self._expert_moves: set[int] = set()
        self._planner: PlannerExpert | None = None
        self._planner_server = PlannerServer()  # started at the first search, stopped by close()
        self._handcoded: HandcodedExpert | None = None

    # -- tasks -------------------------------------------------------------------------------

    def tasks(self) -> list[str]:
        if self._tasks is None:
            root = self.games_root
            found: list[str] = []
            if root.is_dir():
                for folder, _dirs, files in os.walk(root):
                    if GAME_FILE in files:
                        found.append(Path(folder).relative_to(root).as_posix())
            self._tasks = sorted(found)
        return list(self._tasks)

    def _game_dir_for(self, task: str) -> Path:
        path = Path(task).expanduser()
        if path.is_absolute():
            folder = path.parent if path.name == GAME_FILE else path
            if (folder / GAME_FILE).is_file():
                return folder
            raise UnknownTaskError(f"unknown ALFWorld task {task!r}: no {GAME_FILE} at {folder}")
        folder = self.games_root / path
        if folder.name == GAME_FILE:
            folder = folder.parent
        if (folder / GAME_FILE).is_file():
            return folder
        where = f"{self.games_root} (from {GAMES_ENV_VAR} or the games= argument)"
        if not self.games_root.is_dir():
            where += ", which does not exist"
        raise UnknownTaskError(
            f"unknown ALFWorld task {task!r}: no {path.as_posix()}/{GAME_FILE} under {where}. "
            "Task ids are game folders relative to that root (ALFWorldEnv().tasks() lists them) "
            "or absolute paths of a game folder or its game.tw-pddl"
        )

    # -- playing ---------------------------------------------------------------------------

    def _textworld(self) -> Any:
        if self._env is None:
            try:
                import textworld
                from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
                from textworld.envs.pddl import PddlEnv
            except ImportError as error:
                raise EnvUnavailableError(f"ALFWorld needs alfworld and textworld[pddl]: {error}") from error
            infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
            self._env = AlfredInfos(AlfredDemangler(PddlEnv(infos), shuffle=False))
        return self._env

    def _engine(self) -> contextlib.AbstractContextManager[None]:
        """The context TextWorld's engine runs in: memoised parsing (or not), `sys.argv` kept."""
        return memoised_engine() if self.memoise else preserved_argv()

    def _load(self, task: str, game_dir: Path) -> Any:
        """Load (when needed) and restart the game; any failure is the task's `TaskLoadError`."""
        env = self._textworld()
        game_file = game_dir / GAME_FILE
        try:
            with self._engine():
                if self._loaded != game_file:
                    self._loaded = None
                    env.load(self._game_source(game_dir, game_file))
                    self._loaded = game_file
                return env.reset()
        except (Exception, SystemExit) as error:  # noqa: BLE001 - Fast Downward reports errors as SystemExit
            self._loaded = None
            reason = f"{type(error).__name__}: {error}".strip()
            raise TaskLoadError(f"ALFWorld task {task!r} cannot load ({game_file}): {reason}") from error

    @staticmethod
    def _game_source(game_dir: Path, game_file: Path) -> str | dict[str, Any]:
        """The game file, or its data with the goal filled in when the release left it blank."""
        text = game_file.read_text(encoding="utf-8")
        if _UNKNOWN_GOAL not in text:
            return str(game_file)
        data = json.loads(text)
        goal = Goal.for_game(game_dir)
        if goal is not None:
            from alfworld.gen import goal_library

            key = goal.task_type + ("_slice" if goal.sliced else "")
            template = goal_library.gdict[key]["templates"][0]  # the first: the same text every time
            description = template.format(obj=goal.obj, recep=goal.parent, toggle=goal.toggle, mrecep=goal.mrecep)
            data["grammar"] = data["grammar"].replace(_UNKNOWN_GOAL, description)
        return data

    def reset(self, task: str | None = None, *, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        if task is None:
            tasks = self.tasks()
            if not tasks:
                raise UnknownTaskError(
                    f"no ALFWorld games under {self.games_root}: set {GAMES_ENV_VAR} or games= to a folder "
                    f"of <split>/<task>/<trial>/{GAME_FILE} games"
                )
            task = tasks[0]
        game_dir = self._game_dir_for(task)
        self._states = []  # a game that fails to load leaves nothing to step
        state = self._load(task, game_dir)
        if game_dir not in self._goals:
            self._goals[game_dir] = Goal.for_game(game_dir)
        self._game_dir, self._goal, self._seed = game_dir, self._goals[game_dir], seed if seed is not None else 0
        self._states, self._commands = [state], []
        self._expert_level, self._visits, self._suggested, self._expert_moves = 0, {}, None, set()
        self._planner = PlannerExpert(self._planner_server, self.planner_timeout, replan_every_step=self.expert == "planner")
        self._handcoded = None
        feedback = str(state["feedback"])
        info = {
            "task": _instruction(feedback),
            "env_id": f"alfworld/{self._goal.task_type if self._goal else 'unknown'}",
            "admissible_actions": list(state["admissible_commands"]),
            "won": bool(state["won"]),
            "score": 0,
            "max_score": 1,
        }
        return Observation(text=_opening_text(feedback)), info

    def _current(self) -> Any:
        if not self._states:
            raise EnvError("reset() the ALFWorld environment before stepping it")
        return self._states[-1]

    def step(self, action: Action | str) -> Step:
        before = self._current()
        command = action_line(as_action(action), command=True)
        with self._engine():
            state, _score, _done = self._env.step(command)
        self._states.append(state)
        self._commands.append(command)
        if self._suggested == (len(self._commands) - 1, command):
            self._expert_moves.add(len(self._commands))
        won = bool(state["won"])
        reward = 1.0 if won and not before["won"] else 0.0
        info = {"admissible_actions": list(state["admissible_commands"]), "won": won, "score": 1 if won else 0}
        return Step(Observation(text=str(state["feedback"])), reward, won, False, info)

    def admissible_actions(self) -> list[str] | None:
        return list(self._current()["admissible_commands"])

    # -- state and expert ------------------------------------------------------------------

    def _facts(self) -> list[tuple[str, tuple[str, ...]]]:
        core = self._env.unwrapped
        infos = core._entity_infos
        return [_readable(infos, fact) for fact in core._pddl_state.facts]

    def state(self) -> dict[str, Any] | None:
        """The true PDDL facts (`name(arg, ...)`, sorted), read without touching the game."""
        self._current()
        facts = sorted(f"{name}({', '.join(args)})" for name, args in self._facts())
        return {"facts": facts, "won": bool(self._current()["won"]), "moves": len(self._commands)}

    def expert_action(self) -> Action | None:
        state = self._current()
        if state["won"]:
            return None
        command = self._expert_command(state)
        self._suggested = (len(self._commands), command) if command is not None else None
        return as_action(command) if command is not None else None

    def _expert_command(self, state: Any) -> str | None:
        if self.expert == "planner":
            return self._planner_command(state)
        if self.expert in ("handcoded", "handcoded_fixed"):
            return self._handcoded_command(fix_put=self.expert == "handcoded_fixed")
        facts = self._facts()
        self._note_visit(hash(frozenset(facts)))
        if self._expert_level == 0:
            command = self._oracle_command(facts, state)
            if command is not None or self.expert == "oracle":
                return command
        if self._expert_level <= 1:
            command = self._planner_command(state)
            if command is not None:
                return command
        return self._handcoded_command(fix_put=True)

    def _note_visit(self, fingerprint: int) -> None:
        """Count returns to a state reached by the expert's own moves; escalate when it circles."""
        moves = len(self._commands)
        if moves and moves not in self._expert_moves:
            return
        seen = self._visits.setdefault(fingerprint, set())
        seen.add(moves)
        if self.expert == "combined":
            self._expert_level = max(self._expert_level, sum(len(seen) >= limit for limit in _LOOP_LIMITS))

    def _oracle_command(self, facts: list[tuple[str, tuple[str, ...]]], state: Any) -> str | None:
        if self._goal is None:
            return None
        world = World.from_facts(facts, state["admissible_commands"])
        try:
            return oracle_action(world, self._goal)
        except NoPlan:
            return None

    def _planner_command(self, state: Any) -> str | None:
        assert self._planner is not None
        core = self._env.unwrapped
        return self._planner.next_action(
            core._pddl_state, core._entity_infos, self._commands, list(state["admissible_commands"])
        )

    def _handcoded_command(self, fix_put: bool) -> str | None:
        if self._goal is None or self._game_dir is None:
            return None
        if self._handcoded is None:
            intro = str(self._states[0]["feedback"])
            self._handcoded = HandcodedExpert(self._game_dir / GAME_FILE, intro, self._seed, fix_put)
        core = self._env.unwrapped

        def readable_facts(game_state: Any) -> list[Any]:
            return [core._get_human_readable_fact(fact) for fact in game_state["_facts"]]

        return self._handcoded.next_action(self._states, self._commands, readable_facts)

    def close(self) -> None:
        """Drop the game, stop the planner server and free the planner's memory; safe twice.

        The library itself stays mapped: `fast_downward.close_lib` (dlclose) makes the interpreter
        crash at exit, so only its `cleanup()` is called.
        """
        env, self._env = self._env, None
        self._states, self._commands, self._loaded = [], [], None
        self._planner = self._handcoded = None
        self._planner_server.close()
        if env is None:
            return
        lib = getattr(env.unwrapped, "downward_lib", None)
        if lib is not None:
            with contextlib.suppress(Exception):
                lib.cleanup()
