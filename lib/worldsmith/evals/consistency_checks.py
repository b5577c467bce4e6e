"""The invariant checks, on answers as text: pure functions, so each is tested on its own.

    same_answer(first, again)                     # repeated reads and spellings
    answers_about(answer, "order_id", "#O1")      # True / False, None when the answer holds no such record
    shows_record(answer)                          # existence: an identified record, or not ("not found")
    write_read_agreement(written, read, "#O1", ("status",))   # (agrees, why not) or None when not checkable
    spellings("get_order", {"order_id": "#O1"})   # the four ways to say one call
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from worldsmith.evals.consistency_plan import without_id
from worldsmith.traces.model import Action
from worldsmith.worldbook.record_store import iter_records, own_records, parse_structured

__all__ = ["SPELLINGS", "answers_about", "borrowed", "record_of", "same_answer", "shows_record", "spellings",
           "write_read_agreement"]

SPELLINGS = ("action", "text", "openai", "mcp")


def same_answer(first: str, again: str) -> bool:
    """Two answers are the same text (surrounding whitespace aside)."""
    return first.strip() == again.strip()


def answers_about(answer: str, key: str, asked: Any) -> bool | None:
    """Whether the answer's records under `key` include the asked id; None when it holds none (nothing to check:
    a refusal, a text answer)."""
    value = parse_structured(answer)
    ids = {str(ident) for found, ident, _ in iter_records(value) if found == key} if value is not None else set()
    return str(asked) in ids if ids else None


def borrowed(answer: str, key: str, asked: Any, recorded: Mapping[str, Mapping[str, str]]) -> str | None:
    """The id of a recorded record of another entity the answer's record of `asked` copies with the id swapped in
    (every other field equal: `ProbePlan.recorded`); None when it copies none."""
    record = record_of(answer, asked)
    if record is None or key not in record:
        return None
    source = recorded.get(key, {}).get(without_id(record, key))
    return source if source is not None and source != str(asked) else None


def shows_record(answer: str) -> bool:
    """An answer shows an entity when it is JSON holding an identified record (an error text, `{"error": ...}`,
    an empty list show none)."""
    value = parse_structured(answer)
    return value is not None and any(True for _ in iter_records(value))


def record_of(answer: str, ident: Any) -> dict[str, Any] | None:
    """The answer's first record whose own id is `ident`."""
    value = parse_structured(answer)
    if value is None:
        return None
    return next((record for _, found, record in own_records(value) if str(found) == str(ident)), None)


def write_read_agreement(written: str, read: str, ident: Any, fields: tuple[str, ...]) -> tuple[bool, str] | None:
    """Whether the read that followed a write shows the record the write answered with the same `fields`; None when
    the write answered no record of `ident` (nothing to compare). (False, why) names the fields that differ, or says
    that the read showed no such record."""
    before = record_of(written, ident)
    if before is None:
        return None
    after = record_of(read, ident)
    if after is None:
        return False, f"the write answered record {ident!r}; the read showed none"
    differ = [name for name in fields if name in before and name in after and before[name] != after[name]]
    return (not differ, f"fields differ: {', '.join(differ)}" if differ else "")


def spellings(name: str, arguments: dict[str, Any]) -> dict[str, Action | str | dict[str, Any]]:
    """One call four ways: a structured `Action`, text `name {json}`, an OpenAI tool call (arguments as a JSON
    string) and an MCP call (`{"name", "arguments"}`)."""
    text = json.dumps(arguments, ensure_ascii=False)
    return {
        "action": Action(name=name, arguments=dict(arguments)),
        "text": f"{name} {text}",
        "openai": {"type": "function", "function": {"name": name, "arguments": text}},
        "mcp": {"name": name, "arguments": dict(arguments)},
    }
