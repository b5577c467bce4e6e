"""One canonical action: however a call is spelled, the answer sources see the same `Action`.

Agents reach a simulator in many spellings of one call: a structured `Action`, a text line
`get_order {"order_id": "#O1"}`, Python call syntax `get_order(order_id='#O1')`, an OpenAI tool call
`{"type": "function", "function": {"name": ..., "arguments": "<json>"}}` or an MCP `tools/call`
`{"name": ..., "arguments": {...}}`. Every answer source reads the action's name, arguments and its
line (`action_line`, which nearest evidence retrieves by), so each spelling must become one action
first (`canonical_action`):

- a *tool call* (an action with named arguments, or text whose remainder is a JSON object, or Python
  call syntax with literal arguments) becomes the book's action name (aliases resolved), its
  arguments in the schema's order (others after, as given), no call id, and the recording's own
  line style as `raw`: Python call syntax where the book's examples were recorded so (BFCL), none
  otherwise (the line is then `name {json}`, as tool-API traces record it);
- a *text command* of a text world (`go to cabinet 1`) stays as typed: the world parses it.

Nothing is evaluated: call syntax is read with `ast` and `ast.literal_eval` only.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import Any

import orjson

from worldsmith.envs.base import as_action
from worldsmith.traces.actions import action_from_json, action_line
from worldsmith.traces.model import Action
from worldsmith.worldbook.model import ActionSchema, ActionSpec, Evidence

__all__ = ["call_separator", "call_text", "canonical_action", "canonical_evidence", "command_text", "is_call_world", "parse_call", "text_world"]

_CALL = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*\((.*)\)\s*$", re.DOTALL)
_GROUP = re.compile(r"\(\?P<([A-Za-z_][A-Za-z0-9_]*)>\.\+\?\)")
_ESCAPED = re.compile(r"\\(.)")


def is_call_world(spec: ActionSpec) -> bool:
    """Whether the action was recorded as a function call (`name(...)`) rather than a text command."""
    return any(example.startswith(f"{spec.name}(") for example in spec.examples)


def call_text(name: str, arguments: dict[str, Any], separator: str = ",") -> str:
    """A tool call written as Python call syntax, the way BFCL traces record it (`separator` between arguments:
    AgentDojo's write `, `)."""
    return f"{name}(" + separator.join(f"{key}={value!r}" for key, value in arguments.items()) + ")"


def call_separator(spec: ActionSpec) -> str:
    """The separator the recording put between a call's arguments (`,` or `, `), read from its examples."""
    return ", " if any(re.search(r",\s+[A-Za-z_]\w*=", example) for example in spec.examples) else ","


def command_text(spec: ActionSpec, arguments: dict[str, Any]) -> str:
    """The text command the action's learned pattern writes for these arguments (`go to {target}`)."""
    if not spec.pattern:
        return " ".join([spec.name, *(str(value) for value in arguments.values())])
    body = spec.pattern.removeprefix("^").removesuffix("$")
    parts = _GROUP.split(body)  # literal, name, literal, name, ..., literal
    return "".join(_ESCAPED.sub(r"\1", part) if index % 2 == 0 else str(arguments.get(part, ""))
                   for index, part in enumerate(parts))


def text_world(spec: ActionSpec | None) -> bool:
    """Whether the action is a text world's command (recorded as typed text its pattern reads), not a tool call
    (recorded as `name(...)` or `name {json}`)."""
    return spec is not None and bool(spec.examples) and not is_call_world(spec) and not any(
        example.startswith(f"{spec.name} {{") for example in spec.examples)


def parse_call(text: str, spec: ActionSpec | None = None) -> tuple[str, dict[str, Any]] | None:
    """(name, arguments) of Python call syntax with literal arguments (`f(a=1, b='x')`); positional arguments are
    named by the schema's argument order. None when the text is not such a call (or a positional argument has no
    name to take)."""
    if not _CALL.match(text):
        return None
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None
    if not isinstance(node, ast.Call) or any(k.arg is None for k in node.keywords):
        return None
    name = _dotted(node.func)
    if name is None:
        return None
    try:
        positional = [ast.literal_eval(argument) for argument in node.args]
        named = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg is not None}
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    slots = [argument.name for argument in spec.arguments] if spec is not None else []
    if len(positional) > len(slots):
        return None
    return name, {**dict(zip(slots, positional, strict=False)), **named}


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _json_object(text: str) -> dict[str, Any] | None:
    text = text.strip()
    if not text.startswith("{"):
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _as_call(action: Action, schema: ActionSchema) -> tuple[str, dict[str, Any]] | None:
    """(name, named arguments) when the action is a tool call in any spelling; None for a text command."""
    arguments = action.arguments
    text = arguments.get("text") if isinstance(arguments, dict) and set(arguments) == {"text"} else None
    raw = (action.raw or "").strip()
    if raw and "(" in action.name:  # call syntax read as a text verb: `get_order(order_id="#o1")`
        found = parse_call(raw, _spec(schema, raw.split("(", 1)[0].strip()))
        if found is not None:
            return found
    if isinstance(text, str):
        inner = _json_object(text)
        if inner is not None:  # the verb as typed: text parsing lower-cases it (`lockDoors {...}`)
            return (raw.split(None, 1)[0] if raw.lower().startswith(action.name) else action.name), inner
        return None
    if isinstance(arguments, dict) and (arguments or _spec(schema, action.name) is not None):
        if text_world(_spec(schema, action.name)) and raw and not raw.startswith(("{", "[")):
            return None  # a text world's command as typed: its pattern reads the raw line
        return action.name, arguments
    return None


def _spec(schema: ActionSchema | None, name: str) -> ActionSpec | None:
    """The schema's action of this name or alias, else the one whose name differs only in case."""
    if schema is None:
        return None
    found = schema.get(name)
    if found is None:
        folded = name.casefold()
        found = next((spec for spec in schema.actions if spec.name.casefold() == folded), None)
    return found


def canonical_action(action: Action | str | dict[str, Any], schema: ActionSchema | None = None) -> Action:
    """The one `Action` every spelling of a call becomes (module doc); a text command is returned as parsed.

    Raises `InvalidActionError` for what is no action at all (as `as_action` does)."""
    if isinstance(action, dict) and isinstance(action.get("function"), dict):
        action = action_from_json(action)  # an OpenAI tool call: {"type": "function", "function": {...}}
    parsed = as_action(action)
    if parsed.parse_error is not None or not parsed.name:
        return parsed
    if schema is None:
        schema = ActionSchema()
    found = _as_call(parsed, schema)
    if found is None:
        return parsed
    name, arguments = found
    spec = _spec(schema, name)
    if spec is not None:
        name = spec.name
        order = {argument.name: index for index, argument in enumerate(spec.arguments)}
        arguments = dict(sorted(arguments.items(), key=lambda item: order.get(item[0], len(order))))
        if text_world(spec):  # a text world's action given as a call: the command its pattern writes
            return as_action(command_text(spec, arguments))
    raw = call_text(name, arguments, call_separator(spec)) if spec is not None and is_call_world(spec) else None
    return Action(name=name, arguments=arguments, raw=raw)


def canonical_evidence(evidence: Sequence[Evidence], schema: ActionSchema) -> list[Evidence]:
    """The evidence with each tool call's `action_text` the line its canonical action has (`canonical_action`): a
    recording that spelled calls otherwise (a JSON raw, another argument order) is matched by line as a live call
    of the same tool and arguments is. Text commands keep their text; items already canonical are kept as they are."""
    out: list[Evidence] = []
    for item in evidence:
        line = item.action_text
        spec = _spec(schema, item.action)  # a tool the book declares: a text world's commands keep their text
        if isinstance(item.arguments, dict) and item.arguments and spec is not None and not text_world(spec):
            canonical = canonical_action(Action(name=item.action, arguments=item.arguments), schema)
            line = action_line(canonical)
        out.append(item if line == item.action_text else item.model_copy(update={"action_text": line}))
    return out
