"""A tool's text answer as a structured value, and back in the tool's own layout.

Tool APIs answer in JSON (compact, spaced or indented), in YAML blocks (`yaml.safe_dump` of a record or a list of
them: AgentDojo's suites, many Python agent frameworks) or as a Python literal (`str(dict)`). Records, look-ups and
the consistency checks read all three the same way, and an answer the simulator composes is written in the layout
the tool itself uses.

    value = parse_structured(text)       # a dict / list (or JSON scalar), or None for prose
    layout = structured_layout(text)     # how to write a value so the tool's text comes back exactly
    dump_layout(value, layout) == text.strip()

A YAML or Python-literal reading is accepted only when writing the value back gives the text exactly (the
round trip): "Error: file not found" is prose, not the record {"Error": ...}, and a sentence that happens to
parse as YAML is never taken for data. JSON is read as it always was (any valid JSON text).
"""

from __future__ import annotations

import ast
import json
import re
from functools import lru_cache
from typing import Any

import yaml

__all__ = ["REPR_LAYOUT", "YAML_LAYOUT", "Layout", "dump_layout", "parse_structured", "structured_layout"]

Layout = tuple[str, str, bool]  # JSON: (item separator, key separator, ensure_ascii); else YAML_LAYOUT / REPR_LAYOUT
YAML_LAYOUT: Layout = ("yaml", "", False)  # `yaml.safe_dump(value).strip()`: block style, sorted keys, width 80
REPR_LAYOUT: Layout = ("repr", "", False)  # Python's `repr` of a dict or list (`str(result)`)

_INDENTS = (2, 4)  # indented layouts tried: an item separator ",\n" + spaces says each item on its own line
# every unindented line of a YAML block of a mapping or a list: `key: value`, `key:` or `- item`
_YAML_TOP_LINE = re.compile(r"(- |-$|[^\s:#'\"\[{&*!|>%@`-][^:\n]*:( |$)|'[^'\n]*':( |$))")
_TIMESTAMP = "tag:yaml.org,2002:timestamp"


def _without_timestamps(resolvers: dict[Any, list[tuple[str, Any]]]) -> dict[Any, list[tuple[str, Any]]]:
    return {first: [(tag, pattern) for tag, pattern in pairs if tag != _TIMESTAMP] for first, pairs in resolvers.items()}


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The safe loader, dates and times kept as the text they are (a record's fields stay JSON values)."""

    yaml_implicit_resolvers = _without_timestamps(yaml.SafeLoader.yaml_implicit_resolvers)


class _Dumper(yaml.SafeDumper):
    """The safe dumper that writes those texts back unquoted, as the API wrote its dates."""

    yaml_implicit_resolvers = _without_timestamps(yaml.SafeDumper.yaml_implicit_resolvers)


def _json_layout(text: str) -> Layout | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    for separators in ((", ", ": "), (",", ":"), (",", ": ")):
        for ascii_only in (False, True):
            if json.dumps(value, separators=separators, ensure_ascii=ascii_only) == text.strip():
                return separators[0], separators[1], ascii_only
    if "\n" in text:
        for indent in _INDENTS:
            for ascii_only in (False, True):
                if json.dumps(value, indent=indent, ensure_ascii=ascii_only) == text.strip():
                    return ",\n" + " " * indent, ": ", ascii_only
    return None


def _looks_like_yaml_block(stripped: str) -> bool:
    """Cheap test before parsing: a block of several lines whose unindented lines are all keys or list items."""
    if "\n" not in stripped and not stripped.startswith("- "):
        return False
    return all(_YAML_TOP_LINE.match(line) for line in stripped.split("\n") if line and not line[0].isspace())


def _yaml_value(stripped: str) -> Any:
    if not _looks_like_yaml_block(stripped):
        return None
    cached = _read_yaml(stripped)
    return None if cached is None else json.loads(cached)


@lru_cache(maxsize=8192)
def _read_yaml(stripped: str) -> str | None:
    """The value as JSON text (a fresh copy per caller), or None: parsing and the round trip are costly in pure
    Python and a build asks of the same answers many times."""
    try:
        value = yaml.load(stripped, Loader=_Loader)  # noqa: S506 - a safe loader: data only
    except yaml.YAMLError:
        return None
    if not isinstance(value, dict | list) or not value:
        return None
    try:
        return json.dumps(value) if dump_layout(value, YAML_LAYOUT) == stripped else None
    except (yaml.YAMLError, TypeError, ValueError):
        return None


def _python_literal(stripped: str) -> Any:
    """A dict or list written by Python's repr (literals only: `ast.literal_eval`, never code)."""
    try:
        value = ast.literal_eval(stripped)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None
    return value if isinstance(value, dict | list) and repr(value) == stripped else None


def parse_structured(text: str) -> Any:
    """The value of a tool's answer: any JSON text that starts like an object or a list; a YAML block or a Python
    literal of a dict or list that writes back to the text exactly; else None (cheap for prose: only texts that
    start like data are parsed)."""
    stripped = text.strip()
    if not stripped:
        return None
    if stripped[0] in "{[":
        try:
            return json.loads(stripped)
        except ValueError:
            return _python_literal(stripped)
    return _yaml_value(stripped)


def structured_layout(text: str) -> Layout | None:
    """The layout that writes the text's value back exactly (JSON separators and indent, YAML or a Python
    literal), or None."""
    stripped = text.strip()
    if not stripped:
        return None
    if stripped[0] in "{[":
        layout = _json_layout(stripped)
        if layout is not None:
            return layout
        return REPR_LAYOUT if _python_literal(stripped) is not None else None
    return YAML_LAYOUT if _yaml_value(stripped) is not None else None


def dump_layout(value: Any, layout: Layout) -> str:
    """`value` written in a tool's own layout."""
    if layout == YAML_LAYOUT:
        return yaml.dump(value, Dumper=_Dumper).strip()
    if layout == REPR_LAYOUT:
        return repr(value)
    if layout[0].startswith(",\n"):
        return json.dumps(value, indent=len(layout[0]) - 2, separators=(",", layout[1]), ensure_ascii=layout[2])
    return json.dumps(value, separators=(layout[0], layout[1]), ensure_ascii=layout[2])
