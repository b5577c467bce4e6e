"""BFCL v4 multi-turn function calling on bfcl-eval's own in-process backends.

Task ids are BFCL entry ids (`multi_turn_base_1`, `multi_turn_miss_func_12`, ...) of every
`BFCL_v4_multi_turn_*.json` file bfcl-eval ships. Each reset builds fresh backend instances
(GorillaFileSystem, TradingBot, TravelAPI, MessageAPI, TwitterAPI, TicketAPI, VehicleControlAPI,
MathAPI) from the entry's `initial_config` exactly as bfcl-eval's `execute_multi_turn_func_call`
does (`_load_scenario(deepcopy(config), long_context=...)`, long context for the
`multi_turn_long_context` category), but never through bfcl's module-global instance cache and
never by `eval`: call text is parsed with `ast` and only literal arguments are accepted.

Episode shape: reset's observation is the first user message; a tool step's action is one backend
method call (an `Action` named after the method with JSON keyword arguments, or text such as
`cd(folder='documents')`); its observation is the return value rendered as bfcl's harness renders
it for the model (str as is, dict as `json.dumps`, anything else `str()`; an exception becomes
`Error during execution: <message>`). The action `respond` (arguments `{"text": ...}`) is the
assistant's reply to the user: it hands over to the next user message (`record: False`, the
message in `context`) and, after the last user turn, ends the episode. Nothing is stripped from
observations.

Deviations from bfcl's harness, all deliberate:
- a call whose arguments are not literals (e.g. `cd(folder=pwd())`), or text that is not one call,
  is answered with an `Error during execution: ...` text of ours (bfcl would `eval` it, or, for text
  that is no call, end the model's turn without executing anything);
- an unknown name is always `Error during execution: name '<name>' is not defined` (bfcl's `eval`
  would run Python builtins such as `print` too);
- long-context backends are detached from bfcl's module-level extension tables after loading
  (bfcl's TravelAPI aliases `CREDIT_CARD_EXTENSION` entries, so a booking in one episode changes
  the cards of every later one); the decimal context and `mpmath.mp.dps` that MathAPI sets are
  restored after each call so they do not leak into the host process;
- tool schemas leave out an entry's `excluded_function`s (bfcl-eval 2026.3.23 ships the key but
  does not use it), as data_samples/make_samples.py does; every public method stays callable, as
  in bfcl, whether or not it is advertised (miss_func functions before their turn included).

Determinism: TradingBot stamps transactions with `datetime.fromtimestamp` (local time), so
constructing a `BFCLEnv` sets `os.environ["TZ"] = "UTC"; time.tzset()` for the whole process.
All other randomness is seeded per scenario, so replays reproduce observations exactly.

Info: reset has `task` (first user message), `env_id` (`bfcl/<classes>`), `category`, `turns` and
`tools` (OpenAI function schemas, as make_samples builds them); a tool step has `turn` and
`error`; a hand-over has `record: False`, `context` (the next user message) and, where held-out
functions arrive, `tools` and `tools_added`. The last `respond` ends the episode (reward 1.0 when
won) with `won` = every ground-truth call was run in its user turn (same function and arguments,
any order within the turn) and none returned an error result (an `Error during execution` text,
a dict with an `error` key, or a list led by one), `ground_truth_calls` / `_ok` / `_failed`, and
`bfcl_valid` (+ `bfcl_error`): bfcl's own multi-turn verdict (`state_checker` and
`response_checker` per turn against the ground truth run on shadow backends; a turn with ground
truth needs at least one call). `state()` is each backend's public attributes (what the state
checker compares) as JSON, keyed by class name; the file system in `initial_config`'s shape.
"""

from __future__ import annotations

import ast
import copy
import decimal
import functools
import importlib
import inspect
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from worldsmith.envs.base import (
    EnvBase,
    EnvError,
    EnvUnavailableError,
    Step,
    TaskLoadError,
    UnknownTaskError,
    as_action,
)
from worldsmith.traces.model import Action, Observation
from worldsmith.util.errors import BadInputError

__all__ = ["BFCLEnv"]

RESPOND = "respond"
ERROR_PREFIX = "Error during execution: "
# bfcl's harness refuses to evaluate calls of these names (multi_turn_utils.execute_multi_turn_func_call).
_FORBIDDEN_NAMES = frozenset({"kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run"})
_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")
_CATEGORY_FILE = re.compile(r"^BFCL_v4_(multi_turn_\w+)\.json$")


# --------------------------------------------------------------------------------------------
# bfcl-eval data
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    """One BFCL multi-turn entry with its ground truth (read-only; configs are deep-copied per use)."""

    id: str
    category: str
    turns: list[list[dict[str, str]]]
    ground_truth: list[list[str]]
    initial_config: dict[str, Any]
    involved_classes: list[str]
    missed_function: dict[int, list[str]]
    excluded_function: list[str]

    @property
    def long_context(self) -> bool:
        # bfcl: long_context=("long_context" in test_category or "composite" in test_category)
        return "long_context" in self.category or "composite" in self.category


@functools.cache
def _bfcl_data_dir() -> Path:
    try:
        import bfcl_eval
    except ImportError as error:  # the registry checks first; this guards direct construction
        raise EnvUnavailableError(
            "bfcl needs bfcl-eval: pip install --no-deps bfcl-eval mpmath (a plain install pulls a CUDA torch)"
        ) from error
    return Path(bfcl_eval.__file__).parent / "data"


@functools.cache
def _multi_turn_categories() -> tuple[str, ...]:
    """Every multi-turn category bfcl-eval ships data and ground truth for, sorted."""
    data = _bfcl_data_dir()
    found = []
    for path in sorted(data.glob("BFCL_v4_multi_turn_*.json")):
        match = _CATEGORY_FILE.match(path.name)
        if match and (data / "possible_answer" / path.name).is_file():
            found.append(match.group(1))
    return tuple(found)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@functools.cache
def _category_entries(category: str) -> dict[str, _Entry]:
    """Entries of one category by id, in file order, paired with their ground truth."""
    data = _bfcl_data_dir()
    questions = _read_jsonl(data / f"BFCL_v4_{category}.json")
    answers = {answer["id"]: answer["ground_truth"] for answer in _read_jsonl(data / "possible_answer" / f"BFCL_v4_{category}.json")}
    entries: dict[str, _Entry] = {}
    for question in questions:
        entries[question["id"]] = _Entry(
            id=question["id"],
            category=category,
            turns=question["question"],
            ground_truth=answers.get(question["id"], []),
            initial_config=question.get("initial_config", {}),
            involved_classes=list(question["involved_classes"]),
            missed_function={int(turn): list(names) for turn, names in question.get("missed_function", {}).items()},
            excluded_function=list(question.get("excluded_function", [])),
        )
    return entries


@functools.cache
def _function_docs(class_name: str) -> tuple[dict[str, Any], ...]:
    """bfcl's function documentation of one backend class (multi_turn_func_doc/*.json)."""
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    return tuple(_read_jsonl(_bfcl_data_dir() / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]))


def _openai_type(schema: Any, mapping: dict[str, str]) -> Any:
    """BFCL's function-doc types ("dict", "float", "tuple", "any") as JSON Schema types (as make_samples)."""
    if isinstance(schema, dict):
        out = {key: _openai_type(value, mapping) for key, value in schema.items()}
        if isinstance(schema.get("type"), str):
            out["type"] = mapping.get(schema["type"], schema["type"])
        return out
    if isinstance(schema, list):
        return [_openai_type(value, mapping) for value in schema]
    return schema


def _tool_schema(doc: dict[str, Any]) -> dict[str, Any]:
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI

    return {
        "type": "function",
        "function": {
            "name": doc["name"],
            "description": doc.get("description", ""),
            "parameters": _openai_type(doc.get("parameters", {}), GORILLA_TO_OPENAPI),
        },
    }


@functools.cache
def _class_tools(class_name: str) -> tuple[dict[str, Any], ...]:
    """Tool schemas of one backend class, built once (shared: callers copy before handing them out)."""
    return tuple(_tool_schema(doc) for doc in _function_docs(class_name))


def _tool_split(entry: _Entry) -> tuple[list[dict[str, Any]], dict[int, list[dict[str, Any]]]]:
    """The tools shown from the start and those held out until a later turn (bfcl's miss_func split)."""
    excluded = set(entry.excluded_function)
    shown = [
        tool for name in entry.involved_classes for tool in _class_tools(name) if tool["function"]["name"] not in excluded
    ]
    held_out: dict[int, list[dict[str, Any]]] = {}
    for turn, names in entry.missed_function.items():
        for missed in names:
            for position, tool in enumerate(shown):
                if tool["function"]["name"] == missed:
                    held_out.setdefault(turn, []).append(shown.pop(position))
                    break
    return shown, held_out


# --------------------------------------------------------------------------------------------
# Calls: parsing, executing, rendering
# --------------------------------------------------------------------------------------------


@dataclass
class _Call:
    """One function call as the agent sent it; `problem` says why it cannot be executed."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None


def _leftmost_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _parse_call_text(text: str) -> _Call | None:
    """A call written as Python (`cd(folder='x')`, `[ls(a=True)]`) read as data; None if it is no call."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None
    if isinstance(node, ast.List | ast.Tuple):
        if len(node.elts) != 1 or not isinstance(node.elts[0], ast.Call):
            calls = sum(isinstance(element, ast.Call) for element in node.elts)
            if calls == 0:
                return None
            return _Call(name="", problem=f"send one function call per step, not {len(node.elts)}")
        node = node.elts[0]
    if not isinstance(node, ast.Call):
        return None
    if not isinstance(node.func, ast.Name):
        base = _leftmost_name(node.func)
        if base is None:
            return _Call(name="", problem="the called function must be a plain name")
        return _Call(name=base, problem=f"name '{base}' is not defined")
    name = node.func.id
    if any(keyword.arg is None for keyword in node.keywords):
        return _Call(name=name, problem="** arguments are not supported; name each argument")
    values: list[Any] = []
    for argument in [*node.args, *(keyword.value for keyword in node.keywords)]:
        try:
            values.append(ast.literal_eval(argument))
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return _Call(name=name, problem=f"arguments must be literal values, not {ast.unparse(argument)[:200]}")
    args = tuple(values[: len(node.args)])
    names = [keyword.arg for keyword in node.keywords if keyword.arg is not None]  # `**` was refused above
    kwargs = dict(zip(names, values[len(node.args):], strict=True))
    return _Call(name=name, args=args, kwargs=kwargs)


def _call_from_action(action: Action | str) -> _Call:
    """The call an action asks for: text is parsed as Python call syntax, an Action by its name and JSON arguments."""
    if isinstance(action, str):
        parsed = _parse_call_text(action)
        if parsed is not None:
            return parsed
        action = as_action(action)
    if _IDENTIFIER.match(action.name or ""):
        if action.parse_error:
            return _Call(name=action.name, problem=action.parse_error)
        if isinstance(action.arguments, dict):
            return _Call(name=action.name, kwargs=dict(action.arguments))
        return _Call(name=action.name, problem="arguments must be a JSON object of keyword arguments")
    source = action.raw if action.raw is not None else action.name
    parsed = _parse_call_text(source)
    if parsed is not None:
        return parsed
    return _Call(name="", problem=f"not a function call: {source.strip()[:200]!r}")


def bfcl_result_text(value: Any) -> str:
    """A backend's return value as bfcl's harness hands it to the model (multi_turn_utils)."""
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except Exception:  # noqa: BLE001 - bfcl falls back to str() on anything json cannot write
            return str(value)
    return str(value)


def _is_error_value(value: Any) -> bool:
    """Backends report failures as {"error": ...}, or a list led by one (or by an "Error: ..." string)."""
    if isinstance(value, dict):
        return "error" in value
    if isinstance(value, list | tuple) and value:
        first = value[0]
        return (isinstance(first, dict) and "error" in first) or (isinstance(first, str) and first.startswith("Error"))
    return False


def _jsonable(value: Any) -> Any:
    """Backend state as JSON: tuples/sets as lists, keys as text, the file system as nested dicts."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, set | frozenset):
        return sorted((_jsonable(item) for item in value), key=repr)
    kind = type(value).__name__
    if kind == "Directory":  # GorillaFileSystem: the same shape as initial_config
        return {"type": "directory", "contents": {name: _jsonable(item) for name, item in value.contents.items()}}
    if kind == "File":
        return {"type": "file", "content": value.content}
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return repr(value)


def _public_state(instance: Any) -> dict[str, Any]:
    """The attributes bfcl's state checker compares (every attribute not starting with `_`)."""
    state = {}
    for key, value in vars(instance).items():
        if key.startswith("_"):
            continue
        if type(value).__name__ == "Directory":
            state[key] = {value.name: _jsonable(value)}
        else:
            state[key] = _jsonable(value)
    return state


class _Backends:
    """Fresh instances of an entry's backend classes and their public methods by name (bfcl's mapping)."""

    def __init__(self, entry: _Entry) -> None:
        from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES

        self.instances: dict[str, Any] = {}
        self.methods: dict[str, Callable[..., Any]] = {}
        for class_name in entry.involved_classes:
            backend_class = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name]), class_name)
            instance = backend_class()
            if class_name not in STATELESS_CLASSES:
                config = copy.deepcopy(entry.initial_config.get(class_name, {}))
                instance._load_scenario(config, long_context=entry.long_context)
                if entry.long_context:  # detach from bfcl's shared extension tables (see module doc)
                    attributes = vars(instance)
                    attributes.update(copy.deepcopy(attributes))
            self.instances[class_name] = instance
            for method_name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not method_name.startswith("_"):
                    self.methods[method_name] = method  # a later class wins a name clash, as in bfcl

    def execute(self, call: _Call) -> tuple[str, bool]:
        """Run one call; returns (the text the model sees, whether it is an error result)."""
        if call.problem is not None:
            return ERROR_PREFIX + call.problem, True
        if call.name in _FORBIDDEN_NAMES:
            return f"{ERROR_PREFIX}Function call {call.name} is not allowed.", True
        method = self.methods.get(call.name)
        if method is None:
            return f"{ERROR_PREFIX}name '{call.name}' is not defined", True
        try:
            return _run_isolated(method, call.args, call.kwargs)
        except Exception as error:  # noqa: BLE001 - bfcl answers every failure with its message
            return f"{ERROR_PREFIX}{error}", True

    def canonical(self, call: _Call) -> tuple[str, dict[str, Any]] | None:
        """Name and all arguments (defaults filled in) for comparing calls; None if they do not bind."""
        method = self.methods.get(call.name)
        if method is None or call.problem is not None:
            return None
        try:
            bound = _signature(method).bind(*call.args, **call.kwargs)
        except TypeError:
            return None
        bound.apply_defaults()
        return call.name, _jsonable(dict(bound.arguments))

    def state(self) -> dict[str, Any]:
        return {class_name: _public_state(instance) for class_name, instance in self.instances.items()}


_SIGNATURES: dict[Any, inspect.Signature] = {}


def _signature(method: Any) -> inspect.Signature:
    """A bound method's signature, computed once per backend function (inspect is slow)."""
    function = getattr(method, "__func__", method)
    found = _SIGNATURES.get(function)
    if found is None:
        found = _SIGNATURES[function] = inspect.signature(method)
    return found


def _copied(value: Any) -> Any:
    """A deep copy of JSON data (through orjson: far faster than copy.deepcopy)."""
    return orjson.loads(orjson.dumps(value))


def _run_isolated(method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, bool]:
    """Call a backend method and render its result, then restore the precision MathAPI sets.

    The rendering must happen before the restore: `logarithm` returns an mpmath number whose text
    depends on the precision it set (`{'result': mpf('1.3027')}` at 5 digits), as in bfcl's harness.
    """
    import mpmath

    dps = mpmath.mp.dps
    try:
        with decimal.localcontext():
            value = method(*args, **kwargs)
            return bfcl_result_text(value), _is_error_value(value)
    finally:
        mpmath.mp.dps = dps


def _bound_arguments(call_text: str, backends: _Backends) -> _Call:
    """A ground-truth call string as a call with keyword arguments named from the method signature."""
    call = _parse_call_text(call_text)
    if call is None or call.problem is not None:
        raise ValueError(f"ground-truth call cannot be parsed: {call_text!r}")
    method = backends.methods.get(call.name)
    if call.args and method is not None:
        bound = _signature(method).bind_partial(*call.args, **call.kwargs)
        return _Call(name=call.name, kwargs=dict(bound.arguments))
    return call


# --------------------------------------------------------------------------------------------
# The environment
# --------------------------------------------------------------------------------------------


@dataclass
class _GroundTruthCall:
    text: str
    call: _Call
    key: tuple[str, dict[str, Any]] | None
    ran: bool = False
    error_result: str | None = None


@dataclass
class _Episode:
    entry: _Entry
    backends: _Backends
    shadow: _Backends
    expert: list[list[_GroundTruthCall]]
    tools: list[dict[str, Any]]
    held_out: dict[int, list[dict[str, Any]]]
    turn: int = 0
    calls_this_turn: int = 0
    results: list[str] = field(default_factory=list)
    bfcl_error: dict[str, str] | None = None
    finished: bool = False


def _turn_messages(entry: _Entry, turn: int) -> list[dict[str, str]]:
    """The user messages of a turn; a held-out-function turn gets bfcl's fixed FC prompt."""
    messages = entry.turns[turn]
    if not messages and turn in entry.missed_function:
        from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC

        return [{"role": "user", "content": DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC}]
    return [{"role": message["role"], "content": message["content"]} for message in messages]


class BFCLEnv(EnvBase):
    """BFCL v4 multi-turn entries on bfcl-eval's executable backends; the expert replays the ground truth."""

    name = "bfcl"

    def __init__(self, *, categories: list[str] | None = None) -> None:
        os.environ["TZ"] = "UTC"  # TradingBot prints local time: fix it so replays reproduce
        time.tzset()
        known = _multi_turn_categories()
        chosen = list(categories) if categories is not None else list(known)
        unknown = [category for category in chosen if category not in known]
        if unknown:
            raise BadInputError(f"unknown BFCL multi-turn categories {unknown} (known: {', '.join(known)})")
        self.categories = chosen
        self._entries: dict[str, _Entry] = {}
        for category in chosen:
            self._entries.update(_category_entries(category))
        self._episode: _Episode | None = None

    # -- protocol -----------------------------------------------------------------------------

    def tasks(self) -> list[str]:
        return list(self._entries)

    def reset(self, task: str | None = None, *, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        """Fresh backends for `task` (seed is unused: BFCL scenarios carry their own seeds)."""
        entry = self._entry(task)
        try:
            self._episode = self._start(entry)
        except Exception as error:  # noqa: BLE001 - any loading failure names the task and the reason
            self._episode = None
            raise TaskLoadError(f"BFCL task {entry.id!r} cannot load: {type(error).__name__}: {error}") from error
        messages = _turn_messages(entry, 0)
        first_user = next((message["content"] for message in messages if message["role"] == "user"), "")
        info: dict[str, Any] = {
            "task": first_user,
            "env_id": "bfcl/" + "+".join(sorted(entry.involved_classes)),
            "category": entry.category,
            "involved_classes": list(entry.involved_classes),
            "turn": 0,
            "turns": len(entry.turns),
            "tools": _copied(self._episode.tools),
            "context": [],
        }
        return Observation(text=_messages_text(messages)), info

    def step(self, action: Action | str) -> Step:
        episode = self._require_running()
        call = _call_from_action(action)
        if call.name == RESPOND:
            return self._hand_over(episode)
        text, error = episode.backends.execute(call)
        if call.problem is None:  # bfcl never executes (nor counts) output it cannot decode as calls
            episode.calls_this_turn += 1
            episode.results.append(text)
            self._mark_ground_truth(episode, call, text, error)
        info = {"turn": episode.turn, "error": error}
        return Step(Observation(text=text), 0.0, False, False, info)

    def admissible_actions(self) -> list[str] | None:
        return None  # an open space of function calls

    def expert_action(self) -> Action | None:
        """The next ground-truth call of this user turn not yet run, then `respond`; None when done."""
        episode = self._episode
        if episode is None or episode.finished:
            return None
        for planned in episode.expert[episode.turn]:
            if not planned.ran:
                return Action(name=planned.call.name, arguments=_jsonable(planned.call.kwargs), raw=planned.text)
        return Action(name=RESPOND, arguments={"text": ""})

    def state(self) -> dict[str, Any] | None:
        """Each backend's public attributes (what bfcl's state checker compares), keyed by class name."""
        return None if self._episode is None else self._episode.backends.state()

    def close(self) -> None:
        self._episode = None

    # -- internals ----------------------------------------------------------------------------

    def _entry(self, task: str | None) -> _Entry:
        if task is None:
            if not self._entries:
                raise UnknownTaskError("no BFCL tasks in the chosen categories")
            return next(iter(self._entries.values()))
        entry = self._entries.get(task)
        if entry is None:
            raise UnknownTaskError(
                f"unknown BFCL task {task!r}: ids are bfcl entry ids such as multi_turn_base_1 in the categories "
                f"{', '.join(self.categories)}; list them with make('bfcl').tasks()"
            )
        return entry

    @staticmethod
    def _start(entry: _Entry) -> _Episode:
        if len(entry.ground_truth) != len(entry.turns):
            raise ValueError(f"{len(entry.turns)} user turns but {len(entry.ground_truth)} ground-truth turns")
        backends, shadow = _Backends(entry), _Backends(entry)
        expert = []
        for calls in entry.ground_truth:
            planned = []
            for text in calls:
                call = _bound_arguments(text, backends)
                planned.append(_GroundTruthCall(text=text, call=call, key=backends.canonical(call)))
            expert.append(planned)
        tools, held_out = _tool_split(entry)
        return _Episode(entry=entry, backends=backends, shadow=shadow, expert=expert, tools=tools, held_out=held_out)

    def _require_running(self) -> _Episode:
        if self._episode is None:
            raise EnvError("call reset() before step()")
        if self._episode.finished:
            raise EnvError(f"the episode of {self._episode.entry.id!r} is over (the last user turn was answered); reset()")
        return self._episode

    @staticmethod
    def _mark_ground_truth(episode: _Episode, call: _Call, text: str, error: bool) -> None:
        """Tick off the first not-yet-run ground-truth call of this turn that this call equals."""
        key = episode.backends.canonical(call)
        if key is None:
            return
        for planned in episode.expert[episode.turn]:
            if not planned.ran and planned.key == key:
                planned.ran = True
                planned.error_result = text if error else None
                return

    def _hand_over(self, episode: _Episode) -> Step:
        self._check_turn(episode)
        episode.turn += 1
        episode.calls_this_turn = 0
        if episode.turn >= len(episode.entry.turns):
            episode.finished = True
            info: dict[str, Any] = {"record": False, "context": [], **self._outcome(episode)}
            return Step(Observation(text=""), 1.0 if info["won"] else 0.0, True, False, info)
        messages = _turn_messages(episode.entry, episode.turn)
        info = {"record": False, "context": messages, "turn": episode.turn}
        added = episode.held_out.get(episode.turn)
        if added:
            episode.tools.extend(added)  # bfcl appends held-out docs to the tool list at this turn
            info["tools"] = _copied(episode.tools)
            info["tools_added"] = [tool["function"]["name"] for tool in added]
        return Step(Observation(text=_messages_text(messages)), 0.0, False, False, info)

    @staticmethod
    def _check_turn(episode: _Episode) -> None:
        """bfcl's per-turn verdict: run this turn's ground truth on the shadow backends and compare."""
        if episode.bfcl_error is not None:
            return
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import response_checker, state_checker

        planned = episode.expert[episode.turn]
        expected = [episode.shadow.execute(item.call)[0] for item in planned]
        if not planned:
            return  # bfcl checks nothing on a turn whose ground truth is empty
        if episode.calls_this_turn == 0:
            episode.bfcl_error = {
                "error_type": "multi_turn:empty_turn_model_response",
                "error_message": f"Model response list is empty for turn {episode.turn}",
            }
            return
        for verdict in (
            state_checker(episode.backends.instances, episode.shadow.instances),
            response_checker(episode.results, expected, episode.turn),
        ):
            if not verdict["valid"]:
                episode.bfcl_error = {"error_type": verdict["error_type"], "error_message": verdict["error_message"]}
                return

    @staticmethod
    def _outcome(episode: _Episode) -> dict[str, Any]:
        planned = [item for turn in episode.expert for item in turn]
        failed = [
            {"call": item.text, "result": (item.error_result or "not run")[:300]}
            for item in planned
            if not item.ran or item.error_result is not None
        ]
        outcome: dict[str, Any] = {
            "won": not failed,
            "ground_truth_calls": len(planned),
            "ground_truth_ok": len(planned) - len(failed),
            "ground_truth_failed": failed,
            "bfcl_valid": episode.bfcl_error is None,
        }
        if episode.bfcl_error is not None:
            outcome["bfcl_error"] = episode.bfcl_error
        return outcome


def _messages_text(messages: list[dict[str, str]]) -> str:
    return "\n\n".join(message["content"] for message in messages)
