"""The prompts of the model baselines, and reading the model's reply back as an observation.

All three prompting baselines share one conversation shape (the one the tiny model was trained
on): a system message naming the environment and task, then the history as user = action /
assistant = observation exchanges, then the new action. They differ only in the extra context
the system message carries: nothing (direct), retrieved transitions (trace RAG) or the rendered
worldbook. The history is budgeted by characters, newest steps kept; `fit_simulator_messages`
also fits the prompt to the model's context window (`llm.budget`), cutting the oldest history and
the least useful context first and never the current action, and says what it cut (`PromptFit`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from worldsmith.llm.base import Message
from worldsmith.llm.budget import PromptBudget
from worldsmith.sim.base import HistoryItem, action_line
from worldsmith.util.text import clip
from worldsmith.worldbook.model import Condition, Effect, Worldbook

__all__ = [
    "BOOK_SECTION",
    "OMITTED_NOTE",
    "RAG_SECTION",
    "SIMULATOR_SYSTEM",
    "START",
    "PromptContext",
    "PromptFit",
    "fit_simulator_messages",
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



def _exchanges(history: Sequence[HistoryItem], history_chars: int, item_chars: int) -> tuple[list[tuple[str, str]], int]:
    """The newest steps whose characters fit `history_chars`, oldest first, and the characters left."""
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
    return exchanges, budget


def _assemble(*, env: str | None, task: str | None, initial: str, exchanges: Sequence[tuple[str, str]], omitted: int,
              context: str, action: str) -> list[Message]:
    system = SIMULATOR_SYSTEM.format(env=env or "unknown", task=(task or "").strip() or "(none given)") + context
    if omitted:
        system += OMITTED_NOTE.format(count=omitted)
    messages: list[Message] = [{"role": "system", "content": system}]
    if initial and not omitted:
        messages += [{"role": "user", "content": START}, {"role": "assistant", "content": initial}]
    for action_text, observation in exchanges:
        messages += [{"role": "user", "content": action_text}, {"role": "assistant", "content": observation}]
    messages.append({"role": "user", "content": action})
    return messages


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
    exchanges, left = _exchanges(history, history_chars, item_chars)
    initial = clip(initial_observation, min(item_chars, max(left, 200))) if initial_observation.strip() else ""
    return _assemble(env=env, task=task, initial=initial, exchanges=exchanges, omitted=len(history) - len(exchanges),
                     context=context, action=clip(action, item_chars))


@dataclass(frozen=True)
class PromptContext:
    """Extra system-message text made of items, most useful first: a token budget drops them from the end.

    `template` holds `{items}` (the kept items joined by `joiner`); `left_out`, with `{count}`, is
    appended when items were dropped; `unit` names the items in the audit ("retrieved transitions").
    """

    template: str = "{items}"
    items: tuple[str, ...] = ()
    joiner: str = "\n\n"
    unit: str = "items"
    left_out: str = ""

    def render(self, kept: int | None = None) -> str:
        """The section with the first `kept` items (all when None); "" when none is kept."""
        shown = self.items if kept is None else self.items[:kept]
        if not shown:
            return ""
        text = self.joiner.join(shown)
        dropped = len(self.items) - len(shown)
        if dropped and self.left_out:
            text += self.joiner + self.left_out.format(count=dropped)
        return self.template.format(items=text)


@dataclass
class PromptFit:
    """What fitting one prompt to the model's context window kept and cut (the prediction's audit holds it)."""

    limit: int | None  # the prompt tokens allowed (window minus the reply's room); None: no window known
    window: int | None
    tokens: int | None  # the prompt's tokens as sent (None without a budget)
    counted: str | None  # "tokenizer" or "estimate"
    steps: int  # history steps the model could have seen
    steps_shown: int
    steps_cut_by_chars: int  # oldest steps over the character budget (`history_chars`)
    steps_cut_by_tokens: int  # further oldest steps cut to fit the window
    context_unit: str = "items"
    context_items: int = 0
    context_cut: int = 0  # context items (the lowest ranked, or the last worldbook lines) cut to fit
    task_chars_cut: int = 0
    fits: bool = True

    @property
    def cut(self) -> bool:
        """Whether the window made anything go (the character budget alone does not count)."""
        return bool(self.steps_cut_by_tokens or self.context_cut or self.task_chars_cut)

    def summary(self) -> str:
        """One sentence for the audit notes."""
        if self.limit is None:
            return f"no context window known: {self.steps_shown} of {self.steps} steps shown (character budget)"
        parts = []
        if self.steps_cut_by_tokens or self.steps_cut_by_chars:
            parts.append(f"the oldest {self.steps - self.steps_shown} of {self.steps} history steps")
        if self.context_cut:
            parts.append(f"{self.context_cut} of {self.context_items} {self.context_unit}")
        if self.task_chars_cut:
            parts.append(f"{self.task_chars_cut} characters of the task")
        what = ", ".join(parts) if parts else "nothing"
        if not self.fits:
            return (f"the prompt does not fit the model's window ({self.tokens} tokens > {self.limit} allowed of "
                    f"{self.window}) even with {what} cut; the current action is never cut")
        return f"prompt fitted to {self.tokens} of {self.limit} tokens allowed (window {self.window}): cut {what}"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["cut"] = self.cut
        return out


def fit_simulator_messages(
    *,
    env: str | None,
    task: str | None,
    initial_observation: str,
    history: Sequence[HistoryItem],
    action: str,
    context: PromptContext | None = None,
    history_chars: int = 6000,
    item_chars: int = 1500,
    budget: PromptBudget | None = None,
) -> tuple[list[Message], PromptFit]:
    """`simulator_messages`, fitted to `budget`'s tokens, and what was cut.

    First the oldest history steps go (down to the newest one), then the context's last items
    (the lowest-ranked retrieved transitions, the worldbook's last lines), then the newest step,
    then the task is shortened. The current action is never cut: when even that prompt is too long
    `fits` is False and the caller must not send it. Without a budget only the characters count.
    """
    context = context or PromptContext()
    item_action = clip(action, item_chars)
    exchanges, left = _exchanges(history, history_chars, item_chars)
    initial = clip(initial_observation, min(item_chars, max(left, 200))) if initial_observation.strip() else ""
    by_chars = len(history) - len(exchanges)
    fit = PromptFit(limit=None, window=None, tokens=None, counted=None, steps=len(history),
                    steps_shown=len(exchanges), steps_cut_by_chars=by_chars, steps_cut_by_tokens=0,
                    context_unit=context.unit, context_items=len(context.items))

    def build(shown: int, kept: int, task_text: str | None) -> list[Message]:
        chosen = exchanges[len(exchanges) - shown:] if shown else []
        return _assemble(env=env, task=task_text, initial=initial, exchanges=chosen,
                         omitted=len(history) - len(chosen), context=context.render(kept), action=item_action)

    if budget is None:
        return build(len(exchanges), len(context.items), task), fit
    fit.limit, fit.window, fit.counted = budget.limit, budget.window, budget.counted

    def fits(shown: int, kept: int, task_text: str | None) -> bool:
        return budget.count(build(shown, kept, task_text)) <= budget.limit

    def most(low: int, high: int, ok: Callable[[int], bool]) -> int:
        """The largest n in [low, high] with ok(n), ok(low) assumed; by bisection (fewer tokenizer calls)."""
        while low < high:
            middle = (low + high + 1) // 2
            if ok(middle):
                low = middle
            else:
                high = middle - 1
        return low

    shown, kept, task_text = len(exchanges), len(context.items), task
    newest = min(1, shown)
    if fits(shown, kept, task_text):
        pass
    elif fits(newest, kept, task_text):  # 1. the oldest steps, down to the newest one
        shown = most(newest, shown, lambda n: fits(n, kept, task_text))
    elif fits(newest, 0, task_text):  # 2. the context's last items
        shown = newest
        kept = most(0, kept, lambda n: fits(shown, n, task_text))
    else:  # 3. the newest step, 4. the task
        kept = 0
        shown = newest if fits(newest, 0, task_text) else 0
        stripped = (task or "").strip()
        for length in (300, 100, 0):
            if len(stripped) > length and not fits(shown, kept, task_text):
                task_text = clip(stripped, length) if length else None
        fit.task_chars_cut = max(0, len(stripped) - len((task_text or "").strip()))
    messages = build(shown, kept, task_text)
    fit.tokens = budget.count(messages)
    fit.fits = fit.tokens <= budget.limit
    fit.steps_shown = shown
    fit.steps_cut_by_tokens = len(exchanges) - shown
    fit.context_cut = len(context.items) - kept
    return messages, fit


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

