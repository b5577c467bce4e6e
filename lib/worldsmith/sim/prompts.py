"""The prompts of the model baselines, and reading the model's reply back as an observation.

All three prompting baselines share one conversation shape (the one the tiny model was trained
on): a system message naming the environment and task, then the history as user = action /
assistant = observation exchanges, then the new action. They differ only in the extra context
the system message carries: nothing (direct), retrieved transitions (trace RAG) or the rendered
worldbook. The history is budgeted by characters, newest steps kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from worldsmith.llm.base import Message
from worldsmith.sim.base import HistoryItem, action_line
from worldsmith.util.text import clip
from worldsmith.worldbook.model import Condition, Effect, Worldbook

__all__ = [
    "BOOK_SECTION",
    "OMITTED_NOTE",
    "RAG_SECTION",
    "SIMULATOR_SYSTEM",
    "START",
    "parse_observation",
    "render_worldbook",
    "simulator_messages",
]

SIMULATOR_SYSTEM = (
    "You are the text environment {env}.\nThe agent's task: {task}\n"
    "Each user message is the agent's action; reply with exactly what the environment shows: "
    "the observation text only, verbatim, with no commentary."
)
RAG_SECTION = (
    "\n\nRecorded transitions of this environment that resemble the next action "
    "(the action after '>', then what the environment answered):\n{examples}"
)
BOOK_SECTION = (
    "\n\nWhat is known about this environment (its worldbook). Where a rule fits the action, answer with its "
    "template, {{arg.NAME}} replaced by the action's argument:\n{book}"
)
OMITTED_NOTE = "\n\n({count} earlier steps are not shown.)"
START = "(start)"  # the user message that asks for the opening observation



def simulator_messages(
    *,
    env: str | None,
    task: str | None,
    initial_observation: str,
    history: Sequence[HistoryItem],
    action: str,
    context: str = "",
    history_chars: int = 6000,
    item_chars: int = 1500,
) -> list[Message]:
    """The conversation for one prediction; the oldest steps go first when `history_chars` runs out."""
    exchanges: list[tuple[str, str]] = []
    budget = history_chars
    for item in reversed(history):
        pair = (clip(action_line(item.action), item_chars), clip(item.observation or "(nothing)", item_chars))
        cost = len(pair[0]) + len(pair[1])
        if cost > budget:
            break
        exchanges.append(pair)
        budget -= cost
    exchanges.reverse()
    omitted = len(history) - len(exchanges)
    system = SIMULATOR_SYSTEM.format(env=env or "unknown", task=(task or "").strip() or "(none given)") + context
    if omitted:
        system += OMITTED_NOTE.format(count=omitted)
    messages: list[Message] = [{"role": "system", "content": system}]
    if initial_observation.strip() and not omitted:
        messages += [{"role": "user", "content": START},
                     {"role": "assistant", "content": clip(initial_observation, min(item_chars, max(budget, 200)))}]
    for action_text, observation in exchanges:
        messages += [{"role": "user", "content": action_text}, {"role": "assistant", "content": observation}]
    messages.append({"role": "user", "content": clip(action, item_chars)})
    return messages


_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\n(.*?)\n?```", re.DOTALL)
_ROLE_PREFIX = re.compile(r"^(observation|environment|env|assistant|output|result|obs)\s*:\s*", re.IGNORECASE)
_CHATML = re.compile(r"<\|im_(start|end)\|>")
_NEXT_TURN = re.compile(r"^(> |action\s*:|user\s*:|agent\s*:)", re.IGNORECASE)
_QUOTES = (('"', '"'), ("'", "'"), ("“", "”"))


def parse_observation(text: str) -> str:
    """The observation in a model's reply: fences, role prefixes, quotes and any next turn it wrote stripped."""
    text = _CHATML.split(text, maxsplit=1)[0].strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    while (prefixed := _ROLE_PREFIX.match(text)) is not None:
        text = text[prefixed.end():].lstrip()
    lines = text.splitlines()
    for position, line in enumerate(lines[1:], 1):  # the model went on to play the agent too
        if _NEXT_TURN.match(line.strip()):
            lines = lines[:position]
            break
    text = "\n".join(lines).strip()
    for opening, closing in _QUOTES:
        if len(text) >= 2 and text.startswith(opening) and text.endswith(closing) and opening not in text[1:-1]:
            text = text[1:-1].strip()
    return text


def _condition(condition: Condition) -> str:
    subject = condition.path if condition.path is not None else f"arg.{condition.arg}"
    return f"{subject} {condition.op}" + ("" if condition.value is None else f" {condition.value!r}")


def _effect(effect: Effect) -> str:
    return f"{effect.op} {effect.path}" + ("" if effect.value is None else f" = {effect.value!r}")


def _action_lines(book: Worldbook) -> list[str]:
    lines = []
    for spec in book.action_schema.actions:
        arguments = ", ".join(a.name + ("" if a.required else "?") for a in spec.arguments)
        line = f"- {spec.name}({arguments})"
        if spec.aliases:
            line += f" aka {', '.join(spec.aliases)}"
        if spec.examples:
            line += f"; e.g. {' | '.join(spec.examples[:3])}"
        lines.append(line)
    return lines


def render_worldbook(book: Worldbook, *, max_chars: int = 8000, include_tentative: bool = False) -> str:
    """The worldbook as prompt text: actions, rules by action and priority, notes, contracts.

    Supported rules only unless `include_tentative` (or none is supported); cut at a line when
    `max_chars` is reached, with a last line saying how much was left out.
    """
    rules = book.supported_rules()
    if include_tentative or not rules:
        rules = [r for r in book.rules if r.status.value in ("supported", "tentative")]
    lines: list[str] = [f"Environment: {book.env_id or book.name}"]
    actions = _action_lines(book)
    if actions:
        lines += ["Actions:", *actions]
    if rules:
        lines.append("Rules (action: when conditions -> observation template [outcome; effects]):")
        for rule in sorted(rules, key=lambda r: (r.action, -r.priority, -r.support, r.id)):
            when = f" when {' and '.join(_condition(c) for c in rule.conditions)}" if rule.conditions else ""
            effects = f"; {', '.join(_effect(e) for e in rule.effects)}" if rule.effects else ""
            status = "" if rule.executable else " (tentative)"
            lines.append(f"- {rule.action}{when} -> {rule.template!r} [{rule.outcome}{effects}]{status}")
    if book.notes:
        lines += ["Notes:", *(f"- ({note.kind}) {note.text}" for note in book.notes)]
    if book.contracts:
        lines += ["Observation formats:", *(f"- {c.action}: {c.template or ', '.join(c.required_fields)}"
                                            for c in book.contracts)]
    out: list[str] = []
    used = 0
    for position, line in enumerate(lines):
        if used + len(line) + 1 > max_chars:
            out.append(f"({len(lines) - position} more lines left out)")
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)

