"""A worldbook's actions as tools: JSON-schema input schemas, and tool calls back to trace `Action`s.

The schema a tool offers is the one the worldbook learned from evidence (argument names, types,
which are always present), with each argument described by the values the evidence shows. A
call is checked against that schema (jsonschema) and then becomes exactly the `Action` a
recorded trace stores for it (`sim.canonical.canonical_action`), so a simulator answers an MCP call as it
answers the same action in-process: tool-call worlds get their JSON arguments (and `name(arg=value, ...)` text
where the recording wrote calls so, as BFCL does), text worlds (ALFWorld) get the command the action's learned
pattern writes (`go to bed 1`), parsed as any typed command is.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from worldsmith.sim.canonical import call_text, canonical_action
from worldsmith.traces.model import Action
from worldsmith.util.errors import BadInputError, NotFoundError
from worldsmith.worldbook.model import ActionSpec, Worldbook

__all__ = [
    "CLOSE_SESSION_TOOL",
    "ToolArgumentError",
    "ToolSpec",
    "UnknownToolError",
    "action_for_call",
    "book_tools",
    "call_text",
    "close_tool",
]

CLOSE_SESSION_TOOL = "close_session"
"""The MCP server's own tool that ends a session now (`worldsmith_close_session` if the book has an action so named)."""

_EXAMPLE_VALUES = 3
_VALUE_CHARS = 60


class UnknownToolError(NotFoundError):
    """The worldbook has no action of this name (MCP: a protocol error)."""


class ToolArgumentError(BadInputError):
    """The arguments do not fit the tool's learned schema (MCP: a tool result with isError)."""


class ToolSpec(BaseModel):
    """One tool as a client sees it: the MCP `Tool` fields."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str
    input_schema: dict[str, Any] = Field(description="JSON Schema (draft 2020-12) of the arguments object.")


def folded_json(value: Any, limit: int) -> str:
    """`value` as JSON text of about `limit` characters at most: what a client would send, never a Python repr; a
    longer value is folded where its structure allows (a string cut with `…` inside its quotes, an object or list
    keeping its first members and `…`), so the text never stops mid-token or with a bracket left open."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return text
    if isinstance(value, str):
        return json.dumps(value[: max(limit - 3, 1)] + "…", ensure_ascii=False)
    if isinstance(value, dict | list):
        is_dict = isinstance(value, dict)
        items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
        parts: list[str] = []
        used = 2
        for key, item in items:
            head = json.dumps(str(key), ensure_ascii=False) + ": " if is_dict else ""
            room = limit - used - len(head) - 5  # the separator and the closing `, …`
            if room < 5:
                break
            part = head + folded_json(item, room)
            if used + len(part) + 5 > limit and parts:
                break
            parts.append(part)
            used += len(part) + 2
        if len(parts) < len(items):
            parts.append("…")
        return ("{" if is_dict else "[") + ", ".join(parts) + ("}" if is_dict else "]")
    return text[:limit]  # a number or literal this long: nothing to fold


def _argument_values(book: Worldbook) -> dict[tuple[str, str], list[str]]:
    """(action, argument) -> a few distinct values the evidence shows, as short JSON-ish text."""
    values: dict[tuple[str, str], list[str]] = defaultdict(list)
    for item in book.evidence:
        if not isinstance(item.arguments, dict):
            continue
        for name, value in item.arguments.items():
            shown = values[(item.action, name)]
            text = folded_json(value, _VALUE_CHARS)
            if len(shown) < _EXAMPLE_VALUES and text not in shown:
                shown.append(text)
    return values


def _argument_schema(spec: ActionSpec, values: dict[tuple[str, str], list[str]]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for argument in spec.arguments:
        prop: dict[str, Any] = {} if argument.type == "any" else {"type": argument.type}
        seen = values.get((spec.name, argument.name), [])
        description = argument.description or (f"seen in the evidence: {', '.join(seen)}" if seen else "")
        if description:
            prop["description"] = description
        properties[argument.name] = prop
    return {"type": "object", "properties": properties,
            "required": [argument.name for argument in spec.arguments if argument.required],
            "additionalProperties": False}


def book_tools(book: Worldbook) -> list[ToolSpec]:
    """The book's actions as tools, in the action schema's order."""
    values = _argument_values(book)
    tools = []
    for spec in book.action_schema.actions:
        lines = [f"Simulated action '{spec.name}' of {book.env_id or book.name} ({spec.description})."
                 if spec.description else f"Simulated action '{spec.name}' of {book.env_id or book.name}."]
        if spec.examples:
            lines.append("Examples: " + "; ".join(spec.examples[:3]))
        tools.append(ToolSpec(name=spec.name, description="\n".join(lines), input_schema=_argument_schema(spec, values)))
    return tools


def close_tool(book: Worldbook) -> ToolSpec:
    """The server's tool that closes a session, named so that it never shadows one of the book's actions."""
    taken = {spec.name for spec in book.action_schema.actions}
    name = CLOSE_SESSION_TOOL if CLOSE_SESSION_TOOL not in taken else f"worldsmith_{CLOSE_SESSION_TOOL}"
    return ToolSpec(
        name=name,
        description="End a simulator session now (not an action of the simulated world): its episode stays saved, "
        "the server frees what it held, and its handle or name stops working. Without `session`, the session "
        "that `_meta` 'worldsmith/session' names (or, on a connection with an MCP session, its default one).",
        input_schema={
            "type": "object",
            "properties": {
                "session": {"type": "string", "minLength": 1, "description": "The handle or name of the session."}
            },
            "additionalProperties": False,
        },
    )


def action_for_call(book: Worldbook, name: str, arguments: dict[str, Any] | None) -> Action:
    """The trace `Action` for a tool call, after checking the arguments against the learned schema.

    Raises `UnknownToolError` for a name the book does not know, `ToolArgumentError` (naming the
    argument and the reason) for arguments that do not fit.
    """
    spec = next((s for s in book.action_schema.actions if s.name == name), None)
    if spec is None:
        known = ", ".join(s.name for s in book.action_schema.actions[:20])
        raise UnknownToolError(f"unknown tool {name!r}; {book.name} has: {known}")
    import jsonschema  # the serve extra (mcp depends on it); listing tools does not need it

    arguments = dict(arguments or {})
    schema = _argument_schema(spec, {})
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(arguments), key=lambda e: list(e.path))
    if errors:
        reasons = "; ".join((f"argument {'.'.join(map(str, e.path))!r}: " if e.path else "") + e.message
                            for e in errors)
        raise ToolArgumentError(f"tool {name!r}: {reasons}")
    return canonical_action(Action(name=name, arguments=arguments), book.action_schema)
