"""The oracle expert: the goal of a game and its true PDDL state, and the next move read off them.

Why an oracle of its own: ALFWorld's planner is slow and its handcoded expert circles; reading the
true facts walks straight to the goal for the task types it knows (the package docstring says how
the combined expert falls back on the others).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["TASK_TYPES", "TRAJ_FILE", "Goal", "NoPlan", "World", "oracle_action"]

TRAJ_FILE = "traj_data.json"
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
