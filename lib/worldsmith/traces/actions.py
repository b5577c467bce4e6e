"""Turning recorded action text or JSON into a canonical `Action`, and an `Action` back into one line of text.

Harnesses record actions in many shapes: a tool call object, `{"type": ..., "arguments": ...}`,
a list of keystrokes, or a plain text command (`go to cabinet 1`). These helpers keep the raw
text untouched and derive a canonical name and JSON arguments; environment-specific parsers
(worldbook action schemas) can refine the name later from `raw`.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from worldsmith.traces.model import Action

__all__ = ["action_from_json", "action_from_text", "action_line", "parse_arguments"]

_NAME_KEYS = ("name", "tool", "tool_name", "function", "type", "action", "command")
_ARGUMENT_KEYS = ("arguments", "args", "parameters", "params", "input", "kwargs")


def parse_arguments(value: Any) -> tuple[Any, str | None]:
    """Arguments as JSON: strings are parsed; returns (arguments, parse_error)."""
    if value is None:
        return {}, None
    if isinstance(value, str):
        if not value.strip():
            return {}, None
        try:
            return orjson.loads(value), None
        except orjson.JSONDecodeError as error:
            return {}, f"arguments are not valid JSON: {error}"
    return value, None


def action_from_json(value: Any, *, raw: str | None = None, call_id: str | None = None) -> Action:
    """Canonicalise a JSON action (object, list or scalar); `raw` is kept as recorded."""
    if isinstance(value, dict):
        for key in _NAME_KEYS:
            named = value.get(key)
            if isinstance(named, dict) and any(k in named for k in ("name", *_ARGUMENT_KEYS)):
                inner = action_from_json(named, raw=raw, call_id=call_id)
                return inner
            if isinstance(named, str) and named:
                rest = {k: v for k, v in value.items() if k != key}
                for args_key in _ARGUMENT_KEYS:
                    if args_key in value:
                        arguments, error = parse_arguments(value[args_key])
                        return Action(
                            name=named, arguments=arguments, raw=raw, call_id=call_id, parse_error=error
                        )
                rest.pop("id", None)
                return Action(name=named, arguments=rest, raw=raw, call_id=call_id)
        if len(value) == 1:
            (only_key, only_value), = value.items()
            if isinstance(only_value, dict):
                return Action(name=str(only_key), arguments=only_value, raw=raw, call_id=call_id)
        return Action(name="json", arguments=value, raw=raw, call_id=call_id)
    if isinstance(value, list):
        return Action(name=_list_action_name(value), arguments=value, raw=raw, call_id=call_id)
    return Action(name=str(value), arguments={}, raw=raw, call_id=call_id)


def _list_action_name(items: list[Any]) -> str:
    """A list of similar objects (e.g. keystroke batches) is named by their first shared key."""
    if items and all(isinstance(item, dict) and item for item in items):
        first_keys = list(items[0])
        for key in first_keys:
            if all(key in item for item in items):
                return str(key)
    return "batch"


def action_from_text(text: str, *, call_id: str | None = None) -> Action:
    """Canonicalise an action recorded as text: JSON when it parses, else a command line.

    A command line `verb rest...` becomes name=`verb` (lower-case) and arguments
    `{"text": rest}`; the full text stays in `raw`.
    """
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            value = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            pass
        else:
            return action_from_json(value, raw=text, call_id=call_id)
    verb, _, rest = stripped.partition(" ")
    if not verb:
        return Action(name="", arguments={}, raw=text, call_id=call_id, parse_error="empty action")
    arguments = {"text": rest.strip()} if rest.strip() else {}
    return Action(name=verb.lower(), arguments=arguments, raw=text, call_id=call_id)


def action_line(action: Action | str, *, command: bool = False) -> str:
    """An action as one line of text; a string is taken as that line already.

    Two readers want different lines, hence `command`:
    - prompts and the tiny model's training text (default): the recorded command, but a recorded JSON
      call gets its name in front (`name {json}`) and arguments without text are shown as JSON, so a
      model sees every argument;
    - a text environment's input (`command=True`): the recorded text verbatim, else the name and the
      `text` argument, nothing else; what a player types, never JSON the game cannot parse.
    """
    if isinstance(action, str):
        return action
    if command:
        if action.raw is not None:
            return action.raw
        rest = action.arguments.get("text") if isinstance(action.arguments, dict) else None
        return f"{action.name} {rest}".strip() if rest else action.name
    raw = (action.raw or "").strip()
    if raw and not raw.startswith(("{", "[")):
        return raw
    if raw:
        return f"{action.name} {raw}"
    arguments = action.arguments
    if isinstance(arguments, dict) and set(arguments) <= {"text"}:
        return f"{action.name} {arguments.get('text', '')}".strip()
    return f"{action.name} {json.dumps(arguments, ensure_ascii=False)}"
