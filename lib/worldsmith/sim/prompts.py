"""The prompts of the model baselines, and reading the model's reply back as an observation.

All three prompting baselines share one conversation shape (the one the tiny model was trained
on): a system message naming the environment and task, then the history as user = action /
assistant = observation exchanges, then the new action. They differ only in the extra context
the system message carries: nothing (direct), retrieved transitions (trace RAG) or the rendered
worldbook, and the system prompt and tool schemas the log declares (`episode_preamble`). The history is
budgeted by characters, newest steps kept; `fit_simulator_messages` also fits the prompt to the model's
context window (`llm.budget`): it summarises the system prompt and tool schemas first, then cuts the oldest
history and the least useful context, never the current action, and says what it did (`PromptFit`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from worldsmith.llm.base import Message
from worldsmith.llm.budget import PREAMBLE_STEPS, PromptBudget, PromptPreamble
from worldsmith.sim.base import HistoryItem, action_line
from worldsmith.traces.model import Episode
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
    "PREAMBLE_METADATA",
    "episode_preamble",
    "fit_simulator_messages",
    "prefix_before",
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
PREAMBLE_METADATA = "system_prompt"  # where a prefix keeps the log's system prompt when it holds none of its turns



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
              context: str, action: str, preamble: str = "") -> list[Message]:
    system = SIMULATOR_SYSTEM.format(env=env or "unknown", task=(task or "").strip() or "(none given)")
    system += (f"\n\n{preamble}" if preamble else "") + context
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
    system_prompt_chars: int = 0  # the log's system prompt (0: none declared)
    system_prompt_level: str = "full"  # how much of it the prompt shows (`llm.budget.SYSTEM_LEVELS`)
    tools: int = 0  # tool schemas the log declares
    tools_level: str = "full"  # how much of them the prompt shows (`llm.budget.TOOL_LEVELS`)
    preamble_chars: int = 0  # the system prompt and tool schemas as rendered in full
    preamble_chars_shown: int = 0

    @property
    def summarised(self) -> bool:
        """Whether the system prompt or the tool schemas were summarised to fit."""
        return self.preamble_chars_shown < self.preamble_chars

    @property
    def cut(self) -> bool:
        """Whether the window made anything go (the character budget alone does not count)."""
        return bool(self.steps_cut_by_tokens or self.context_cut or self.task_chars_cut or self.summarised)

    def summarised_what(self) -> str:
        """What was summarised, in words ("" when nothing was)."""
        parts = []
        if self.tools and self.tools_level != "full":
            parts.append(f"the {self.tools} tool schemas to " + {"brief": "signatures and first sentences",
                                                                  "names": "their names",
                                                                  "none": "nothing"}[self.tools_level])
        if self.system_prompt_chars and self.system_prompt_level != "full":
            parts.append("the system prompt to " + {"outline": "its first paragraph and headings",
                                                    "first": "its opening sentences",
                                                    "none": "nothing"}[self.system_prompt_level])
        return " and ".join(parts)

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
        if self.summarised:
            what += f"; summarised {self.summarised_what()}"
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
    preamble: PromptPreamble | None = None,
) -> tuple[list[Message], PromptFit]:
    """`simulator_messages`, fitted to `budget`'s tokens, and what was cut.

    The log's system prompt and tool schemas (`preamble`) are summarised first, a step at a time
    (`PromptPreamble.steps`), keeping the whole history: the least summarised that fits is sent. When even the
    most summarised one leaves no room for the history, the oldest history steps go (down to the newest one), then the context's last items
    (the lowest-ranked retrieved transitions, the worldbook's last lines), then the newest step,
    then the task is shortened. The current action is never cut: when even that prompt is too long
    `fits` is False and the caller must not send it. Without a budget only the characters count.
    """
    context = context or PromptContext()
    preamble = preamble or PromptPreamble()
    steps = preamble.steps()
    level = steps[0]
    item_action = clip(action, item_chars)
    exchanges, left = _exchanges(history, history_chars, item_chars)
    initial = clip(initial_observation, min(item_chars, max(left, 200))) if initial_observation.strip() else ""
    by_chars = len(history) - len(exchanges)
    fit = PromptFit(limit=None, window=None, tokens=None, counted=None, steps=len(history),
                    steps_shown=len(exchanges), steps_cut_by_chars=by_chars, steps_cut_by_tokens=0,
                    context_unit=context.unit, context_items=len(context.items),
                    system_prompt_chars=len(preamble.system_prompt.strip()), tools=len(preamble.tools),
                    preamble_chars=len(preamble.render()))
    fit.preamble_chars_shown = fit.preamble_chars

    def build(shown: int, kept: int, task_text: str | None) -> list[Message]:
        chosen = exchanges[len(exchanges) - shown:] if shown else []
        return _assemble(env=env, task=task_text, initial=initial, exchanges=chosen,
                         omitted=len(history) - len(chosen), context=context.render(kept), action=item_action,
                         preamble=preamble.render(*level))

    if budget is None:
        return build(len(exchanges), len(context.items), task), fit
    fit.limit, fit.window, fit.counted = budget.limit, budget.window, budget.counted

    def fits(shown: int, kept: int, task_text: str | None) -> bool:
        return budget.count(build(shown, kept, task_text)) <= budget.limit

    # 0. the system prompt and tool schemas, summarised a step at a time, the whole history kept; when none fits,
    # the most summarised that still shows something stays while the history goes (dropped only before the task)
    showing = [step for step in steps if step != PREAMBLE_STEPS[-1]] or steps
    for step in showing:
        level = step
        if fits(len(exchanges), len(context.items), task):
            break

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
    else:  # 3. the newest step, the system prompt and tool schemas, 4. the task
        kept = 0
        shown = newest if fits(newest, 0, task_text) else 0
        if not fits(shown, kept, task_text):
            level = steps[-1]
            shown = newest if fits(newest, 0, task_text) else 0
        stripped = (task or "").strip()
        for length in (300, 100, 0):
            if len(stripped) > length and not fits(shown, kept, task_text):
                task_text = clip(stripped, length) if length else None
        fit.task_chars_cut = max(0, len(stripped) - len((task_text or "").strip()))
    # a level says how much was shown of what the log declares: nothing declared, nothing summarised
    fit.system_prompt_level = level[0] if fit.system_prompt_chars else "full"
    fit.tools_level = level[1] if fit.tools else "full"
    fit.preamble_chars_shown = len(preamble.render(*level))
    messages = build(shown, kept, task_text)
    fit.tokens = budget.count(messages)
    fit.fits = fit.tokens <= budget.limit
    fit.steps_shown = shown
    fit.steps_cut_by_tokens = len(exchanges) - shown
    fit.context_cut = len(context.items) - kept
    return messages, fit


def _declared_system(episode: Episode) -> str:
    """The log's first system message: a turn's context (an OpenAI conversation puts it before the first call)."""
    events = [event for turn in episode.turns for event in turn.context] + list(episode.final_context)
    return next((event.content for event in events if event.role == "system" and event.content.strip()), "")


def episode_preamble(episode: Episode) -> PromptPreamble:
    """The system prompt and tool schemas an episode's log declares: its first system message (a turn's context,
    else what `prefix_before` kept in `metadata['system_prompt']`) and the OpenAI `tools` (or legacy `functions`)
    its metadata keeps; empty when it declares neither."""
    kept = episode.metadata.get(PREAMBLE_METADATA)
    system = _declared_system(episode) or (kept if isinstance(kept, str) else "")
    tools: list[dict[str, Any]] = []
    for key in ("tools", "functions"):
        declared = episode.metadata.get(key)
        tools += [tool for tool in declared if isinstance(tool, dict)] if isinstance(declared, list) else []
    return PromptPreamble(system_prompt=system, tools=tuple(tools))


def prefix_before(episode: Episode, turn: int) -> Episode:
    """The episode cut to its turns before `turn` (what a world model starts on to predict it), still declaring the
    log's system prompt: that lives in the first turn's context, so a prefix of no turns (turn 0, every open-loop
    start) would lose it and a model's first prompt would carry none of it while later ones carry it."""
    system = _declared_system(episode)
    metadata = {**episode.metadata, PREAMBLE_METADATA: system} if system else episode.metadata
    return episode.model_copy(update={"turns": episode.turns[:turn], "metadata": metadata})


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

