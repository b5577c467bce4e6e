"""Schema, contract, note and demonstration stages of the deterministic builder.

All four read the aligned evidence (and the reviewed rules) and write what a person needs to read
a worldbook: which actions exist and how their text parses, which state paths the rules use and
how lists are written, what each action's observations look like, the conventions that are not
rules, and a few outcome-diverse examples per action.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from worldsmith.worldbook.engine import template_slots
from worldsmith.worldbook.facts import extract_facts, learn_list_format, parse_json_object
from worldsmith.worldbook.model import (
    ActionSchema,
    ActionSpec,
    ArgumentSpec,
    Demonstration,
    Evidence,
    ListFormat,
    Note,
    ObservationContract,
    Rule,
    StatePath,
    StateSchema,
    StateType,
    join_path,
)

__all__ = ["induce_action_schema", "induce_contracts", "induce_notes", "induce_state_schema", "pick_demonstrations"]

_TYPES: dict[type, StateType] = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


def _type_of(value: Any) -> StateType:
    return _TYPES.get(type(value), "any")


def _arguments(item: Evidence) -> dict[str, Any]:
    return item.arguments if isinstance(item.arguments, dict) else {}


def _text_pattern(item: Evidence) -> str | None:
    """A regex that parses this action text back into its arguments ("take (?P<object>.+?) from (?P<source>.+)")."""
    arguments = _arguments(item)
    text = item.action_text
    if not arguments or not all(isinstance(v, str) for v in arguments.values()):
        return None
    pattern, position = "", 0
    for name, value in sorted(arguments.items(), key=lambda pair: text.find(pair[1])):
        at = text.find(value, position)
        if at < 0:
            return None
        pattern += re.escape(text[position:at]) + f"(?P<{name}>.+?)"
        position = at + len(value)
    pattern += re.escape(text[position:])
    return "^" + pattern.replace(r"\ ", " ") + "$"


def induce_action_schema(evidence: Sequence[Evidence]) -> ActionSchema:
    by_action: dict[str, list[Evidence]] = defaultdict(list)
    for item in evidence:
        by_action[item.action].append(item)
    actions: list[ActionSpec] = []
    for name, items in sorted(by_action.items()):
        seen: dict[str, Counter[str]] = defaultdict(Counter)
        for item in items:
            for arg, value in _arguments(item).items():
                seen[arg][_type_of(value)] += 1
        arguments = [ArgumentSpec(name=arg, type=types.most_common(1)[0][0],  # type: ignore[arg-type]
                                  required=sum(types.values()) == len(items))
                     for arg, types in sorted(seen.items())]
        patterns = Counter(p for p in (_text_pattern(item) for item in items) if p)
        verbs = Counter(item.action_text.split(" ", 1)[0] for item in items if item.action_text)
        aliases = sorted(v for v in verbs if v != name and not v.startswith("{") and len(v) < 40)[:10]
        examples = list(dict.fromkeys(item.action_text for item in items))[:5]
        actions.append(ActionSpec(
            name=name, aliases=aliases, arguments=arguments,
            pattern=patterns.most_common(1)[0][0] if patterns else None, examples=examples,
            description=f"{len(items)} turns in the evidence",
        ))
    return ActionSchema(actions=actions)


def induce_state_schema(evidence: Sequence[Evidence], rules: Sequence[Rule]) -> StateSchema:
    """Every state path the rules read or write, typed from the values the observations show."""
    fmt: ListFormat = learn_list_format(item.observation for item in evidence)
    found: dict[str, dict[str, Any]] = {}

    def note(path: str, value: Any = None) -> None:
        entry = found.setdefault(path, {"types": Counter(), "examples": []})
        if value is not None:
            entry["types"][_type_of(value)] += 1
            if len(entry["examples"]) < 3 and value not in entry["examples"]:
                entry["examples"].append(value)

    for item in evidence:
        for fact in extract_facts(item.action, _arguments(item), item.observation):
            generic = join_path(fact.path[:2]) + (".{key}" if len(fact.path) > 2 else "")
            note(generic, fact.value)
    for rule in rules:
        for slot in template_slots(rule.template):
            if slot.path:
                note(slot.path + (".{key}" if slot.key_arg else ""))
        for effect in rule.effects:
            note(re.sub(r"\.?\{arg\.[A-Za-z0-9_]+\}|\[arg\.[A-Za-z0-9_]+\]", ".{key}", effect.path))
        for condition in rule.conditions:
            if condition.path:
                note(re.sub(r"\.?\{arg\.[A-Za-z0-9_]+\}|\[arg\.[A-Za-z0-9_]+\]", ".{key}", condition.path))
    paths: list[StatePath] = []
    for path, entry in sorted(found.items()):
        kind: StateType = entry["types"].most_common(1)[0][0] if entry["types"] else "any"
        is_list = kind == "array"
        paths.append(StatePath(
            path=path, type=kind, mutable=True, list_format=fmt if is_list else None,
            examples=entry["examples"], description="read from observations" if entry["examples"] else "used by rules",
        ))
    return StateSchema(paths=paths)


def induce_contracts(evidence: Sequence[Evidence], rules: Sequence[Rule]) -> list[ObservationContract]:
    """Per action: the leading template, the fields every observation carries, a few examples."""
    by_action: dict[str, list[Evidence]] = defaultdict(list)
    for item in evidence:
        by_action[item.action].append(item)
    contracts: list[ObservationContract] = []
    for action, items in sorted(by_action.items()):
        leading = max((r for r in rules if r.action == action), key=lambda r: (r.support, r.id), default=None)
        objects = [parse_json_object(item.observation) for item in items]
        if objects and all(o is not None for o in objects):
            keys = set.intersection(*(set(o) for o in objects if o is not None))
            required = sorted(keys)
        else:
            required = sorted({s.path or f"arg.{s.arg}" for s in template_slots(leading.template)}) if leading else []
        contracts.append(ObservationContract(
            action=action, template=leading.template if leading else "", required_fields=required,
            examples=list(dict.fromkeys(item.observation for item in items))[:3],
        ))
    return contracts


def induce_notes(evidence: Sequence[Evidence], rules: Sequence[Rule]) -> list[Note]:
    """Conventions that are not rules: how lists are written, constant replies, failure messages."""
    notes: list[Note] = []
    lists = [item for item in evidence if "you see" in item.observation.lower() or "carrying" in item.observation]
    if lists:
        fmt = learn_list_format(item.observation for item in lists)
        notes.append(Note(id="format.lists", kind="format", provenance=[i.turn_id for i in lists[:5]],
                          text=f"Lists are written with the article '{fmt.article}', separated by {fmt.separator!r}, "
                               f"the last item after {fmt.last_separator!r} (a pair: {fmt.pair_separator!r}); an "
                               f"empty list is {fmt.empty!r}."))
    by_observation: dict[str, list[Evidence]] = defaultdict(list)
    for item in evidence:
        by_observation[item.observation].append(item)
    for observation, items in sorted(by_observation.items(), key=lambda pair: -len(pair[1])):
        actions = sorted({item.action for item in items})
        if len(items) < 3 or len(actions) < 2 or len(observation) > 200:
            continue
        notes.append(Note(id=f"reply.{len(notes)}", kind="convention", provenance=[i.turn_id for i in items[:10]],
                          text=f"{observation!r} is the reply of {len(items)} turns across actions "
                               f"{', '.join(actions[:8])}" + (" (a failure message)" if items[0].outcome != "success"
                                                            else "")))
        if len(notes) >= 12:
            break
    json_actions = sorted({item.action for item in evidence if parse_json_object(item.observation) is not None})
    if json_actions:
        notes.append(Note(id="format.json", kind="format", text=f"Actions {', '.join(json_actions[:20])} reply with "
                          "a JSON object; its keys are state facts (world.<key>).",
                          provenance=[i.turn_id for i in evidence if i.action in json_actions][:5]))
    return notes


def pick_demonstrations(evidence: Sequence[Evidence], rules: Sequence[Rule], per_action: int = 4) -> list[Demonstration]:
    """Outcome-diverse examples per action: one per observation form (rule) and outcome first, then more."""
    form_of = {turn: rule.id for rule in rules for turn in rule.provenance.supporting}
    by_action: dict[str, list[Evidence]] = defaultdict(list)
    for item in evidence:
        by_action[item.action].append(item)
    picked: list[Demonstration] = []
    for action, items in sorted(by_action.items()):
        seen: set[tuple[str | None, str | None]] = set()
        chosen: list[Evidence] = []
        for item in items:
            key = (form_of.get(item.turn_id), item.outcome)
            if key not in seen:
                seen.add(key)
                chosen.append(item)
        chosen += [item for item in items if item not in chosen]
        for item in chosen[:per_action]:
            picked.append(Demonstration(action=action, turn_id=item.turn_id, outcome=item.outcome or "success",
                                        action_text=item.action_text, observation=item.observation))
    return picked
