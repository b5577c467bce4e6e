"""The probing policy: exploratory episodes for tool APIs (re-reads after writes, empty queries, failing calls).

A simulator of a tool API must learn what a write changed, what a query finds (and that it may
find nothing) and when a call fails. Expert episodes show little of that: one read, one write,
done. `ProbingPolicy` mixes the expert's calls with probes chosen from the tools' JSON schemas
(the reset info's `tools`, updated when a step's info brings new ones), so it works in any tool
environment (toolshop, BFCL):

- `expert`: the expert's next call; its hand-over (`respond`) waits until `probes_before_respond`
  probes were made since the last hand-over or successful write;
- `reread`: after a write that succeeded, a read tool whose required arguments the write's
  arguments or its answer's fields fill (`cancel_order(order_id)` -> `get_order(order_id)`,
  `place_order(...)` answering `{"order_id": ...}` -> `get_order` of the new order), else a read
  without required arguments (`ls()`), else the latest read again; three times as likely while a
  write waits for it, and the hand-over waits for it;
- `query`: a read or query tool with each argument an existing value (seen in an earlier call's
  arguments or in a JSON or YAML answer under the same key) or a value that exists nowhere (an id of the
  same shape with other digits, `no_such_<word>`, an email at an `.invalid` domain), so empty
  results and not-found errors appear;
- `fail`: a call that must fail: an earlier call with one known value replaced by one that does
  not exist (for a write, only an `*_id` argument: another text could be a valid edit); the latest successful one-shot write again (`cancel`, `close`, `return`, `remove`, ...:
  its precondition no longer holds; writes that create things are never repeated); an earlier
  write with a money-like amount a million times larger; a known tool with its required arguments
  left out.

Reads and writes are told apart by the tool name's words (`get`, `find`, `search`, `list`, ... as
the curious policy does); a step's success by its info's `error` where the environment reports it,
else by the answer's text. Each step draws one component with a seeded RNG (weights are the
constructor's keyword arguments); one with nothing to offer is skipped and the rest renormalised.
The episode ends when the expert has nothing left (or at the caller's step cap).

On BFCL: a hand-over is the expert's `respond` between user turns, so every turn gets its probes;
the tool list grows with held-out functions. Names that are not reads (`cd`, `mkdir`, `post_tweet`)
count as writes, so `cd` is followed by `ls()` or `pwd()`; BFCL's answers name files under keys such
as `current_directory_content` that match no parameter, so existing values come mostly from earlier
calls' arguments, and missing ones (`no_such_quux`) give `No such file or directory` answers. A one-
shot write again (`mv`, `rm`, `rmdir`) fails; most BFCL writes are not one-shot and are not repeated.
"""

from __future__ import annotations

import random
import re
from typing import Any

import orjson

from worldsmith.envs.base import Env, as_action
from worldsmith.envs.policies import (  # the curious policy's call vocabulary and choice order
    _CALL_READS,
    _call,
    _name_words,
    draw_candidates,
    weighted_order,
)
from worldsmith.traces.model import Action, Observation
from worldsmith.util.errors import BadInputError

__all__ = ["ProbingPolicy"]

HANDOVER = "respond"
# Writes whose precondition a success ends, so the same call again must fail.
_ONE_SHOT = frozenset({"cancel", "close", "return", "exchange", "remove", "delete", "rm", "rmdir", "mv", "move",
                       "refund", "revoke", "archive", "unsubscribe", "deactivate", "disable", "unfollow", "resolve",
                       "redeem", "release", "void", "withdraw", "unlock", "lock"})
_QUERY_WORDS = frozenset({"find", "search", "list", "query", "filter", "lookup", "by"})
_MONEY = re.compile(r"amount|price|balance|fund|total|payment|cost|quantity|shares|value", re.IGNORECASE)
_ID_KEY = re.compile(r"(^|_)ids?$", re.IGNORECASE)  # a write with another id fails; with another text it may not
_WORDS = ("unicorn", "zorkmid", "quux", "nowhere")
_POOL_LIMIT = 40


def _is_error(text: str, info: dict[str, Any]) -> bool:
    if isinstance(info.get("error"), bool):
        return bool(info["error"])
    lowered = text.lstrip().lower()
    return lowered.startswith(("error", "{\"error\"", "{'error'")) or "not found" in lowered[:80]


def _scalars(value: Any, key: str | None, out: dict[str, list[Any]]) -> None:
    """Every scalar of a JSON answer under its key (list elements under the list's key)."""
    if isinstance(value, dict):
        for name, item in value.items():
            _scalars(item, str(name), out)
    elif isinstance(value, list):
        for item in value[:50]:
            _scalars(item, key, out)
    elif key is not None and isinstance(value, str | int | float) and not isinstance(value, bool):
        if isinstance(value, str) and not 0 < len(value) <= 80:
            return
        out.setdefault(key, []).append(value)


class ProbingPolicy:
    """Expert calls mixed with re-reads after writes, queries that may find nothing, and calls that must fail."""

    name = "probing"

    def __init__(self, seed: int | None = None, *, expert: float = 0.45, reread: float = 0.2, query: float = 0.15,
                 fail: float = 0.2, probes_before_respond: int = 2) -> None:
        self.weights = {"expert": expert, "reread": reread, "query": query, "fail": fail}
        if any(weight < 0 for weight in self.weights.values()) or not sum(self.weights.values()) > 0:
            raise BadInputError(f"probing policy weights must be >= 0 with a positive sum, not {self.weights}")
        if probes_before_respond < 0:
            raise BadInputError("probes_before_respond must be >= 0")
        self.seed, self.probes_before_respond = seed, probes_before_respond
        self._env: Env | None = None
        self._start("")

    def _start(self, opening: str) -> None:
        self._rng = random.Random(None if self.seed is None else f"{self.seed}|{opening}")
        self._tools: dict[str, dict[str, Any]] = {}
        self._pool: dict[str, list[Any]] = {}
        self._done: list[tuple[Action, bool]] = []  # calls answered so far, with whether they succeeded
        self._last: Action | None = None
        self._pending_write: Action | None = None
        self._written: dict[str, Any] = {}  # the scalar fields of the pending write's answer (a new record's id)
        self._probes = 0
        self._has_expert = True
        self.choices: list[str] = []  # the component behind each action of the episode (for inspection)

    # -- protocol -----------------------------------------------------------------------------

    def reset(self, env: Env, observation: Observation, info: dict[str, Any]) -> None:
        self._env = env
        self._start(f"{info.get('task')}|{observation.text}")
        self._learn_tools(info)

    def act(self, observation: Observation, info: dict[str, Any]) -> Action | None:
        if self._env is None:
            raise RuntimeError("reset() the policy before act()")
        self.observe(observation, info)
        weights = dict(self.weights)
        if self._pending_write is not None and weights.get("reread", 0) > 0:
            weights["reread"] *= 3  # look at what a write changed while it is fresh
        for choice in weighted_order(self._rng, weights):
            action = getattr(self, f"_{choice}")()
            if action is not None:
                return self._took(action, choice)
            if choice == "expert" and self._expert_next() is None:
                return None  # the expert has nothing left
        held = self._expert_next()  # no probe to offer: the expert's hand-over after all
        return self._took(held, "expert") if held is not None else None

    # -- for a policy that mixes these components with its own choices (`sim.exploring`) -------

    PROPOSERS = ("reread", "query", "fail")  # the components `candidates` asks

    def observe(self, observation: Observation, info: dict[str, Any]) -> None:
        """Take in the answer to the last action played (and any new tools): what `act` does first."""
        self._learn_tools(info)
        if self._last is not None:
            self._answered(self._last, observation.text, info)

    def candidates(self, draws: int = 3) -> dict[str, list[Action]]:
        """What each proposing component would offer now, `draws` tries each (distinct calls, in drawn order).

        Draws from this policy's RNG (so a policy asked for candidates plays differently afterwards); tell it what
        was really played with `took` and what it got with `observe`."""
        if self._env is None:
            raise RuntimeError("reset() the policy before candidates()")
        return draw_candidates(lambda component: getattr(self, f"_{component}")(), self.PROPOSERS, draws,
                               lambda action: action.name + orjson.dumps(action.arguments,
                                                                         option=orjson.OPT_SORT_KEYS).decode())

    def took(self, action: Action, choice: str) -> Action:
        """Record `action` as played this step (chosen by `choice`, a component name or a caller's label)."""
        return self._took(action, choice)

    # -- bookkeeping --------------------------------------------------------------------------

    def _learn_tools(self, info: dict[str, Any]) -> None:
        for tool in info.get("tools") or []:
            function = tool.get("function", tool) if isinstance(tool, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                self._tools[function["name"]] = function.get("parameters") or {}

    def _took(self, action: Action, choice: str) -> Action:
        self.choices.append(choice)
        if action.name == HANDOVER:
            self._probes, self._last = 0, None
        else:
            self._probes += choice != "expert"
            self._last = action
        if choice == "reread":
            self._pending_write = None
        return action

    def _answered(self, action: Action, text: str, info: dict[str, Any]) -> None:
        ok = not _is_error(text, info)
        self._done.append((action, ok))
        self._last = None
        if not ok:
            return
        if isinstance(action.arguments, dict):
            for key, value in action.arguments.items():
                _scalars(value, key, self._pool)
        answer = _structured(text)
        if answer is not None:
            _scalars(answer, None, self._pool)
        for key, values in self._pool.items():
            if len(values) > _POOL_LIMIT:
                self._pool[key] = list(dict.fromkeys(values))[-_POOL_LIMIT:]
        if not self._is_read(action.name):
            self._pending_write, self._written, self._probes = action, _top_level(text), 0

    def _is_read(self, name: str) -> bool:
        return any(word in _CALL_READS for word in _name_words(name))

    def _required(self, name: str) -> list[str]:
        required = self._tools.get(name, {}).get("required") or []
        return [key for key in required if isinstance(key, str)]

    def _properties(self, name: str) -> dict[str, dict[str, Any]]:
        properties = self._tools.get(name, {}).get("properties") or {}
        return {key: value for key, value in properties.items() if isinstance(value, dict)}

    def _expert_next(self) -> Action | None:
        if self._env is None or not self._has_expert:
            return None
        try:
            action = self._env.expert_action()
        except NotImplementedError:
            self._has_expert = False
            return None
        return None if action is None else as_action(action)

    # -- values -------------------------------------------------------------------------------

    def _missing(self, value: Any) -> Any:
        """A value shaped like `value` that names nothing: other digits, or a made-up word."""
        word = self._rng.choice(_WORDS)
        if isinstance(value, bool):
            return value
        if isinstance(value, int | float):
            return type(value)(987_654_321)
        text = str(value)
        if "@" in text:
            return f"no.such.{word}@example.invalid"
        if sum(char.isdigit() for char in text) >= 3:
            for _ in range(5):
                other = "".join(str(self._rng.randrange(10)) if char.isdigit() else char for char in text)
                if other != text and other not in self._known(text):
                    return other
        return f"no_such_{word}"

    def _known(self, value: Any) -> set[Any]:
        return {v for values in self._pool.values() for v in values if type(v) is type(value)}

    def _value(self, key: str, schema: dict[str, Any], exists: bool) -> tuple[bool, Any]:
        """(found, value) for a parameter: a known value of that name, or (exists False) one that exists nowhere."""
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return True, self._rng.choice(schema["enum"])
        kind = schema.get("type")
        known = [v for v in self._pool.get(key, []) if _fits(v, kind)]
        if kind == "array":
            item_key = key[:-1] if key.endswith("s") else key
            items = [v for v in self._pool.get(item_key, []) if isinstance(v, str)]
            if not items:
                return False, None
            chosen = self._rng.choice(items)
            return True, [chosen if exists else self._missing(chosen)]
        if kind == "boolean":
            return True, self._rng.random() < 0.5
        if known:
            chosen = self._rng.choice(known)
            return True, chosen if exists else self._missing(chosen)
        if kind in ("string", None):
            return True, self._missing("")
        return False, None

    # -- the components -----------------------------------------------------------------------

    def _expert(self) -> Action | None:
        if not self._has_expert:
            return None
        action = self._expert_next()
        if action is not None and action.name == HANDOVER and (
                self._probes < self.probes_before_respond or self._pending_write is not None):
            return None  # probe some more (and re-read the latest write) before handing over
        return action

    def _reread(self) -> Action | None:
        write = self._pending_write
        if write is None or not isinstance(write.arguments, dict):
            return None
        given = {**self._written, **write.arguments}
        fitting, bare = [], []
        for name in self._tools:
            if not self._is_read(name):
                continue
            required = self._required(name)
            if not required:
                bare.append(name)
            elif all(key in given for key in required):
                fitting.append(name)
        if fitting:
            name = self._rng.choice(fitting)
            return _call(name, {key: given[key] for key in self._required(name)})
        if bare:
            return _call(self._rng.choice(bare), {})
        reads = [action for action, ok in reversed(self._done) if ok and self._is_read(action.name)]
        return reads[0] if reads else None

    def _query(self) -> Action | None:
        reads = [name for name in self._tools if self._is_read(name) and self._properties(name)]
        queries = [name for name in reads if set(_name_words(name)) & _QUERY_WORDS] or reads
        if not queries:
            return None
        name = self._rng.choice(queries)
        exists = self._rng.random() < 0.5
        arguments: dict[str, Any] = {}
        required = self._required(name)
        for key, schema in self._properties(name).items():
            if key not in required and self._rng.random() < 0.6:
                continue
            found, value = self._value(key, schema, exists or self._rng.random() < 0.5)
            if found:
                arguments[key] = value
            elif key in required:
                return None
        return _call(name, arguments)

    def _fail(self) -> Action | None:
        options = {self._wrong_id: 0.4, self._write_again: 0.35, self._too_much: 0.15, self._left_out: 0.1}
        while options:
            option = self._rng.choices(list(options), weights=list(options.values()))[0]
            action = option()
            if action is not None:
                return action
            del options[option]
        return None

    def _wrong_id(self) -> Action | None:
        """An earlier successful call with one of its known string values replaced by one that exists nowhere."""
        named = [(action, key) for action, ok in self._done if ok and isinstance(action.arguments, dict)
                 for key, value in action.arguments.items() if isinstance(value, str) and value
                 and (self._is_read(action.name) or _ID_KEY.search(key))]
        if not named:
            return None
        action, key = self._rng.choice(named)
        assert isinstance(action.arguments, dict)
        return _call(action.name, {**action.arguments, key: self._missing(action.arguments[key])})

    def _write_again(self) -> Action | None:
        """The latest successful one-shot write again: what it required no longer holds."""
        for action, ok in reversed(self._done):
            if ok and not self._is_read(action.name):
                return action if set(_name_words(action.name)) & _ONE_SHOT else None
        return None

    def _too_much(self) -> Action | None:
        """An earlier successful write with a money-like number a million times larger (over any balance or limit)."""
        for action, ok in reversed(self._done):
            if not ok or self._is_read(action.name) or not isinstance(action.arguments, dict):
                continue
            for key, value in action.arguments.items():
                if _MONEY.search(key) and isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
                    return _call(action.name, {**action.arguments, key: min(value * 1_000_000, 10**12)})
        return None

    def _left_out(self) -> Action | None:
        """A tool called without its required arguments."""
        needy = [name for name in self._tools if self._required(name)]
        return _call(self._rng.choice(needy), {}) if needy else None


# A YAML block answer (AgentDojo's tool-output format): `key: value` lines or `- ` list items.
_YAML_BLOCK = re.compile(r"^(- |[A-Za-z_][\w.-]*:( |$))")


def _structured(text: str) -> Any:
    """A JSON answer, or a YAML block of mappings or lists, as data; None for anything else (plain text)."""
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            return orjson.loads(stripped)
        except orjson.JSONDecodeError:
            return None
    if not _YAML_BLOCK.match(stripped):
        return None
    import yaml  # pyyaml: safe_load builds plain data only

    try:
        value = yaml.load(stripped, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return None
    return value if isinstance(value, dict | list) else None


def _top_level(text: str) -> dict[str, Any]:
    """The scalar fields of an object answer, JSON or YAML (else nothing)."""
    value = _structured(text)
    if not isinstance(value, dict):
        return {}
    return {key: item for key, item in value.items() if isinstance(item, str | int | float)}


def _fits(value: Any, kind: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind in ("integer", "number"):
        return isinstance(value, int | float) and not isinstance(value, bool) and (kind == "number" or
                                                                                   isinstance(value, int))
    return kind is None or kind not in ("array", "object", "boolean")
