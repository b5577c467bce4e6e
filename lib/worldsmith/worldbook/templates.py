"""The builder's first deterministic stage, evidence from traces, and observation templates with argument slots.

`evidence_from_episodes` aligns every recorded turn into an `Evidence` item (canonical action,
arguments, verbatim action text and observation). `make_template` turns an observation into a
template: every argument value found in it becomes `{arg.<name>}`, so "You pick up the apple 1 from
the countertop 1." under `take apple 1 from countertop 1` becomes "You pick up the {arg.object} from
the {arg.source}."; `render_template` fills one in. Rules are induced from these by `worldbook.induce`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import orjson

from worldsmith.traces.actions import action_line
from worldsmith.traces.model import Episode
from worldsmith.worldbook.engine import escape_braces, render
from worldsmith.worldbook.facts import whole_word_spans
from worldsmith.worldbook.model import Evidence

__all__ = ["evidence_from_episodes", "make_template", "observation_outcome", "render_template", "slot_pieces",
           "text_arguments"]

# Words that separate the objects of a text command ("put apple 1 in/on countertop 1").
_SEPARATORS = re.compile(r"\s+(from|in/on|into|onto|in|on|to|with|at|using)\s+")
_FAILURE = re.compile(r"(^nothing happens|\berror\b|\bnot (found|allowed|possible|valid)\b|\bcan'?t\b|\bcannot\b|"
                      r"\bunknown\b|\bno such\b|\bdon't know\b|\bnot recogni[sz]e)", re.IGNORECASE)
_ROLE_NAMES = ("object", "target", "tool", "extra")


def text_arguments(rest: str) -> dict[str, str]:
    """Named arguments of a text command's remainder: `apple 1 from countertop 1` -> object, source.

    The first phrase is the `object`; a phrase after `from` is the `source`, after `with`/`using`
    the `tool`, after any other separator the `target`.
    """
    parts = _SEPARATORS.split(" " + rest.strip())  # a leading separator ("go to desk 1") splits too
    if len(parts) == 1 and not parts[0].strip():
        return {}
    arguments = {"object": parts[0].strip()} if parts[0].strip() else {}
    for separator, phrase in zip(parts[1::2], parts[2::2], strict=False):
        role = "source" if separator == "from" else "tool" if separator in ("with", "using") else "target"
        name, index = role, 2
        while name in arguments:
            name, index = f"{role}{index}", index + 1
        arguments[name] = phrase
    return arguments


def _arguments(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        if set(arguments) == {"text"} and isinstance(arguments["text"], str):
            return text_arguments(arguments["text"])
        return arguments
    return {}


def observation_outcome(observation: str) -> str:
    """"failure" when the observation reads as a refusal or error, else "success". A JSON tool result fails
    when it carries an `error` key (its other text is data: a ticket titled "Error" is not a failure)."""
    stripped = observation.strip()
    if stripped.startswith("{"):
        try:
            data = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            return "failure" if "error" in data else "success"
    return "failure" if _FAILURE.search(observation[:300]) else "success"


def evidence_from_episodes(episodes: Iterable[Episode]) -> list[Evidence]:
    """Every turn as a verbatim transition (hand-over context stays out: it is not the environment's answer). The
    action text is the line the harness keys a pending step by (`action_line`): the recorded text, else the name
    and the JSON arguments, so a structured call without raw text is not reduced to its tool's name (evidence-keyed
    sources and nearest evidence would then see no argument)."""
    out: list[Evidence] = []
    for episode in episodes:
        for turn in episode.turns:
            text = action_line(turn.action)
            out.append(Evidence(
                turn_id=turn.id or f"{episode.id}#{turn.index}", action=turn.action.name,
                arguments=_arguments(turn.action.arguments), action_text=text, observation=turn.observation.text,
                outcome=observation_outcome(turn.observation.text), done=turn.done,
            ))
    return out


def _flat_values(arguments: dict[str, Any]) -> list[tuple[str, str]]:
    """(slot name, text) for every scalar argument value worth substituting (longest first)."""
    values = []
    for name, value in arguments.items():
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, (str, int, float)):
            text = str(value)
            if len(text) >= 2:  # a one-character value would replace letters and digits everywhere
                values.append((name, text))
    return sorted(values, key=lambda item: -len(item[1]))


def _split_on(pieces: list[tuple[str | None, str]], name: str, value: str) -> list[tuple[str | None, str]]:
    """(slot name or None for text, text) pieces with every whole-word `value` in the text pieces made a slot."""
    out: list[tuple[str | None, str]] = []
    for slot, text in pieces:
        if slot is not None:
            out.append((slot, text))
            continue
        position = 0
        for start, end in whole_word_spans(text, value):
            out += [(None, text[position:start]), (name, text[start:end])]
            position = end
        out.append((None, text[position:]))
    return out


def slot_pieces(text: str, values: Iterable[tuple[str, str]]) -> list[tuple[str | None, str]]:
    """`text` as (slot name or None for text, text) pieces with each (name, value), in the order given, made a slot
    wherever it stands between token boundaries: the characters either side of it are not letters, digits or `_`
    in any script (`whole_word_spans`), so "no" is never cut out of "not" nor "1.5" out of "21.50", and a later
    value is never found inside an earlier one's slot."""
    pieces: list[tuple[str | None, str]] = [(None, text)]
    for name, value in values:
        pieces = _split_on(pieces, name, value)
    return pieces


def make_template(arguments: dict[str, Any], observation: str) -> str:
    """The observation with each argument value (longest first) replaced by its slot at token boundaries
    (`slot_pieces`). The text between slots is escaped (`escape_braces`): braces it shows, JSON or a literal
    `{arg.x}`, never read as slots, so `render_template` gives the observation back exactly."""
    pieces = slot_pieces(observation, _flat_values(arguments))
    return "".join(escape_braces(text) if slot is None else f"{{arg.{slot}}}" for slot, text in pieces)


def render_template(template: str, arguments: dict[str, Any]) -> str | None:
    """The observation a template gives from arguments alone; None when any slot is unfilled (an argument without
    a value, a state slot), never text with a slot left in it."""
    return render(template, arguments, {})
