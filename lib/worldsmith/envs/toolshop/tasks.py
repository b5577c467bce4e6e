"""Toolshop tasks: customer goals drawn from a database, their gold outcome, and the expert's next call.

A task is a customer who says who they are (an email, or name and zip) and asks for one or two
things (the kinds of `goals.GOAL_KINDS`: cancel a pending order, ship it elsewhere, move house,
return or exchange delivered items, buy something, topping up a gift card when it falls short,
top up, add or remove a card, open or close a support ticket, or just ask: an order's status, a
tracking number, a gift card's balance).

Task `i` of database `d` is the `i`-th distinct goal of a seeded stream of draws over that
database (`TaskBook`), so ids are stable and no two tasks of one database ask the same thing. The
gold outcome is the gold calls run on a fresh `Store`; a task is won when the episode's changed
records equal the gold ones and the reply contains every answer asked for.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from typing import Any

import orjson

from worldsmith.envs.base import TaskLoadError
from worldsmith.envs.toolshop.db import KINDS, BaseDB, Store, base_db
from worldsmith.envs.toolshop.expert import Failed, Memory, Need, Seen, find_user
from worldsmith.envs.toolshop.goals import GOAL_KINDS, Goal
from worldsmith.envs.toolshop.tools import is_error_text, run_tool
from worldsmith.traces.model import Action

__all__ = ["RESPOND", "Task", "TaskBook", "TaskSpec", "check", "draw", "expert_action", "resolve", "task_book"]

RESPOND = "respond"
# Second goals that cannot interfere with any first goal (no shared order line, method or ticket subject).
SECOND_KINDS = ("user_address", "add_card", "close_ticket", "open_ticket", "order_status", "tracking", "gift_balance")
_AFTER_BUY = ("user_address", "add_card", "close_ticket", "gift_balance")  # a new order could repeat a product
SECOND_GOAL_RATE = 0.35
EMAIL_RATE = 0.6


@dataclass(frozen=True)
class TaskSpec:
    db: int
    user_id: str
    ident: dict[str, str]  # {"by": "email", "email": ...} or {"by": "name_zip", first_name, last_name, zip}
    goals: tuple[Goal, ...]
    text: str

    def signature(self) -> bytes:
        return orjson.dumps([self.user_id, self.ident, [[g.kind, g.said] for g in self.goals]],
                            option=orjson.OPT_SORT_KEYS)


@dataclass
class Task:
    """A task ready to play: its spec, the gold records (by kind and id) and the answers its reply must hold."""

    spec: TaskSpec
    gold: dict[str, dict[str, dict[str, Any]]]
    answers: list[str]
    gold_calls: list[tuple[str, dict[str, Any]]]


def _intro(user: dict[str, Any], ident: dict[str, str], rng: random.Random) -> str:
    if ident["by"] == "email":
        return rng.choice(("Hi, my email is {e}.", "Hello! This is {f}, email {e}.")).format(
            e=ident["email"], f=user["name"]["first"])
    return rng.choice(("Hi, I'm {f} {l}, zip code {z}.", "Hello, {f} {l} here (zip {z}).")).format(
        f=ident["first_name"], l=ident["last_name"], z=ident["zip"])


def draw(db: BaseDB, number: int) -> TaskSpec | None:
    """The `number`-th draw of the database's task stream (None when the drawn customer cannot do the drawn goal)."""
    rng = random.Random(f"toolshop-task|{db.seed}|{number}")
    user = db.users[rng.choice(db.user_ids)]
    kinds = list(GOAL_KINDS)
    first = GOAL_KINDS[rng.choices(kinds, weights=[GOAL_KINDS[k].weight for k in kinds])[0]].draw(db, user, rng)
    if first is None:
        return None
    goals = [first]
    if rng.random() < SECOND_GOAL_RATE:
        options = [k for k in (_AFTER_BUY if first.kind == "buy" else SECOND_KINDS)
                   if k != first.kind and {k, first.kind} != {"open_ticket", "close_ticket"}]
        second = GOAL_KINDS[rng.choice(options)].draw(db, user, rng)
        if second is not None:
            goals.append(second)
    if rng.random() < EMAIL_RATE:
        ident = {"by": "email", "email": user["email"]}
    else:
        ident = {"by": "name_zip", "first_name": user["name"]["first"], "last_name": user["name"]["last"],
                 "zip": user["address"]["zip"]}
    words = [GOAL_KINDS[goal.kind].words(goal.said, rng) for goal in goals]
    if len(words) == 2:
        words[1] = rng.choice(("Also: ", "And one more thing. ", "")) + words[1]
    return TaskSpec(db.seed, user["user_id"], ident, tuple(goals), " ".join([_intro(user, ident, rng), *words]))


class TaskBook:
    """The distinct tasks of one database, drawn lazily in order (task `i` never changes)."""

    def __init__(self, db: BaseDB) -> None:
        self.db = db
        self._draws: list[int] = []  # the draw number of each task
        self._seen: set[bytes] = set()
        self._next = 0

    def spec(self, index: int) -> TaskSpec:
        while len(self._draws) <= index:
            number, self._next = self._next, self._next + 1
            drawn = draw(self.db, number)
            signature = drawn.signature() if drawn is not None else None
            if signature is not None and signature not in self._seen:
                self._seen.add(signature)
                self._draws.append(number)
        found = draw(self.db, self._draws[index])
        assert found is not None
        return found


@functools.cache
def task_book(db: int) -> TaskBook:
    return TaskBook(base_db(db))


# --------------------------------------------------------------------------------------------
# Gold outcome and the checker
# --------------------------------------------------------------------------------------------


def resolve(spec: TaskSpec) -> Task:
    """Run the gold calls of `spec` on a fresh store: the records they change and the answers asked for."""
    store = Store(base_db(spec.db))
    calls: list[tuple[str, dict[str, Any]]] = []
    for goal in spec.goals:
        for name, arguments in GOAL_KINDS[goal.kind].gold_calls(goal, spec.user_id, store):
            text = run_tool(store, name, arguments)
            if is_error_text(text):
                raise TaskLoadError(f"toolshop task of db {spec.db} ({spec.text!r}): gold call {name}({arguments}) "
                                    f"failed: {text}")
            calls.append((name, arguments))
    answers = [GOAL_KINDS[goal.kind].answer(goal, spec.user_id, store) for goal in spec.goals]
    return Task(spec, store.snapshot(), [answer for answer in answers if answer is not None], calls)


def check(task: Task, store: Store, reply: str) -> dict[str, Any]:
    """Whether the episode reached the gold outcome: the same changed records, every answer in the reply."""
    wrong: list[str] = []
    for kind in KINDS:
        keys = set(task.gold.get(kind, {})) | set(store.changed[kind])
        for key in sorted(keys):
            expected = task.gold.get(kind, {}).get(key) or store.base.table(kind).get(key)
            if store.get(kind, key) != expected:
                wrong.append(f"{kind}/{key}")
    missing = [answer for answer in task.answers if answer not in reply]
    return {"won": not wrong and not missing, "wrong_records": wrong, "missing_answers": missing}


def expert_action(spec: TaskSpec, calls: list[Seen]) -> Action:
    """The expert's next call for `spec` given the episode's calls so far; `respond` once every goal is played."""
    memory = Memory(calls)
    lines = []
    try:
        user_id = find_user(memory, spec.ident)
    except Need as need:
        return need.action
    except Failed as failed:
        return Action(name=RESPOND, arguments={"text": f"Sorry, I could not find your account ({failed.text})."})
    for goal in spec.goals:
        try:
            lines.append(GOAL_KINDS[goal.kind].play(goal, memory, user_id))
        except Need as need:
            return need.action
        except Failed as failed:
            lines.append(f"Sorry, I could not do that: {failed.text}.")
    return Action(name=RESPOND, arguments={"text": " ".join(lines)})
