"""The harness's agent route: a brief and a bounded tool loop for a model, ending in a submitted transition.

The model answers each turn with one JSON object, `{"tool": NAME, "args": {...}}`. Tools let it
list and inspect actions, search the worldbook's knowledge, read state, recall episode memory,
read a recorded turn, dry-run a rule, and `submit` the transition (observation, outcome, typed
effects, cited items). When the budget runs out it is told to submit; an answer that never becomes
a valid submission returns None and the harness falls back. Model output is data: it is parsed as
JSON and validated, never executed; citations are checked against the worldbook.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worldsmith.llm.base import LLMError, Message
from worldsmith.llm.budget import PromptBudget, prompt_budget
from worldsmith.llm.structured import extract_json
from worldsmith.sim.base import Audit, action_line
from worldsmith.sim.retrieval import EvidenceScorer
from worldsmith.traces.model import Action
from worldsmith.util.text import clip
from worldsmith.worldbook.engine import check_conditions, get_path, is_missing, render, resolve_path
from worldsmith.worldbook.model import Effect

if TYPE_CHECKING:
    from worldsmith.sim.harness import Harness

__all__ = ["AGENT_SYSTEM", "Submission", "run_agent"]

AGENT_SYSTEM = """You simulate a software environment. An agent sent an action; you must answer with the exact \
observation the real environment would return, and the state changes it causes.
Work with tools. Reply with ONE JSON object per message: {{"tool": "<name>", "args": {{...}}}}.
Tools:
- list_actions {{}}: the actions the environment knows
- inspect_action {{"name": str}}: an action's arguments, observation format, rules and examples
- search {{"query": str}}: recorded transitions and notes that match
- read_state {{"path": str}}: the value at a state path (e.g. "world.contents.desk 1"); "" lists the top level
- recall {{"query": str}}: earlier turns of this episode that match
- read_turn {{"turn_id": str}}: one recorded transition
- dry_run {{"rule_id": str}}: what a rule renders now, and whether its conditions hold
- submit {{"observation": str, "outcome": "success" | "failure:<kind>", "effects": [{{"op": str, "path": str, \
"value": any}}], "cited": [rule ids, turn ids or note ids]}}: your final answer
You have {budget} tool calls before you must submit.

{brief}"""


class Submission(BaseModel):
    """A transition the model submits (validated before the harness looks at it)."""

    model_config = ConfigDict(extra="ignore")

    observation: str = Field(min_length=1)
    outcome: str = "unknown"
    effects: list[Effect] = Field(default_factory=list)
    cited: list[str] = Field(default_factory=list)


# Verbatim, and the cut says so in words: the agent model reads this text and is told plainly it was cut.
_clip = partial(clip, strip=False, marker=" …[truncated]")


def _dump(value: Any, limit: int = 1500) -> str:
    return _clip(orjson.dumps(value, default=str).decode(), limit)


def brief(harness: Harness, action: Action, name: str, arguments: dict[str, Any]) -> str:
    """What the model sees first: the action, the state summary, recent turns, the contract, the rules."""
    book = harness.book
    parts = [f"Action: {action_line(action)} (canonical: {name}, arguments: {_dump(arguments, 300)})"]
    if harness.task:
        parts.append(f"Task of the agent: {_clip(harness.task, 300)}")
    parts.append(f"State: {_dump(harness.state, 1200)}")
    recent = harness.history[-6:]
    if recent or harness.initial_observation:
        lines = [f"(start) {_clip(harness.initial_observation, 300)}"] if len(harness.history) <= 6 else []
        lines += [f"> {action_line(h.action)}\n{_clip(h.observation, 300)}" for h in recent]
        parts.append("Recent turns:\n" + "\n".join(lines))
    if harness.config.knowledge:
        contract = next((c for c in book.contracts if c.action == name), None)
        if contract is not None:
            parts.append(f"Observation format of {name}: {_clip(contract.template, 300)}; "
                         f"examples: {_dump(contract.examples[:2], 600)}")
        rules = [r for r in harness.rules.get(name, [])][:6]
        if rules:
            parts.append("Rules of this action:\n" + "\n".join(
                f"- {r.id} [{r.status.value}] when {_dump([c.model_dump(exclude_none=True) for c in r.conditions], 200)}"
                f" -> {_clip(r.template, 200)}" for r in rules))
        if book.notes:
            parts.append("Notes:\n" + "\n".join(f"- {n.id}: {_clip(n.text, 200)}" for n in book.notes[:6]))
    return _clip("\n\n".join(parts), harness.config.brief_chars)


def _tools(harness: Harness, name: str, arguments: dict[str, Any]) -> dict[str, Callable[[dict[str, Any]], Any]]:
    book = harness.book
    knowledge = harness.config.knowledge
    scorer = EvidenceScorer(book.evidence) if knowledge and book.evidence else None

    def list_actions(_: dict[str, Any]) -> Any:
        return [{"name": a.name, "arguments": [arg.name for arg in a.arguments]} for a in book.action_schema.actions]

    def inspect_action(args: dict[str, Any]) -> Any:
        spec = book.action_schema.get(str(args.get("name", name)))
        if spec is None:
            return {"error": f"no action {args.get('name')!r}"}
        out: dict[str, Any] = {"action": spec.model_dump(exclude_defaults=True)}
        if knowledge:
            out["rules"] = [{"id": r.id, "status": r.status.value, "template": r.template} for r in
                            harness.rules.get(spec.name, [])][:8]
            out["examples"] = [d.model_dump() for d in book.demonstrations if d.action == spec.name][:3]
        return out

    def search(args: dict[str, Any]) -> Any:
        if scorer is None:
            return {"error": "no knowledge to search (schema-only harness)"}
        query = str(args.get("query", ""))
        hits = [hit.to_json() for hit in scorer.search(query, 5)]
        words = set(query.lower().split())
        notes = [n.model_dump() for n in book.notes if words & set(n.text.lower().split())][:3]
        return {"transitions": hits, "notes": notes}

    def read_state(args: dict[str, Any]) -> Any:
        path = str(args.get("path", "")).strip()
        if not path:
            return sorted(harness.state)
        segments = resolve_path(path, arguments) or path.split(".")
        value = get_path(harness.state, segments)
        return {"unknown": path} if is_missing(value) else value

    def recall(args: dict[str, Any]) -> Any:
        words = set(str(args.get("query", "")).lower().split())
        return [{"turn": i, "action": action_line(h.action), "observation": _clip(h.observation, 300)}
                for i, h in enumerate(harness.history) if words & set(action_line(h.action).lower().split())][-5:]

    def read_turn(args: dict[str, Any]) -> Any:
        if not knowledge:
            return {"error": "no recorded turns (schema-only harness)"}
        turn_id = str(args.get("turn_id", ""))
        found = next((e for e in book.evidence if e.turn_id == turn_id), None)
        return found.model_dump() if found else {"error": f"no turn {turn_id!r}"}

    def dry_run(args: dict[str, Any]) -> Any:
        rule = next((r for r in book.rules if r.id == str(args.get("rule_id", ""))), None) if knowledge else None
        if rule is None:
            return {"error": f"no rule {args.get('rule_id')!r}"}
        return {"conditions_hold": check_conditions(rule.conditions, arguments, harness.state),
                "renders": render(rule.template, arguments, harness.state, harness.formats)}

    return {"list_actions": list_actions, "inspect_action": inspect_action, "search": search,
            "read_state": read_state, "recall": recall, "read_turn": read_turn, "dry_run": dry_run}


def _known_items(harness: Harness) -> set[str]:
    book = harness.book
    return {r.id for r in book.rules} | {n.id for n in book.notes} | {e.turn_id for e in book.evidence}


def run_agent(harness: Harness, action: Action, name: str, arguments: dict[str, Any], audit: Audit) -> Submission | None:
    """Run the bounded tool loop; the audit records the route, calls, tokens and tool calls either way.

    Each call's conversation is fitted to the model's context window (`llm.budget`, when the backend says it):
    the oldest tool exchanges are dropped first, never the brief or the action; `Audit.prompt_fit` and a note
    say how many; a conversation that cannot fit is not sent (the harness falls back, saying why)."""
    submission = _tool_loop(harness, action, name, arguments, audit)
    _note_dropped(audit)
    return submission


def _tool_loop(harness: Harness, action: Action, name: str, arguments: dict[str, Any],
               audit: Audit) -> Submission | None:
    assert harness.llm is not None
    budget = harness.config.max_tool_steps
    audit.route = "agent"
    tools = _tools(harness, name, arguments)
    messages: list[Message] = [
        {"role": "system", "content": AGENT_SYSTEM.format(budget=budget, brief=brief(harness, action, name, arguments))},
        {"role": "user", "content": f"Action: {action_line(action)}\nYour first tool call (JSON):"},
    ]
    if budget == 0:  # single-shot: no tools, submit at once
        messages[-1]["content"] = f"Action: {action_line(action)}\nSubmit now (JSON, tool \"submit\"):"
    window = prompt_budget(harness.llm, reply_tokens=harness.config.max_tokens)
    for step in range(budget + 2):  # the budget, then a forced submission and one repair
        if window is not None and not _fit(messages, window, audit):
            fit = audit.prompt_fit or {}
            audit.notes.append(f"agent: the prompt does not fit the model's window ({fit.get('tokens')} tokens > "
                               f"{window.limit} allowed of {window.window}) even with the earlier tool exchanges "
                               "dropped and the brief cut")
            return None
        try:
            [completion, *_] = harness.llm.chat(messages, max_tokens=harness.config.max_tokens, temperature=0.0)
        except LLMError as error:
            audit.notes.append(f"agent: model call failed: {type(error).__name__}: {error}")
            return None
        audit.model_calls += 1
        audit.tokens += completion.total_tokens
        try:
            request = extract_json(completion.text)
        except ValueError:
            request = None
        messages.append({"role": "assistant", "content": _clip(completion.text, 2000)})
        if not isinstance(request, dict) or "tool" not in request:
            reply = "Reply with one JSON object {\"tool\": ..., \"args\": {...}}."
        else:
            tool = str(request.get("tool"))
            given = request.get("args")
            args: dict[str, Any] = given if isinstance(given, dict) else {}
            audit.tool_calls.append({"tool": tool, "args": args})
            if tool == "submit":
                try:
                    submission = Submission.model_validate(args)
                except ValidationError as error:
                    reply = f"submit was invalid: {_clip(str(error), 500)}. Fix it and submit again."
                else:
                    unknown = [c for c in submission.cited if c not in _known_items(harness)]
                    if unknown:
                        audit.notes.append(f"agent cited items the worldbook does not have: {unknown[:5]}")
                    audit.retrieved += [{"cited": c} for c in submission.cited if c not in unknown]
                    return submission
            elif tool in tools:
                reply = _dump(tools[tool](args), 2000)
            else:
                reply = f"no tool {tool!r}; tools: {', '.join([*tools, 'submit'])}"
        if step >= budget - 1:
            reply += "\nThe budget is spent: submit now."
        messages.append({"role": "user", "content": reply})
    audit.notes.append("agent: no valid submission within the budget")
    return None


def _fit(messages: list[Message], window: PromptBudget, audit: Audit) -> bool:
    """Fit the tool loop's conversation to `window` in place: the oldest tool exchanges go first, then the brief's
    end; the action stays. `audit.prompt_fit` keeps the counts across the loop's calls; False if it cannot fit."""
    fit = audit.prompt_fit or {}
    dropped, cut = int(fit.get("exchanges_dropped") or 0), int(fit.get("brief_chars_cut") or 0)
    while len(messages) > 3 and window.count(messages) > window.limit:
        del messages[2:4]
        dropped += 1
    if window.count(messages) > window.limit:
        cut += _shorten_system(messages, lambda: window.count(messages) <= window.limit)
    tokens = window.count(messages)
    audit.prompt_fit = {**window.to_json(), "tokens": tokens, "exchanges_dropped": dropped, "brief_chars_cut": cut,
                        "fits": tokens <= window.limit}
    return tokens <= window.limit


def _shorten_system(messages: list[Message], fits: Callable[[], bool], floor: int = 200) -> int:
    """Cut the system message's end (the brief: task, history, formats, rules, notes) to the longest length that
    `fits`, never under `floor` characters; the characters cut."""
    full = messages[0]["content"]
    low, high = min(floor, len(full)), len(full)
    while low < high:
        middle = (low + high + 1) // 2
        messages[0]["content"] = clip(full, middle)
        if fits():
            low = middle
        else:
            high = middle - 1
    messages[0]["content"] = clip(full, low)
    return len(full) - len(messages[0]["content"])


def _note_dropped(audit: Audit) -> None:
    """Say in the notes what the window made the agent's prompt lose (once, at the end)."""
    fit = audit.prompt_fit or {}
    dropped, cut = fit.get("exchanges_dropped") or 0, fit.get("brief_chars_cut") or 0
    if dropped:
        audit.notes.append(f"agent: {dropped} earlier tool exchange{'s' if dropped != 1 else ''} dropped to fit the "
                           "model's window")
    if cut:
        audit.notes.append(f"agent: the brief's last {cut} characters cut to fit the model's window")
