"""ALFWorld text games (the `game.tw-pddl` folders of the ALFWorld release) behind the `Env` protocol.

Games are played with ALFWorld's own machinery: TextWorld's PDDL environment wrapped in ALFWorld's
`AlfredDemangler` and `AlfredInfos`, as `alfworld.agents.environment.alfred_tw_env` builds it.

Task ids are game folders relative to the games root, in the release layout:

    train/pick_heat_then_place_in_recep-Cup-None-Shelf-1/trial_T20190906_230051_015449

`reset` also takes the absolute path of a game folder or of its `game.tw-pddl`. The games root is
the `games` argument, else `$WORLDSMITH_ALFWORLD_GAMES`, else `<checkout>/../shared/data/alfworld`, else the
six games bundled in `data_samples/alfworld` (`worldsmith._resources`; a wheel carries them too).

Observations are the game's text verbatim except for interpreter chrome: the opening
`-= Welcome to TextWorld, ALFRED! =-` banner is dropped (the room and "Your task is to: ..." stay).
The games are deterministic; `seed` only seeds the random choices of ALFWorld's handcoded expert.
Game files are trusted input: TextWorld evaluates the `{...}` expressions of a game's grammar with
Python's `eval`, so only play games from the ALFWorld release or made by its tools.

Experts (`expert=`):
- `combined` (default): an oracle that reads the true PDDL facts and walks straight to the goal
  (find and take the object, heat/cool/clean it, put it / look at it under the lamp); when it
  has no move for a state, or the game keeps returning to the same state, ALFWorld's planner
  (Fast Downward, `replan`) takes over, and ALFWorld's handcoded expert (with the fix below) is
  the last resort when the planner finds no plan in time.
- `oracle`, `planner`: one of those alone (the planner replans at every step, as ALFWorld's
  `AlfredExpert(expert_type="planner")` does).
- `handcoded`: ALFWorld's handcoded expert exactly as `AlfredExpert` uses it (an action that is not
  admissible becomes `look`; it speaks `move X to Y` while these games say `put X in/on Y`, so it
  often circles instead of placing the object).
- `handcoded_fixed`: the same expert speaking its own grammar: it reads the admissible `put X in/on Y`
  as `move X to Y` and its `move X to Y` is played as the `put` command.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import random
import select
import signal
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldsmith._resources import samples_root, source_checkout
from worldsmith.envs.base import (
    EnvBase,
    EnvError,
    EnvUnavailableError,
    Step,
    TaskLoadError,
    UnknownTaskError,
    action_text,
    as_action,
)
from worldsmith.traces.model import Action, Observation

__all__ = ["EXPERTS", "TASK_TYPES", "ALFWorldEnv", "Goal", "World", "default_games_root", "oracle_action"]

GAME_FILE = "game.tw-pddl"
TRAJ_FILE = "traj_data.json"
GAMES_ENV_VAR = "WORLDSMITH_ALFWORLD_GAMES"
BANNER = "-= Welcome to TextWorld, ALFRED! =-"
TASK_MARKER = "Your task is to: "
EXPERTS = ("combined", "oracle", "planner", "handcoded", "handcoded_fixed")
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
    "pick_and_place_with_movable_recep",
)
# Treatment a task type asks for: (fact that records it, verb, receptacle types that do it), from
# the preconditions of HeatObject / CoolObject / CleanObject in ALFWorld's PDDL domain.
_TREATMENTS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "pick_heat_then_place_in_recep": ("ishot", "heat", ("microwave",)),
    "pick_cool_then_place_in_recep": ("iscool", "cool", ("fridge",)),
    "pick_clean_then_place_in_recep": ("isclean", "clean", ("sinkbasin", "sink")),
}
_PLACE_TYPES = ("pick_and_place_simple", "pick_two_obj_and_place", *_TREATMENTS)
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


# --------------------------------------------------------------------------------------------
# The goal and the true state, as the oracle expert reads them


@dataclass(frozen=True)
class Goal:
    """What a game asks for, from its `traj_data.json` (else its folder name `<type>-<obj>-<mrecep>-<parent>-<n>`)."""

    task_type: str
    obj: str  # object type, lower case ("cup")
    parent: str = ""  # receptacle type to place it in ("shelf")
    toggle: str = ""  # lamp type for look_at_obj_in_light ("desklamp")
    mrecep: str = ""  # movable receptacle (pick_and_place_with_movable_recep)
    sliced: bool = False

    @property
    def count(self) -> int:
        return 2 if self.task_type == "pick_two_obj_and_place" else 1

    @classmethod
    def from_params(cls, task_type: str, params: dict[str, Any]) -> Goal:
        def lower(key: str) -> str:
            value = params.get(key) or ""
            return "" if str(value) == "None" else str(value).lower()

        return cls(
            task_type=task_type,
            obj=lower("object_target"),
            parent=lower("parent_target"),
            toggle=lower("toggle_target"),
            mrecep=lower("mrecep_target"),
            sliced=bool(params.get("object_sliced")),
        )

    @classmethod
    def for_game(cls, game_dir: Path) -> Goal | None:
        traj_path = game_dir / TRAJ_FILE
        if traj_path.is_file():
            try:
                traj = json.loads(traj_path.read_text(encoding="utf-8"))
                return cls.from_params(str(traj["task_type"]), dict(traj["pddl_params"]))
            except (OSError, ValueError, KeyError, TypeError):
                pass
        parts = game_dir.parent.name.split("-")
        if len(parts) == 5 and parts[0] in TASK_TYPES:
            task_type, obj, mrecep, parent = parts[:4]
            key = "toggle_target" if task_type == "look_at_obj_in_light" else "parent_target"
            return cls.from_params(task_type, {"object_target": obj, "mrecep_target": mrecep, key: parent})
        return None


@dataclass
class World:
    """The true state of one game as plain names ("cup 1", "shelf 2"), with the admissible commands."""

    facts: frozenset[tuple[str, tuple[str, ...]]]
    admissible: frozenset[str]
    agent_location: str = ""
    held: list[str] = field(default_factory=list)
    inside: dict[str, str] = field(default_factory=dict)  # object -> receptacle
    object_location: dict[str, str] = field(default_factory=dict)
    receptacle_location: dict[str, str] = field(default_factory=dict)
    object_type: dict[str, str] = field(default_factory=dict)  # "cup 1" -> "cup"
    receptacle_type: dict[str, str] = field(default_factory=dict)
    flags: dict[str, set[str]] = field(default_factory=dict)  # unary facts: "ishot" -> {"cup 1"}

    @classmethod
    def from_facts(cls, facts: Iterable[tuple[str, tuple[str, ...]]], admissible: Iterable[str]) -> World:
        world = cls(facts=frozenset(facts), admissible=frozenset(admissible))
        for name, args in world.facts:
            world._add(name, args)
        world.held.sort()
        return world

    def _add(self, name: str, args: tuple[str, ...]) -> None:
        if len(args) == 1:
            self.flags.setdefault(name, set()).add(args[0])
        elif name == "atlocation":
            self.agent_location = args[1]
        elif name == "holds":
            self.held.append(args[1])
        elif name == "inreceptacle":
            self.inside[args[0]] = args[1]
        elif name == "objectatlocation":
            self.object_location[args[0]] = args[1]
        elif name == "receptacleatlocation":
            self.receptacle_location[args[0]] = args[1]
        elif name in ("objecttype", "receptacletype"):
            kind = args[1].removesuffix("type")
            (self.object_type if name == "objecttype" else self.receptacle_type)[args[0]] = kind

    def has(self, flag: str, name: str) -> bool:
        return name in self.flags.get(flag, ())

    def objects_of(self, kind: str) -> list[str]:
        return sorted(name for name, known in self.object_type.items() if known == kind)

    def receptacles_of(self, *kinds: str) -> list[str]:
        return sorted(name for name, known in self.receptacle_type.items() if known in kinds)

    def needs_opening(self, receptacle: str) -> bool:
        return self.has("openable", receptacle) and not self.has("opened", receptacle)

    def here(self, receptacle: str) -> bool:
        return bool(self.agent_location) and self.receptacle_location.get(receptacle) == self.agent_location

    def where(self, obj: str) -> str | None:
        """The receptacle `obj` lies in; None for one only on the floor (PickupObject needs a receptacle)."""
        return self.inside.get(obj)


class NoPlan(Exception):
    """The oracle has no move for this state (the planner takes over)."""


def _first_admissible(world: World, candidates: Iterable[str]) -> str | None:
    return next((command for command in candidates if command in world.admissible), None)


def _admissible_like(world: World, prefix: str, suffix: str = "") -> str | None:
    matches = sorted(c for c in world.admissible if c.startswith(prefix) and c.endswith(suffix))
    return matches[0] if matches else None


def _go_to(world: World, receptacle: str) -> str | None:
    """The command that walks to `receptacle`'s location; None when already there."""
    if world.here(receptacle):
        return None
    location = world.receptacle_location.get(receptacle)
    if location is None:
        raise NoPlan(f"{receptacle} is nowhere")
    neighbours = sorted(r for r, place in world.receptacle_location.items() if place == location)
    command = _first_admissible(world, [f"go to {receptacle}", *(f"go to {r}" for r in neighbours)])
    if command is None:
        raise NoPlan(f"no way to go to {receptacle}")
    return command


def _reach_inside(world: World, receptacle: str) -> str | None:
    """Walk to `receptacle` and open it if it is closed; None when its content is reachable."""
    step = _go_to(world, receptacle)
    if step is None and world.needs_opening(receptacle):
        step = _first_admissible(world, [f"open {receptacle}"])
        if step is None:
            raise NoPlan(f"cannot open {receptacle}")
    return step


def _take(world: World, obj: str) -> str:
    source = world.where(obj)
    if source is None:
        raise NoPlan(f"{obj} is out of reach")
    step = _reach_inside(world, source)
    if step is not None:
        return step
    command = _first_admissible(world, [f"take {obj} from {source}"]) or _admissible_like(world, f"take {obj} from ")
    if command is None:
        raise NoPlan(f"cannot take {obj}")
    return command


def _put(world: World, obj: str, receptacle: str) -> str:
    step = _reach_inside(world, receptacle)
    if step is not None:
        return step
    command = _first_admissible(world, [f"put {obj} in/on {receptacle}"])
    command = command or _admissible_like(world, f"put {obj} ", f" {receptacle}")
    if command is None:
        raise NoPlan(f"cannot put {obj} in {receptacle}")
    return command


def _put_down(world: World, obj: str) -> str:
    """Free the hands of an object the goal does not need: put it anywhere it goes here."""
    command = _admissible_like(world, f"put {obj} ")
    if command is None:
        raise NoPlan(f"nowhere to put down {obj} here")
    return command


def _nearness(world: World, obj: str) -> tuple[int, str]:
    source = world.where(obj) or ""
    steps = (0 if world.here(source) else 1) + (1 if world.needs_opening(source) else 0)
    return steps, obj


def _pick(world: World, candidates: Iterable[str], treated: str | None = None) -> str:
    """The candidate the fewest steps away (already treated ones first), by name on ties."""
    reachable = [o for o in candidates if world.has("pickupable", o) and world.where(o) is not None]
    if not reachable:
        raise NoPlan("no object of the goal's type within reach")
    return min(reachable, key=lambda o: (0 if treated and world.has(treated, o) else 1, *_nearness(world, o)))


def _place_action(world: World, goal: Goal) -> str | None:
    treatment = _TREATMENTS.get(goal.task_type)
    treated_flag = treatment[0] if treatment else None

    def good(obj: str) -> bool:
        return world.object_type.get(obj) == goal.obj and (treated_flag is None or world.has(treated_flag, obj))

    targets = world.receptacles_of(goal.parent)
    if not targets:
        raise NoPlan(f"no {goal.parent} in this room")
    placed = {r: sum(1 for o, inside in world.inside.items() if inside == r and good(o)) for r in targets}
    target = min(targets, key=lambda r: (-placed[r], world.needs_opening(r), r))
    if placed[target] >= goal.count:
        return None
    held = world.held[0] if world.held else None
    if held is not None and world.object_type.get(held) != goal.obj:
        return _put_down(world, held)
    if held is None:
        candidates = [o for o in world.objects_of(goal.obj) if not (world.inside.get(o) == target and good(o))]
        return _take(world, _pick(world, candidates, treated_flag))
    if treatment is not None and not world.has(treatment[0], held):
        _, verb, appliance_types = treatment
        appliances = world.receptacles_of(*appliance_types)
        if not appliances:
            raise NoPlan(f"nothing to {verb} with")
        appliance = min(appliances, key=lambda r: (not world.here(r), r))
        step = _go_to(world, appliance)
        if step is not None:
            return step
        command = _first_admissible(world, [f"{verb} {held} with {appliance}"])
        if command is None:
            raise NoPlan(f"cannot {verb} {held}")
        return command
    return _put(world, held, target)


def _look_action(world: World, goal: Goal) -> str | None:
    held = world.held[0] if world.held else None
    if held is not None and world.object_type.get(held) != goal.obj:
        return _put_down(world, held)
    if held is None:
        return _take(world, _pick(world, world.objects_of(goal.obj)))
    lamps = [o for o in world.objects_of(goal.toggle) if world.has("toggleable", o) and o in world.inside]
    if not lamps:
        raise NoPlan(f"no {goal.toggle} to switch on")
    lamp = min(lamps, key=lambda o: (not world.here(world.inside[o]), o))
    step = _go_to(world, world.inside[lamp])
    if step is not None:
        return step
    command = _first_admissible(world, [f"use {lamp}"])
    if command is None:
        raise NoPlan(f"cannot use {lamp}")
    return command


def oracle_action(world: World, goal: Goal) -> str | None:
    """The next command toward `goal` read off the true state; None when it is reached.

    Raises `NoPlan` for task kinds it does not know (movable receptacles, slicing) and for states
    it cannot handle (hands full of an object that goes nowhere here, a goal object out of reach).
    """
    if goal.sliced or goal.mrecep:
        raise NoPlan("the oracle does not handle sliced objects or movable receptacles")
    if goal.task_type == "look_at_obj_in_light":
        return _look_action(world, goal)
    if goal.task_type in _PLACE_TYPES:
        return _place_action(world, goal)
    raise NoPlan(f"unknown task type {goal.task_type!r}")


# --------------------------------------------------------------------------------------------
# ALFWorld's own experts


@contextlib.contextmanager
def _preserved_argv() -> Iterator[None]:
    """Fast Downward's translator overwrites `sys.argv`; give the caller theirs back."""
    saved = list(sys.argv)
    try:
        yield
    finally:
        sys.argv[:] = saved


_CACHE_LIMIT = 20_000
_symbol_cache: dict[tuple[str, str | None], Any] = {}
_query_cache: dict[str, Any] = {}
_translation_cache: dict[tuple[Any, ...], Any] = {}
_originals: dict[str, Any] = {}  # TextWorld's own functions, captured once before any swap


def _memoised_parse(text: str, rule_name: str | None = None, **kwargs: Any) -> Any:
    key = (text, rule_name)
    parsed = _symbol_cache.get(key)
    if parsed is None:
        if len(_symbol_cache) > _CACHE_LIMIT:
            _symbol_cache.clear()
        parsed = _symbol_cache[key] = _originals["parse"](text, rule_name=rule_name, **kwargs)
    return copy.deepcopy(parsed)  # TextWorld sets a context on the symbols it is given


def _memoised_query(expression: str) -> Any:
    rule = _query_cache.get(expression)
    if rule is None:
        if len(_query_cache) > _CACHE_LIMIT:
            _query_cache.clear()
        rule = _query_cache[expression] = _originals["rule"].parse_conjunctive_query(expression)
    return rule


def _memoised_translation(domain: str, problem: str, verbose: bool = False, optimize: bool = False) -> Any:
    key = (domain, problem, verbose, optimize)
    if key not in _translation_cache:
        if len(_translation_cache) >= 2:  # keep the two translations of the game being played
            _translation_cache.clear()
        _translation_cache[key] = _originals["translate"](domain, problem, verbose=verbose, optimize=optimize)
    return _translation_cache[key]


class _MemoisedRule:
    parse_conjunctive_query = staticmethod(_memoised_query)


@contextlib.contextmanager
def _memoised_engine() -> Iterator[None]:
    """TextWorld's PDDL engine with its parses and the game's translation memoised, while it runs here.

    TextWorld re-parses (with TatSu) every grammar template and condition for each admissible
    command at every step, and re-translates the game with Fast Downward at every reset. Both are
    pure functions of their text, so they are memoised: parsed symbols are handed out as deep copies
    (TextWorld sets their context), conditions are read-only rules, and a translation is reused only
    for the same domain and problem text. The game's text is unchanged (the tests compare). The
    memoised functions stand in for the originals only inside this context (and give the same
    results), so an interleaved caller elsewhere at worst runs without the speed-up.
    """
    import fast_downward
    from textworld.envs.pddl import textgen
    from textworld.logic import Rule

    if not _originals:
        _originals.update(parse=textgen._parse_and_convert, rule=Rule, translate=fast_downward.pddl2sas)
    textgen._parse_and_convert, textgen.Rule = _memoised_parse, _MemoisedRule
    fast_downward.pddl2sas = _memoised_translation
    try:
        with _preserved_argv():
            yield
    finally:
        textgen._parse_and_convert, textgen.Rule = _originals["parse"], _originals["rule"]
        fast_downward.pddl2sas = _originals["translate"]


def _replan(pddl_state: Any, entity_infos: Any, timeout: float) -> list[str] | None:
    """ALFWorld's planner from the current state in a forked child, so a slow search can be stopped.

    Returns the plan's commands, [] when the planner finds none, None when it ran out of time.
    """
    if not hasattr(os, "fork"):
        return list(pddl_state.replan(entity_infos))
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: plan, write JSON, leave without running the parent's exit handlers
        code = 0
        try:
            os.close(read_end)
            payload = json.dumps(list(pddl_state.replan(entity_infos))).encode()
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(payload)
        except BaseException:  # noqa: BLE001 - the child must never return into the parent's code
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    finished = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_end], [], [], left)[0]:
                break
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                finished = True
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        if not finished:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if not finished or os.waitstatus_to_exitcode(status) != 0:
        return None
    return [str(command) for command in json.loads(b"".join(chunks))]


class _PlannerExpert:
    """ALFWorld's planner; a plan is followed while the game goes as planned, else recomputed."""

    def __init__(self, timeout: float, replan_every_step: bool) -> None:
        self.timeout = timeout
        self.replan_every_step = replan_every_step
        self._plan: list[str] = []
        self._planned_at = -1
        self._failed_at = -1

    def next_action(self, pddl_state: Any, entity_infos: Any, history: Sequence[str], admissible: Sequence[str]) -> str | None:
        done = list(history[self._planned_at:]) if self._planned_at >= 0 else None
        if (
            not self.replan_every_step
            and done is not None
            and done == self._plan[: len(done)]
            and len(done) < len(self._plan)
            and self._plan[len(done)] in admissible
        ):
            return self._plan[len(done)]
        if self._failed_at == len(history):
            return None
        plan = _replan(pddl_state, entity_infos, self.timeout)
        if not plan:
            self._failed_at = len(history)
            return None
        self._plan, self._planned_at = plan, len(history)
        return plan[0]


def _as_move(command: str) -> str:
    """`put X in/on Y` in the older grammar ALFWorld's handcoded expert speaks (`move X to Y`)."""
    if command.startswith("put ") and " in/on " in command:
        obj, _, receptacle = command[len("put "):].partition(" in/on ")
        return f"move {obj} to {receptacle}"
    return command


class _HandcodedExpert:
    """ALFWorld's handcoded expert fed every step as `AlfredExpert` feeds it, caught up lazily.

    Its random choices draw from a generator of its own (swapped into `random` while it runs), so
    the same game, seed and actions give the same suggestions.
    """

    def __init__(self, game_file: Path, intro: str, seed: int, fix_put: bool) -> None:
        from alfworld.agents.expert import HandCodedTWAgent

        self.fix_put = fix_put
        self._random_state = random.Random(seed).getstate()
        self._agent = HandCodedTWAgent(max_steps=200)
        self._consumed = 0
        self._suggestion: str | None = "look"
        self.failed = False
        with self._own_random():
            try:
                self._agent.reset(str(game_file))
                self._agent.observe(intro)
            except Exception:  # noqa: BLE001 - a heuristic that cannot start simply has no advice
                self.failed = True

    @contextlib.contextmanager
    def _own_random(self) -> Iterator[None]:
        outside = random.getstate()
        random.setstate(self._random_state)
        try:
            yield
        finally:
            self._random_state = random.getstate()
            random.setstate(outside)

    def next_action(self, states: Sequence[Any], commands: Sequence[str], readable_facts: Any) -> str | None:
        """The suggestion after the last of `commands` (states[i] is the game after commands[i-1])."""
        if self.failed:
            return None
        with self._own_random():
            while self._consumed < len(commands):
                state, command = states[self._consumed + 1], commands[self._consumed]
                self._consumed += 1
                if "facts" not in state:
                    state["facts"] = readable_facts(state)
                try:
                    action = self._agent.act(self._view(state), 0, state["won"], command)
                except Exception:  # noqa: BLE001 - HandCodedAgentFailed/Timeout and its own bugs
                    self.failed = True
                    return None
                self._suggestion = self._admissible(action, state["admissible_commands"])
        return self._suggestion

    def _view(self, state: Any) -> Any:
        """The game state as the expert sees it: with the fix, `put X in/on Y` reads `move X to Y`.

        The expert was written for a grammar whose put command was `move X to Y`: it only starts
        its put subgoal once it finds that command among the admissible ones.
        """
        if not self.fix_put:
            return state
        view = dict(state)
        view["admissible_commands"] = [_as_move(command) for command in state["admissible_commands"]]
        return view

    def _admissible(self, action: str, admissible: Sequence[str]) -> str:
        if action in admissible:
            return action
        if self.fix_put and action.startswith("move ") and " to " in action:
            obj, _, receptacle = action[len("move "):].partition(" to ")
            wanted = f"put {obj} in/on {receptacle}"
            if wanted in admissible:
                return wanted
            for command in admissible:
                if command.startswith(f"put {obj} ") and command.endswith(f" {receptacle}"):
                    return command
        return "look"  # what AlfredExpert plays for an action the game would not accept


# --------------------------------------------------------------------------------------------
# The environment


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

    Keyword arguments: `games` (the games root; see the module docstring), `expert` (one of
    `EXPERTS`), `planner_timeout` (seconds one planner search may take before it is given up),
    `memoise` (reuse TextWorld's parses and the game's translation: same text, several times faster).
    """

    name = "alfworld"

    def __init__(
        self, games: str | None = None, expert: str = "combined", planner_timeout: float = 60.0, memoise: bool = True
    ) -> None:
        if expert not in EXPERTS:
            raise ValueError(f"unknown ALFWorld expert {expert!r} (choose from {', '.join(EXPERTS)})")
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
        self._planner: _PlannerExpert | None = None
        self._handcoded: _HandcodedExpert | None = None

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
        return _memoised_engine() if self.memoise else _preserved_argv()

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
        self._planner = _PlannerExpert(self.planner_timeout, replan_every_step=self.expert == "planner")
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
        command = action_text(as_action(action))
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
            self._handcoded = _HandcodedExpert(self._game_dir / GAME_FILE, intro, self._seed, fix_put)
        core = self._env.unwrapped

        def readable_facts(game_state: Any) -> list[Any]:
            return [core._get_human_readable_fact(fact) for fact in game_state["_facts"]]

        return self._handcoded.next_action(self._states, self._commands, readable_facts)

    def close(self) -> None:
        """Drop the game and free the planner's memory; safe twice.

        The library itself stays mapped: `fast_downward.close_lib` (dlclose) makes the interpreter
        crash at exit, so only its `cleanup()` is called.
        """
        env, self._env = self._env, None
        self._states, self._commands, self._loaded = [], [], None
        self._planner = self._handcoded = None
        if env is None:
            return
        lib = getattr(env.unwrapped, "downward_lib", None)
        if lib is not None:
            with contextlib.suppress(Exception):
                lib.cleanup()
