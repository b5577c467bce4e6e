"""Scripted agent transcripts of toolshop tasks, as OpenAI chat conversations (what a real agent log looks like).

One conversation per task: a system prompt (the shop's policy), the customer's message, then for
each expert call an `assistant` message with a `tool_calls` entry (sometimes with a short remark in
`content`, as agents do; two reads that need nothing from each other are sometimes sent together
in one message) and the `tool` message answering it (`tool_call_id`, the tool's real answer from
the environment), and the agent's reply. Before some writes the agent asks the customer to
confirm and they do; some customers say thanks at the end and get a last word. A share of conversations (`toolless_rate`) have no tool call at all: the customer
asks about the shop's policies and the agent answers from the system prompt. The result is what
`worldsmith ingest` reads as the `openai` format; the tool definitions sit under `tools`.
"""

from __future__ import annotations

import random
from typing import Any

import orjson

from worldsmith.envs.policies import ExpertPolicy
from worldsmith.envs.recorder import record_episode
from worldsmith.envs.toolshop.env import TASKS_PER_DB, ToolshopEnv
from worldsmith.envs.toolshop.tools import tool_schemas
from worldsmith.traces.model import Turn

__all__ = ["FAQ", "SYSTEM_PROMPT", "conversation", "conversations", "toolless_conversation"]

SYSTEM_PROMPT = (
    "You are the customer-service agent of Toolshop, an online store. Identify the customer first (by email, or "
    "by first name, last name and zip code) and act only on their own account. Only pending orders can be "
    "cancelled or have their shipping address changed; the reason for a cancellation is 'no longer needed' or "
    "'ordered by mistake'. Delivered orders can have items returned (refunded to the original payment method or "
    "a gift card) or exchanged for another variant of the same product. Gift cards can be topped up by card, "
    "between $1 and $500 at a time. Refunds to cards take 5 to 7 business days; to gift cards they are immediate. "
    "We ship within the USA only. Use the tools; never invent ids, prices or balances."
)
# (questions a customer may ask, the answer the policy gives)
FAQ: tuple[tuple[tuple[str, ...], str], ...] = (
    (("How long do refunds take?", "When will I see my refund on my card?"),
     "Refunds to a card take 5 to 7 business days after we process them; refunds to a gift card are immediate."),
    (("Do you ship to Canada?", "Can I get an order delivered abroad?"),
     "I'm sorry, we currently ship within the USA only."),
    (("Can I cancel an order that has already shipped?", "My order is on its way, can I still cancel it?"),
     "Only pending orders can be cancelled. Once an order is delivered you can return its items instead."),
    (("What's the most I can put on a gift card at once?", "Is there a limit on gift card top-ups?"),
     "You can top up a gift card by $1 to $500 at a time, paid by card."),
    (("Can I exchange shoes for a different size?", "Do you do exchanges?"),
     "Yes: items of a delivered order can be exchanged for another variant of the same product, such as another "
     "size or color; any price difference is charged or refunded."),
    (("What do I need to give you so you can find my account?", "How do you look up my account?"),
     "Your email address is enough, or your first name, last name and zip code."),
)
CONFIRM_RATE = 0.3  # writes the agent confirms with the customer first
_REMARKS = ("Let me look that up.", "One moment, please.", "I'll check that for you.", "Sure, let me see.")
_THANKS = (("Thanks a lot!", "You're welcome! Is there anything else I can help you with?"),
           ("Great, thank you.", "Happy to help. Have a nice day!"))


def _values(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [text for item in value.values() for text in _values(item)]
    if isinstance(value, list):
        return [text for item in value for text in _values(item)]
    return [str(value)]


def _parallel(first: Turn, second: Turn, known: str) -> bool:
    """Whether an agent could have sent both reads at once: the second needs nothing the first answered."""
    if first.info.get("write") or second.info.get("write"):
        return False
    return all(value in known or value not in first.observation.text for value in _values(second.action.arguments))


def _arguments_words(arguments: Any) -> str:
    if not isinstance(arguments, dict):
        return str(arguments)
    return ", ".join(f"{key}={value!r}" for key, value in arguments.items())


def _call_id(rng: random.Random) -> str:
    return "call_" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(24))


def conversation(env: ToolshopEnv, task: str, *, seed: int = 0) -> dict[str, Any]:
    """The expert's episode of `task` as an agent transcript (tool results are the environment's real answers)."""
    rng = random.Random(f"toolshop-conversation|{seed}|{task}")
    episode = record_episode(env, ExpertPolicy(), task, max_steps=40, record_state=False)
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT},
                                      {"role": "user", "content": episode.task or ""}]
    known = episode.task or ""  # what the agent had read before the current call
    turns = list(episode.turns)
    while turns:
        group = [turns.pop(0)]
        if turns and _parallel(group[0], turns[0], known) and rng.random() < 0.5:
            group.append(turns.pop(0))
        if group[0].info.get("write") and rng.random() < CONFIRM_RATE:
            messages += [{"role": "assistant", "content": f"To confirm, I will call {group[0].action.name} with "
                                                         f"{_arguments_words(group[0].action.arguments)}. Shall I go ahead?"},
                         {"role": "user", "content": rng.choice(("Yes, please.", "Yes, go ahead.", "Correct, do it."))}]
        calls = [{"id": _call_id(rng), "type": "function", "function": {
            "name": turn.action.name, "arguments": orjson.dumps(turn.action.arguments).decode()}} for turn in group]
        messages.append({"role": "assistant", "content": rng.choice(_REMARKS) if rng.random() < 0.25 else None,
                         "tool_calls": calls})
        for call, turn in zip(calls, group, strict=True):
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": turn.observation.text})
            known += "\n" + turn.observation.text
    reply = next((event.content for event in reversed(episode.final_context) if event.role == "assistant"), "")
    messages.append({"role": "assistant", "content": reply})
    if rng.random() < 0.3:
        thanks, answer = rng.choice(_THANKS)
        messages += [{"role": "user", "content": thanks}, {"role": "assistant", "content": answer}]
    return {"id": f"toolshop-conv-{task}", "task_id": task, "env_id": "toolshop", "reward": episode.reward,
            "success": episode.success, "metadata": {"source": "worldsmith toolshop expert transcript", "seed": seed,
                                                     "goals": episode.initial_info.get("goals")},
            "tools": tool_schemas(), "messages": messages}


def toolless_conversation(number: int, *, seed: int = 0) -> dict[str, Any]:
    """A conversation with no tool call: a policy question answered from the system prompt."""
    rng = random.Random(f"toolshop-faq|{seed}|{number}")
    questions, answer = rng.choice(FAQ)
    greeting = rng.choice(("", "Hi! ", "Hello, quick question. "))
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": greeting + rng.choice(questions)},
                {"role": "assistant", "content": answer}]
    if rng.random() < 0.5:
        thanks, last = rng.choice(_THANKS)
        messages += [{"role": "user", "content": thanks}, {"role": "assistant", "content": last}]
    return {"id": f"toolshop-conv-faq-{seed}-{number}", "env_id": "toolshop", "reward": None, "success": None,
            "metadata": {"source": "worldsmith toolshop scripted FAQ", "seed": seed, "tool_calls": 0},
            "tools": tool_schemas(), "messages": messages}


def conversations(count: int, *, db: int = 0, seed: int = 0, toolless_rate: float = 0.1) -> list[dict[str, Any]]:
    """`count` transcripts of distinct tasks of database `db`, `round(count * toolless_rate)` of them tool-less."""
    if count < 0 or not 0 <= toolless_rate <= 1:
        raise ValueError("count must be >= 0 and toolless_rate within [0, 1]")
    rng = random.Random(f"toolshop-conversations|{seed}|{db}")
    toolless = set(rng.sample(range(count), round(count * toolless_rate)))
    tasks = iter(rng.sample(range(TASKS_PER_DB), count))
    env = ToolshopEnv(dbs=[db])
    out = []
    for position in range(count):
        index = next(tasks)
        if position in toolless:
            out.append(toolless_conversation(position, seed=seed))
        else:
            out.append(conversation(env, f"db={db}:task={index}", seed=seed))
    env.close()
    return out
