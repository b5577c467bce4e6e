"""AgentDojo's stateful tool suites (`workspace`, `slack`, `travel`) on AgentDojo's own runtime.

AgentDojo (PyPI `agentdojo`, MIT) ships tool suites: plain Python tool functions over a typed
(pydantic) environment state, user tasks with a prompt, ground-truth calls and a `utility` check.
Each suite is registered as its own environment (`agentdojo-workspace`, ...). Only the user
tasks are offered; injection tasks and attacks are not (the default, benign injection-vector texts
fill the environment, as in AgentDojo's utility-only runs). One reserved suite is refused.

Episode shape: `reset(task)` deep-copies the suite's default environment (loaded once per
process), applies the task's `init_environment`, keeps a copy as the pre-environment, and opens
with the task's PROMPT. A step's action is one tool call (an `Action` named after the tool with
JSON arguments, or call text such as `read_channel_messages(channel='general')`; positional
arguments are taken in the schema's order). It runs through AgentDojo's `ToolsExecutor` on a
`FunctionsRuntime` of the suite's tools, exactly as an AgentDojo agent pipeline runs a model's
call, and the observation is what that pipeline shows the model: the error text where there is
one (`Invalid tool X provided.`, `ValidationError: ...`, `ValueError: ...`), else the result
through AgentDojo's default formatter `tool_result_to_str` (YAML for models and lists of them,
`str()` otherwise). Text that is no call at all is answered `Invalid tool call: <why>` (ours).
The action `respond` (`{"text": ...}`) is the agent's final answer: it ends the episode
(`record: False`) and runs the task's own check, `utility_from_traces` where the task defines it,
else `utility(answer, pre_environment, post_environment)`; reward 1.0 when it passes.

Info: reset has `task` (the prompt), `env_id` (`agentdojo/<suite>`), `suite`, `version`,
`difficulty` and `tools` (OpenAI function schemas built as AgentDojo's OpenAI client builds them:
the tool's pydantic parameter model as JSON Schema); a tool step has `tool` and `error`; the
answer has `won`, `ground_truth_calls` and, when the check itself crashed, `utility_error`.
`state()` is the whole environment (`model_dump(mode="json")`).

Determinism: every episode starts from the same state. Two things in AgentDojo's tools vary between
runs, and are left as they are: writes stamp wall-clock time (`send_email`'s `timestamp`, a file's
`last_modified`), and a new calendar event lists its participants in `set` order, which follows
Python's string hashing (the same within a process; set PYTHONHASHSEED for the same across processes).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from worldsmith.envs.base import EnvBase, EnvError, EnvUnavailableError, Step, UnknownTaskError
from worldsmith.envs.bfcl import _call_from_action
from worldsmith.traces.model import Action, Observation
from worldsmith.util.errors import BadInputError

__all__ = ["DEFAULT_VERSION", "RESPOND", "SUITES", "AgentDojoEnv"]

SUITES = ("workspace", "slack", "travel")
_REFUSED_SUITES = frozenset({"banking"})  # reserved for a check that must not see it: never loaded here
DEFAULT_VERSION = "v1.2.2"  # AgentDojo's own default benchmark version
RESPOND = "respond"
INSTALL_HINT = ("pip install --no-deps agentdojo==0.1.35 plus its import-time packages: "
                "pip install 'worldsmith[envs]' (or: make install)")
_VALUES_PER_PARAMETER = 4  # how many calls of one tool the random policy's action list holds at most
_TASK_NUMBER = re.compile(r"(\d+)$")


def _refuse_unknown(suite: str) -> None:
    if suite in _REFUSED_SUITES:
        raise BadInputError(f"the AgentDojo suite {suite!r} is refused by worldsmith: it is reserved; "
                            f"choose from {', '.join(SUITES)}")
    if suite not in SUITES:
        raise BadInputError(f"unknown AgentDojo suite {suite!r} (choose from {', '.join(SUITES)})")


@functools.cache
def _suite(suite: str, version: str) -> Any:
    """AgentDojo's task suite (its loader registers every version's task updates on import)."""
    _refuse_unknown(suite)
    try:
        from agentdojo.task_suite import get_suite
    except ImportError as error:  # the registry checks first; this guards direct construction
        raise EnvUnavailableError(f"agentdojo-{suite} needs agentdojo ({error}): {INSTALL_HINT}") from error
    try:
        return get_suite(version, suite)
    except KeyError:
        raise BadInputError(f"AgentDojo has no benchmark version {version!r} of suite {suite!r} "
                            f"(the default is {DEFAULT_VERSION})") from None


@functools.cache
def _default_environment(suite: str, version: str) -> Any:
    """The suite's default environment with the benign injection defaults, parsed once (reset copies it)."""
    return _suite(suite, version).load_and_inject_default_environment({})


def _jsonable(value: Any) -> Any:
    """Call arguments as JSON (a FunctionCall nested as an argument becomes its dict)."""
    return orjson.loads(orjson.dumps(value, default=lambda item: item.model_dump(mode="json")))


def _call_text(name: str, arguments: dict[str, Any]) -> str:
    return f"{name}(" + ", ".join(f"{key}={value!r}" for key, value in arguments.items()) + ")"


def _call_json(name: str, arguments: dict[str, Any]) -> str:
    """A call as a JSON action object: what `as_action` reads back whole (call text would be split at its first
    space, `search_emails(query='dinner` becoming a tool name)."""
    return orjson.dumps({"name": name, "arguments": arguments}).decode()


def _tool_schema(function: Any) -> dict[str, Any]:
    """An AgentDojo `Function` as an OpenAI tool definition (as its `_function_to_openai` writes it)."""
    return {"type": "function", "function": {"name": function.name, "description": function.description,
                                             "parameters": function.parameters.model_json_schema()}}


@functools.cache
def _tool_schemas(suite: str, version: str) -> tuple[dict[str, Any], ...]:
    return tuple(_tool_schema(function) for function in _suite(suite, version).tools)


def _task_key(task_id: str) -> tuple[int, str]:
    match = _TASK_NUMBER.search(task_id)
    return (int(match.group(1)) if match else -1, task_id)


def _fresh(suite: str, version: str, task: Any) -> tuple[Any, Any]:
    """(environment, pre-environment) of a new episode: the default state, the task's own set-up, a copy."""
    environment = task.init_environment(_default_environment(suite, version).model_copy(deep=True))
    return environment, environment.model_copy(deep=True)


@functools.cache
def _argument_values(suite: str, version: str) -> dict[str, tuple[Any, ...]]:
    """Every argument value the suite's ground truths use, by parameter name (the random policy's vocabulary)."""
    values: dict[str, dict[bytes, Any]] = {}
    for task in _suite(suite, version).user_tasks.values():
        _, pre = _fresh(suite, version, task)
        for call in task.ground_truth(pre):
            for key, value in _jsonable(dict(call.args)).items():
                values.setdefault(key, {})[orjson.dumps(value, option=orjson.OPT_SORT_KEYS)] = value
    return {key: tuple(found[digest] for digest in sorted(found)) for key, found in values.items()}


@functools.cache
def _admissible(suite: str, version: str) -> tuple[str, ...]:
    """Calls of every tool whose required arguments the suite's vocabulary fills, then `respond` (sorted, stable)."""
    vocabulary = _argument_values(suite, version)
    calls: list[str] = []
    for schema in _tool_schemas(suite, version):
        function = schema["function"]
        required = [key for key in function["parameters"].get("required", [])]
        if any(key not in vocabulary for key in required):
            continue
        count = max((min(len(vocabulary[key]), _VALUES_PER_PARAMETER) for key in required), default=1)
        for index in range(count):
            arguments = {key: vocabulary[key][index % len(vocabulary[key])] for key in required}
            calls.append(_call_json(function["name"], arguments))
    return (*sorted(dict.fromkeys(calls)), _call_json(RESPOND, {"text": ""}))


@dataclass
class _Episode:
    task_id: str
    task: Any
    environment: Any
    pre_environment: Any
    expert: list[Any]  # the ground truth's FunctionCalls, in order
    calls: list[Any] = field(default_factory=list)  # every call the agent made (AgentDojo's function stack trace)
    expert_done: int = 0
    finished: bool = False


class AgentDojoEnv(EnvBase):
    """One AgentDojo suite's user tasks on its real tools; the expert replays each task's ground truth."""

    def __init__(self, *, suite: str, version: str = DEFAULT_VERSION) -> None:
        _refuse_unknown(suite)
        self.suite, self.version = suite, version
        self.name = f"agentdojo-{suite}"
        task_suite = _suite(suite, version)
        from agentdojo.agent_pipeline.tool_execution import ToolsExecutor
        from agentdojo.functions_runtime import FunctionsRuntime

        self._runtime = FunctionsRuntime(task_suite.tools)
        self._executor = ToolsExecutor()  # AgentDojo's default: tool_result_to_str, YAML
        self._tasks = dict(sorted(task_suite.user_tasks.items(), key=lambda item: _task_key(item[0])))
        self._properties = {schema["function"]["name"]: list(schema["function"]["parameters"].get("properties", {}))
                            for schema in _tool_schemas(suite, version)}
        self._episode: _Episode | None = None

    # -- protocol -----------------------------------------------------------------------------

    def tasks(self) -> list[str]:
        return list(self._tasks)

    def reset(self, task: str | None = None, *, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        """Start `task` on a fresh copy of the suite's default environment (seed is unused: nothing is random)."""
        task_id = task if task is not None else next(iter(self._tasks))
        user_task = self._tasks.get(task_id)
        if user_task is None:
            raise UnknownTaskError(f"unknown {self.name} task {task_id!r}: ids are AgentDojo user task ids such as "
                                   f"user_task_0 ({len(self._tasks)} in suite {self.suite} {self.version})")
        environment, pre = _fresh(self.suite, self.version, user_task)
        expert = list(user_task.ground_truth(pre.model_copy(deep=True)))
        self._episode = _Episode(task_id, user_task, environment, pre, expert)
        info = {"task": user_task.PROMPT, "env_id": f"agentdojo/{self.suite}", "suite": self.suite,
                "version": self.version, "difficulty": user_task.DIFFICULTY.name.lower(),
                "tools": [dict(schema) for schema in _jsonable(list(_tool_schemas(self.suite, self.version)))],
                "context": []}
        return Observation(text=user_task.PROMPT), info

    def step(self, action: Action | str) -> Step:
        episode = self._running()
        call = _call_from_action(action)
        if call.name == RESPOND:
            text = call.kwargs.get("text", call.args[0] if call.args else "")
            return self._answer(episode, text if isinstance(text, str) else str(text))
        if call.problem is not None:
            return Step(Observation(text=f"Invalid tool call: {call.problem}"), 0.0, False, False,
                        {"tool": call.name, "error": True})
        names = self._properties.get(call.name, [])
        if len(call.args) > len(names):
            text, error = f"Invalid tool call: {call.name} takes at most {len(names)} arguments", True
        else:
            text, error = self._run(episode, call.name, {**dict(zip(names, call.args, strict=False)), **call.kwargs})
        return Step(Observation(text=text), 0.0, False, False, {"tool": call.name, "error": error})

    def admissible_actions(self) -> list[str] | None:
        """A finite sample of the open call space: each tool with argument values the suite's ground truths use, as
        JSON action objects (`{"name": ..., "arguments": ...}`).

        Not every listed call succeeds (an id deleted earlier, a value another task meant); it lets the random
        policy act. The list is the same in every episode of the suite."""
        return list(_admissible(self.suite, self.version)) if self._episode is not None else None

    def expert_action(self) -> Action | None:
        """The next ground-truth call not yet played, then `respond` with the task's ground-truth answer."""
        episode = self._episode
        if episode is None or episode.finished:
            return None
        if episode.expert_done < len(episode.expert):
            planned = episode.expert[episode.expert_done]
            arguments = _jsonable(dict(planned.args))
            return Action(name=planned.function, arguments=arguments, raw=_call_text(planned.function, arguments))
        answer = episode.task.GROUND_TRUTH_OUTPUT
        return Action(name=RESPOND, arguments={"text": answer}, raw=_call_text(RESPOND, {"text": answer}))

    def state(self) -> dict[str, Any] | None:
        """The whole environment state as JSON (inbox, calendar, drive, channels, bookings, ...)."""
        if self._episode is None:
            return None
        state: dict[str, Any] = self._episode.environment.model_dump(mode="json")
        return state

    def close(self) -> None:
        self._episode = None

    # -- internals ----------------------------------------------------------------------------

    def _running(self) -> _Episode:
        if self._episode is None:
            raise EnvError("call reset() before step()")
        if self._episode.finished:
            raise EnvError(f"the episode of {self._episode.task_id!r} is over (the agent answered); reset()")
        return self._episode

    def _run(self, episode: _Episode, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """One call through AgentDojo's ToolsExecutor; (what the model is shown, whether it is an error)."""
        from agentdojo.functions_runtime import FunctionCall
        from agentdojo.types import ChatAssistantMessage, get_text_content_as_str
        from pydantic import ValidationError

        try:
            call = FunctionCall(function=name, args=arguments)
        except ValidationError as error:
            return f"ValidationError: {error}", True
        episode.calls.append(call)
        planned = episode.expert[episode.expert_done] if episode.expert_done < len(episode.expert) else None
        if planned is not None and planned.function == name and _jsonable(dict(planned.args)) == _jsonable(arguments):
            episode.expert_done += 1
        message = ChatAssistantMessage(role="assistant", content=None, tool_calls=[call])
        try:
            _, _, _, messages, _ = self._executor.query(episode.task.PROMPT, self._runtime, episode.environment,
                                                       [message])
        except Exception as error:  # noqa: BLE001 - e.g. a result the formatter cannot write: an answer, not a crash
            return f"{type(error).__name__}: {error}", True
        result = messages[-1]
        if result.get("error"):
            return str(result["error"]), True
        return get_text_content_as_str(result["content"]), False

    def _answer(self, episode: _Episode, text: str) -> Step:
        """The agent's final answer: the task's own utility check on the pre- and post-environment."""
        episode.finished = True
        task = episode.task
        info: dict[str, Any] = {"record": False, "context": [], "ground_truth_calls": len(episode.expert)}
        try:
            won = task.utility_from_traces(text, episode.pre_environment, episode.environment, episode.calls)
            if won is None:
                won = task.utility(text, episode.pre_environment, episode.environment)
        except Exception as error:  # noqa: BLE001 - a check that crashes on an odd state fails the task
            won, info["utility_error"] = False, f"{type(error).__name__}: {error}"[:500]
        info["won"] = bool(won)
        return Step(Observation(text=""), 1.0 if won else 0.0, True, False, info)
