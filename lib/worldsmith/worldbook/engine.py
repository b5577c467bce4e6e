"""The rule engine: state paths, effects, conditions, and templates read in both directions.

State is a JSON dict (`{"world": {"contents": {"bed 1": ["book 1"]}}}`). Paths in rules are
templates over the action's arguments, written either `world.contents.{arg.source}` or
`world.contents[arg.source]`; they resolve to segments because concrete keys hold dots and spaces.

A template renders an observation from arguments and state (`{arg.object}`, `{world.inventory}`,
`{world.contents[arg.target]}`; lists are written in the environment's `ListFormat`), and the same
template *matches* an observed text to read the state it shows. That is how state is tracked from
an observed prefix, and why a rule never overrides an observed output: the observation is read
back into state rather than replaced.

A template is parsed once (`_pieces`, a bounded cache) and matched without a regular expression: a pattern built
per call, with the arguments' text in it, was compiled anew almost every time (the `re` module keeps 512), which
made matching most of a build's time. `_fit` reads a template the way `re.fullmatch` reads its pattern
(literal text, lazy state slots, leftmost first), so what matches and what each slot holds are unchanged.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

from worldsmith.worldbook.model import Condition, Effect, ListFormat, join_path, unescape_key

__all__ = [
    "EffectError",
    "Slot",
    "apply_effects",
    "check_conditions",
    "copy_state",
    "escape_braces",
    "get_path",
    "literal_value",
    "match_template",
    "render",
    "resolve_path",
    "resolve_value",
    "set_path",
    "template_slots",
]

_MISSING = object()
# A template read left to right: `{{` and `}}` are literal braces, `{...}` is a slot, any other brace is text.
_TEMPLATE_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
_ARG_SLOT = re.compile(r"arg\.([A-Za-z0-9_]+)")
# {world.contents[arg.target]} / {world.inventory} / {world.go.slot1[arg.target]}
_STATE_SLOT = re.compile(r"((?:world|session|surface|epistemic)(?:\.[A-Za-z0-9_\-]+)+)(?:\[arg\.([A-Za-z0-9_]+)\])?")
# A body meant as a slot although it is none of the above ({arg.}, {world.x[MA(20)]}): it can never be filled.
_SLOT_LIKE = re.compile(r"(?:arg|world|session|surface|epistemic)(?:[.\[]|$)")
# Parsed templates and path templates kept (least recently used dropped): a book has a few hundred, a session a few
# books; the bound keeps unrelated books (a long-lived server, the workbench) from growing it without end.
_PARSED_CACHE_SIZE = 4096


class EffectError(ValueError):
    """An effect cannot apply to this state (wrong type at the path, an argument missing)."""


@dataclass(frozen=True)
class Slot:
    """One `{...}` slot of a template: an argument, or a state path optionally keyed by an argument."""

    start: int
    end: int
    arg: str | None = None
    path: str | None = None
    key_arg: str | None = None

    def segments(self, arguments: Mapping[str, Any]) -> list[str] | None:
        if self.path is None:
            return None
        segments = self.path.split(".")
        if self.key_arg is not None:
            key = arguments.get(self.key_arg)
            if key is None:
                return None
            segments.append(str(key))
        return segments


@lru_cache(maxsize=_PARSED_CACHE_SIZE)
def _pieces(template: str) -> tuple[str | Slot | None, ...]:
    """The template as literal text (escaped braces made single), slots, and None for a slot that can never be
    filled. Read left to right, so `{{{arg.x}}}` is a brace, a slot and a brace, and `{{arg.x}}` is text."""
    pieces: list[str | Slot | None] = []
    position = 0
    for match in _TEMPLATE_TOKEN.finditer(template):
        pieces.append(template[position:match.start()])
        position = match.end()
        body = match.group(1)
        if body is None:
            pieces.append(match.group()[0])
        elif arg := _ARG_SLOT.fullmatch(body):
            pieces.append(Slot(match.start(), match.end(), arg=arg.group(1)))
        elif state := _STATE_SLOT.fullmatch(body):
            pieces.append(Slot(match.start(), match.end(), path=state.group(1), key_arg=state.group(2)))
        else:
            pieces.append(None if _SLOT_LIKE.match(body) else match.group())
    pieces.append(template[position:])
    return tuple(piece for piece in pieces if piece != "")


def template_slots(template: str) -> list[Slot]:
    return [piece for piece in _pieces(template) if isinstance(piece, Slot)]


def slot_bodies(template: str) -> list[tuple[str, Slot | None]]:
    """Every unescaped `{...}` of a template as the engine reads it: (its body, the slot it fills, or None when it
    is no slot: a typo, a bad path or an unescaped literal brace, which `render` would print as it stands)."""
    out: list[tuple[str, Slot | None]] = []
    for match in _TEMPLATE_TOKEN.finditer(template):
        body = match.group(1)
        if body is None:
            continue
        if arg := _ARG_SLOT.fullmatch(body):
            out.append((body, Slot(match.start(), match.end(), arg=arg.group(1))))
        elif state := _STATE_SLOT.fullmatch(body):
            out.append((body, Slot(match.start(), match.end(), path=state.group(1), key_arg=state.group(2))))
        else:
            out.append((body, None))
    return out


def escape_braces(text: str) -> str:
    """Text as a template that renders to itself: `{` and `}` are doubled, so observed braces never read as slots."""
    return text.replace("{", "{{").replace("}", "}}")


def literal_value(value: Any) -> Any:
    """An observed value as an effect or condition value that means itself (a string's braces escaped)."""
    return escape_braces(value) if isinstance(value, str) else value


def _argument_text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


# A path's steps: {arg.x} | [arg.x] or a bracketed concrete key (backslash escapes) | a plain name
_PATH_STEP = re.compile(r"\{arg\.[A-Za-z0-9_]+\}|\[(?:\\.|[^\[\]\\])*\]|[^.\[\]{}]+", re.DOTALL)
_ARG_STEP = re.compile(r"[\[{]arg\.([A-Za-z0-9_]+)[\]}]")


@lru_cache(maxsize=_PARSED_CACHE_SIZE)
def _path_steps(template: str) -> tuple[tuple[bool, str], ...]:
    """A path template's steps as (is an argument, the argument's name or the segment)."""
    steps: list[tuple[bool, str]] = []
    for part in _PATH_STEP.findall(template):
        match = _ARG_STEP.fullmatch(part)
        if match:
            steps.append((True, match.group(1)))
        elif part.startswith("["):
            steps.append((False, unescape_key(part[1:-1])))  # a concrete key, every character kept (`escape_key`)
        else:
            steps.append((False, part))
    return tuple(steps)


def resolve_path(template: str, arguments: Mapping[str, Any]) -> list[str] | None:
    """Segments of a path template; None when an argument it names is missing."""
    segments: list[str] = []
    for is_arg, text in _path_steps(template):
        if is_arg:
            value = arguments.get(text)
            if value is None:
                return None
            segments.append(_argument_text(value))
        else:
            segments.append(text)
    return segments


def get_path(state: Mapping[str, Any], segments: Sequence[str]) -> Any:
    """The value at the path, or `_MISSING` (compare with `is_missing`)."""
    node: Any = state
    for segment in segments:
        if not isinstance(node, Mapping) or segment not in node:
            return _MISSING
        node = node[segment]
    return node


def is_missing(value: Any) -> bool:
    return value is _MISSING


def set_path(state: dict[str, Any], segments: Sequence[str], value: Any) -> None:
    node = state
    for segment in segments[:-1]:
        child = node.get(segment)
        if not isinstance(child, dict):
            child = node[segment] = {}
        node = child
    node[segments[-1]] = value


def _delete_path(state: dict[str, Any], segments: Sequence[str]) -> None:
    node: Any = state
    for segment in segments[:-1]:
        if not isinstance(node, dict) or segment not in node:
            return
        node = node[segment]
    if isinstance(node, dict):
        node.pop(segments[-1], None)


def resolve_value(value: Any, arguments: Mapping[str, Any], state: Mapping[str, Any]) -> Any:
    """An effect's value with `{arg.x}` / `{world.y}` filled in (a whole-slot value keeps its type)."""
    if not isinstance(value, str):
        return value
    pieces = _pieces(value)
    if len(pieces) == 1 and isinstance(slot := pieces[0], Slot):
        if slot.arg is not None:
            if slot.arg not in arguments:
                raise EffectError(f"the action has no argument {slot.arg!r}")
            return arguments[slot.arg]
        segments = slot.segments(arguments)
        found = _MISSING if segments is None else get_path(state, segments)
        if is_missing(found):
            raise EffectError(f"state path {slot.path!r} is unknown")
        return copy.deepcopy(found)
    rendered = render(value, arguments, state)
    if rendered is None:
        raise EffectError(f"value {value!r} names an unknown argument or state path")
    return rendered


class _Change(NamedTuple):
    """One effect at one resolved path: what is there now and the value the effect brings."""

    op: str
    segments: Sequence[str]
    current: Any
    value: Any
    formats: Mapping[str, ListFormat] | None

    @property
    def where(self) -> str:
        return ".".join(self.segments)


def _created(change: _Change) -> Any:
    if not is_missing(change.current):
        raise EffectError(f"create: {change.where} already exists")
    return change.value


def _stepped(change: _Change) -> Any:
    base = 0 if is_missing(change.current) else change.current
    step = 1 if change.value is None else change.value
    if not isinstance(base, (int, float)) or not isinstance(step, (int, float)):
        raise EffectError(f"{change.op}: {change.where} is not a number")
    return base + step if change.op == "increment" else base - step


def _listed(change: _Change) -> Any:
    """The list with the value appended (where the list's learned order puts it) or removed."""
    from worldsmith.worldbook.facts import sort_key

    items = [] if is_missing(change.current) else change.current
    if not isinstance(items, list):
        raise EffectError(f"{change.op}: {change.where} is not a list")
    items = list(items)
    if change.op == "append":
        if change.value not in items:
            items.append(change.value)
            key = sort_key(_format_for(change.segments, change.formats).order)
            if key is not None:
                items.sort(key=key)
    elif change.value in items:
        items.remove(change.value)
    return items


def _merged(change: _Change) -> Any:
    base = {} if is_missing(change.current) else change.current
    if not isinstance(base, dict) or not isinstance(change.value, dict):
        raise EffectError(f"merge: {change.where} and the value must both be objects")
    return {**base, **change.value}


# What each effect op (but `delete`) writes at its path, from what is there and the effect's value.
_UPDATES: dict[str, Callable[[_Change], Any]] = {
    "set": lambda change: change.value, "create": _created, "increment": _stepped, "decrement": _stepped,
    "append": _listed, "remove": _listed, "merge": _merged,
}


_ATOMS = frozenset({str, int, float, bool, type(None)})


def _copied(value: Any, memo: dict[int, Any]) -> Any:
    """`copy.deepcopy` of a state, quicker on the plain dicts, lists and scalars it is made of (anything else goes
    to `copy.deepcopy`, with the same memo, so an object held at two places is still one copy)."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is dict or kind is list:
        found = memo.get(id(value))
        if found is not None:
            return found
        if kind is list:
            items: list[Any] = []
            memo[id(value)] = items  # before the items, as `copy.deepcopy` does (a list inside itself)
            items.extend([item if type(item) in _ATOMS else _copied(item, memo) for item in value])
            return items
        mapping: dict[Any, Any] = {}
        memo[id(value)] = mapping
        for key, item in value.items():
            mapping[key if type(key) in _ATOMS else _copied(key, memo)] = (
                item if type(item) in _ATOMS else _copied(item, memo))
        return mapping
    return copy.deepcopy(value, memo)


def copy_state(value: Any) -> Any:
    """A state (or a value in it) copied as `copy.deepcopy` would, faster on plain JSON-like data."""
    return _copied(value, {})


def apply_effects(state: Mapping[str, Any], effects: Sequence[Effect], arguments: Mapping[str, Any],
                  formats: Mapping[str, ListFormat] | None = None) -> dict[str, Any]:
    """A new state with the effects applied in order; the input is left untouched. Raises EffectError.

    An appended item takes the place the list's learned order gives it (`ListFormat.order`)."""
    new: dict[str, Any] = _copied(dict(state), {})
    for effect in effects:
        segments = resolve_path(effect.path, arguments)
        if segments is None:
            raise EffectError(f"effect path {effect.path!r} names an argument the action does not have")
        if effect.op == "delete":
            _delete_path(new, segments)
            continue
        current = get_path(new, segments)
        value = resolve_value(effect.value, arguments, new)
        update = _UPDATES.get(effect.op)
        if update is not None:
            set_path(new, segments, update(_Change(effect.op, segments, current, value, formats)))
    return new


def _compare(op: str, actual: Any, expected: Any) -> bool:
    if op == "eq":
        return actual == expected
    if op == "ne":
        return actual != expected
    if op == "in":
        return isinstance(expected, (list, str)) and actual in expected
    if op == "not_in":
        return isinstance(expected, (list, str)) and actual not in expected
    if op == "contains":
        return isinstance(actual, (list, str, dict)) and expected in actual
    if op == "not_contains":
        return isinstance(actual, (list, str, dict)) and expected not in actual
    if op in ("gt", "lt"):
        try:
            return actual > expected if op == "gt" else actual < expected
        except TypeError:
            return False
    if op == "matches":
        return isinstance(actual, str) and re.search(str(expected), actual) is not None
    raise ValueError(f"unknown condition op {op!r}")


def check_condition(condition: Condition, arguments: Mapping[str, Any], state: Mapping[str, Any]) -> bool | None:
    """True/False, or None when the state path is unknown (an unknown is not a failure)."""
    if condition.arg is not None:
        actual = arguments.get(condition.arg, _MISSING)
    else:
        segments = resolve_path(condition.path or "", arguments)
        actual = _MISSING if segments is None else get_path(state, segments)
    if condition.op == "exists":
        return not is_missing(actual)
    if condition.op == "missing":
        return is_missing(actual)
    if is_missing(actual):
        return None
    try:
        expected = resolve_value(condition.value, arguments, state)
    except EffectError:
        return None
    return _compare(condition.op, actual, expected)


def check_conditions(conditions: Sequence[Condition], arguments: Mapping[str, Any],
                     state: Mapping[str, Any]) -> bool | None:
    """All true -> True; any false -> False; else None (something unknown)."""
    results = [check_condition(c, arguments, state) for c in conditions]
    if any(result is False for result in results):
        return False
    return True if all(result is True for result in results) else None


def _format_for(path: Sequence[str], formats: Mapping[str, ListFormat] | None) -> ListFormat:
    if formats:
        for length in range(len(path), 0, -1):
            found = formats.get(join_path(path[:length]))
            if found is not None:
                return found
        if "*" in formats:
            return formats["*"]
    return ListFormat()


def _value_text(value: Any, path: Sequence[str], formats: Mapping[str, ListFormat] | None) -> str:
    from worldsmith.worldbook.facts import render_list  # facts imports the model only; no cycle at load

    if isinstance(value, list):
        return render_list(value, _format_for(path, formats))
    return _argument_text(value)


def render(template: str, arguments: Mapping[str, Any], state: Mapping[str, Any],
           formats: Mapping[str, ListFormat] | None = None) -> str | None:
    """The observation the template gives here; None when any slot is unfilled (an argument or a state value
    unknown, a slot that names neither), so a prediction never shows a `{arg.x}` left over."""
    out: list[str] = []
    for piece in _pieces(template):
        if piece is None:
            return None
        if isinstance(piece, str):
            out.append(piece)
        elif piece.arg is not None:
            if arguments.get(piece.arg) is None:
                return None
            out.append(_argument_text(arguments[piece.arg]))
        else:
            segments = piece.segments(arguments)
            value = _MISSING if segments is None else get_path(state, segments)
            if is_missing(value):
                return None
            out.append(_value_text(value, segments or [], formats))
    return "".join(out)


def _fit(literals: Sequence[str], text: str) -> list[tuple[int, int]] | None:
    """Where the slots between `literals` lie in `text`, as `re.fullmatch` of `L0(.*?)L1(.*?)...Lk` with DOTALL
    would find them (each slot as short as the rest allows, left to right), or None when the text does not fit.

    Only where a literal occurs can a slot end, so the search steps from one occurrence (`str.find`) to the next;
    a (slot, start) that once failed fails again and is not retried."""
    first, last = literals[0], literals[-1]
    if len(literals) == 1:
        return [] if text == first else None
    end = len(text) - len(last)  # the last slot ends where the last literal starts
    if end < len(first) or not text.startswith(first) or not text.endswith(last):
        return None
    slots = len(literals) - 1
    failed: set[tuple[int, int]] = set()

    def place(slot: int, start: int) -> list[tuple[int, int]] | None:
        if slot == slots - 1:
            return [(start, end)] if start <= end else None
        if (slot, start) in failed:
            return None
        literal = literals[slot + 1]
        at = text.find(literal, start, end)
        while at != -1:
            rest = place(slot + 1, at + len(literal))
            if rest is not None:
                return [(start, at), *rest]
            at = text.find(literal, at + 1, end)
        failed.add((slot, start))
        return None

    return place(0, len(first))


def match_template(template: str, observation: str, arguments: Mapping[str, Any]) -> dict[tuple[str, ...], Any] | None:
    """The state values an observation shows through this template (lists parsed), or None if it does
    not fit. Argument slots must show the arguments' own values."""
    from worldsmith.worldbook.facts import parse_list_items

    literals: list[str] = []
    text: list[str] = []
    groups: list[tuple[str, ...]] = []
    for piece in _pieces(template):
        if piece is None:
            return None
        if isinstance(piece, str):
            text.append(piece)
        elif piece.arg is not None:
            if piece.arg not in arguments:
                return None
            text.append(_argument_text(arguments[piece.arg]))
        else:
            segments = piece.segments(arguments)
            if segments is None:
                return None
            literals.append("".join(text))
            text = []
            groups.append(tuple(segments))
    literals.append("".join(text))
    spans = _fit(literals, observation)
    if spans is None:
        return None
    values: dict[tuple[str, ...], Any] = {}
    for path, (start, end) in zip(groups, spans, strict=True):
        shown = observation[start:end]
        parsed = parse_list_items(shown)
        value: Any = parsed[0] if parsed is not None and _looks_like_list_path(path) else shown
        if path in values and values[path] != value:
            return None
        values[path] = value
    return values


def _looks_like_list_path(segments: Sequence[str]) -> bool:
    from worldsmith.worldbook.facts import CONTENTS

    return len(segments) >= 2 and (segments[1] == CONTENTS or len(segments) == 2)

