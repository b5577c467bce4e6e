"""Any MCP server as a real environment: a command started over stdio, or a URL over streamable HTTP.

    env = make("mcp", command="mcp-server-time", tasks="tasks.jsonl")
    env = make("mcp", url="http://127.0.0.1:8000/mcp", reset="cp base.db work.db")

Whatever speaks MCP becomes something `collect`, `explore`, `replay`, W2R and the live protocol can
act in, with no adapter of its own. The constructor's keyword arguments are all plain JSON (the
recorder stores them with each episode, so W2R and `replay --episode` rebuild the same server).

Episode shape: `reset(task)` ends the previous episode's MCP session, runs the reset command (a
program and its arguments, no shell: e.g. `cp base.db work.db` to restore a database file; a
failure is an `EnvError` naming it), then opens a new session (a new server process for a
command). The opening observation is the task's instruction; the info has `tools` (the server's
`tools/list`, as OpenAI function schemas, so the policies that read schemas act on any server),
`server` (its name and version) and `env_id` (`mcp/<server name>`: the same server gives the same
id however it is reached). A step's action is one tool call: an `Action` named after the tool
with JSON arguments, or text (`name {"key": ...}`, or Python call syntax `name(key='...')` with
positional arguments taken in the schema's order). The observation is the tool result's text
content (other content named in brackets, the structured result as JSON when there is no text);
`info["error"]` is the result's `isError`, or True for a protocol error (an unknown tool), whose
message is the observation. The action `respond` (`{"text": ...}`) ends the episode (`record:
False`): it is won when the task has ground-truth calls and every one of them was made, in
order, and answered without error; a task without them has no verdict (`won` is None).

Tasks come from a JSON or JSONL file (`McpTask`: `id`, `instruction`, optional `ground_truth`
calls and `answer`); without one there is one open task (`open`), for probing the server's tools.
The expert plays the ground truth, then `respond`s with the answer. `admissible_actions` gives the
random policy every tool with its required arguments filled from the tasks' ground-truth values,
the schema's enums, defaults and examples, or a value of the right type. `state()` is None: an MCP
server does not show its state. Collection runs one episode at a time (the spec is not `parallel`):
episodes share the server's state and the file a reset command restores.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import shlex
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worldsmith.envs.base import EnvBase, EnvError, EnvUnavailableError, Step, UnknownTaskError, as_action
from worldsmith.envs.bfcl import _parse_call_text
from worldsmith.traces.model import Action, Observation
from worldsmith.util.errors import BadInputError
from worldsmith.util.paths import read_user_text

__all__ = ["OPEN_TASK", "RESPOND", "McpEnv", "McpServerError", "McpTask", "ToolCall", "load_tasks", "mcp_env_id"]

RESPOND = "respond"
OPEN_TASK = "open"  # the one task of a server given no tasks file
INSTALL_HINT = "pip install 'worldsmith[serve]' (the official MCP SDK)"
_VALUES_PER_PARAMETER = 4  # calls of one tool in the random policy's action list, at most
_STDERR_LINES, _STDERR_TAIL = 3, 600  # what of a server's stderr is quoted when it fails to start (lines, characters)
_PLACEHOLDERS: dict[str, Any] = {"string": "", "integer": 0, "number": 0, "boolean": False, "array": [],
                                 "object": {}, "null": None}


class McpServerError(EnvUnavailableError):
    """The MCP server cannot be started or reached (a bad command or URL, a server that exits at once)."""


class ToolCall(BaseModel):
    """One tool call of a task's ground truth."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class McpTask(BaseModel):
    """One task of an MCP environment, as a line of its tasks file."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, description="The task id (unique in the file).")
    instruction: str = Field(description="What the agent is asked to do: the opening observation.")
    ground_truth: list[ToolCall] = Field(default_factory=list, description="Calls that do the task, in order "
                                         "(the expert plays them; the task is won when all were answered).")
    answer: str = Field(default="", description="The expert's final answer (`respond`).")


def _problem(error: ValidationError) -> str:
    first = error.errors()[0]
    return f"{'.'.join(map(str, first['loc'])) or 'task'}: {first['msg']}"


def load_tasks(path: str | Path) -> list[McpTask]:
    """The tasks of a JSON file (a list of tasks, or `{"tasks": [...]}`) or a JSONL file (one task a line);
    a bad task is a `BadInputError` naming the file, line (or list index) and field."""
    text = read_user_text(path, "MCP tasks file")
    stripped = text.strip()
    records: list[tuple[str, Any]] = []
    try:
        whole = orjson.loads(stripped) if stripped[:1] in ("[", "{") else None
    except orjson.JSONDecodeError:
        whole = None  # JSONL: each line parsed below
    if isinstance(whole, dict) and isinstance(whole.get("tasks"), list):
        whole = whole["tasks"]
    if isinstance(whole, list):
        records = [(f"{path}: task {index}", item) for index, item in enumerate(whole)]
    elif isinstance(whole, dict):
        records = [(f"{path}:1", whole)]
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append((f"{path}:{number}", orjson.loads(line)))
            except orjson.JSONDecodeError as error:
                raise BadInputError(f"not JSON ({error})", where=f"{path}:{number}") from None
    tasks: list[McpTask] = []
    seen: set[str] = set()
    for where, record in records:
        try:
            task = McpTask.model_validate(record)
        except ValidationError as error:
            raise BadInputError(_problem(error), where=where) from None
        if task.id in seen:
            raise BadInputError(f"task id {task.id!r} appears twice", where=where)
        seen.add(task.id)
        tasks.append(task)
    if not tasks:
        raise BadInputError("no tasks in the file", where=str(path))
    return tasks


def mcp_env_id(server_name: str) -> str:
    """The environment id of an MCP server's episodes: `mcp/<its name>` (the name it gives itself)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", server_name).strip("-") or "server"
    return f"mcp/{slug}"


def _argv(value: str | list[str], what: str) -> list[str]:
    argv = shlex.split(value) if isinstance(value, str) else [str(part) for part in value]
    if not argv:
        raise BadInputError(f"the {what} is empty")
    return argv


def _leaves(error: BaseException) -> list[BaseException]:
    """The errors inside (nested) exception groups, the innermost cause first where one is chained."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def _reason(error: BaseException) -> str:
    """One line saying why a connection failed: the OS error (no such program) before a closed connection."""
    leaves = _leaves(error)
    leaves.sort(key=lambda leaf: not isinstance(leaf, OSError))
    leaf = leaves[0]
    text = str(leaf) or type(leaf).__name__
    return f"{type(leaf).__name__}: {text}" if isinstance(leaf, OSError) else text


def _tool_text(result: Any) -> str:
    """A tool result as the agent reads it: its text content, other content named, else its structured result."""
    parts: list[str] = []
    for item in result.content or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(item.text)
        elif kind == "resource":
            inner = item.resource
            parts.append(getattr(inner, "text", None) or f"[resource {inner.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource link {item.uri}]")
        else:  # image, audio: binary data the agent does not read as text
            parts.append(f"[{kind} {getattr(item, 'mime_type', '')}]".replace(" ]", "]"))
    if not parts and result.structured_content is not None:
        return orjson.dumps(result.structured_content).decode()
    return "\n".join(parts)


class _Session:
    """One MCP session held open by a task on the environment's event loop (the SDK is async; `Env` is not)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, target: Any, errlog: IO[str] | None, timeout: float) -> None:
        from mcp import Client

        self._loop, self._timeout = loop, timeout
        self._client = Client(target, read_timeout_seconds=timeout, cache=None)
        self._errlog = errlog
        self._opened: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._stop = asyncio.Event()  # bound to the loop on first use, in the holder
        self._holder = asyncio.run_coroutine_threadsafe(self._hold(), loop)

    async def _hold(self) -> None:
        try:
            async with self._client as client:
                self._opened.set_result(client)
                await self._stop.wait()
        except BaseException as error:  # noqa: BLE001 - handed to the waiting caller, or ends a broken session
            if not self._opened.done():
                self._opened.set_exception(error)
            if not isinstance(error, Exception):
                raise

    def open(self, connect_timeout: float) -> Any:
        """The connected client (the SDK's errors as raised, TimeoutError when the server never answers)."""
        try:
            return self._opened.result(connect_timeout)
        except concurrent.futures.TimeoutError:
            self.close()
            raise TimeoutError(f"no MCP handshake within {connect_timeout:g} s") from None

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(self._timeout + 5)

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        try:
            self._holder.result(10)
        except concurrent.futures.TimeoutError:
            self._holder.cancel()
        except Exception:  # noqa: BLE001, S110 - a session that broke has nothing left to close
            pass
        if self._errlog is not None:
            self._errlog.close()
            self._errlog = None


class McpEnv(EnvBase):
    """An MCP server's tools as an environment: one MCP session per episode, tasks from a file."""

    name = "mcp"

    def __init__(self, *, command: str | list[str] | None = None, url: str | None = None, tasks: str | None = None,
                 reset: str | list[str] | None = None, server_name: str | None = None, timeout: float = 60.0,
                 connect_timeout: float = 30.0, reset_timeout: float = 120.0) -> None:
        """`command` (a command line, split as a shell would but run without one, or its words) or `url`; `tasks`
        a JSON/JSONL tasks file; `reset` a command run before each episode; `server_name` the name in the env id
        (default: the name the server gives itself); timeouts in seconds for a call, a handshake and the reset."""
        if (command is None) == (url is None):
            raise BadInputError("an MCP environment needs a server: give a command (stdio) or a url (streamable "
                                "HTTP), not both")
        if url is not None and not re.match(r"^https?://", url):
            raise BadInputError(f"MCP server URL {url!r}: expected http:// or https://")
        self._argv = _argv(command, "MCP server command") if command is not None else None
        self._url = url
        self._reset = _argv(reset, "reset command") if reset is not None else None
        self._timeout, self._connect_timeout, self._reset_timeout = timeout, connect_timeout, reset_timeout
        loaded = load_tasks(tasks) if tasks is not None else [McpTask(id=OPEN_TASK, instruction="")]
        self._tasks = {task.id: task for task in loaded}
        self._loop: asyncio.AbstractEventLoop | None = None  # started with the first session, stopped by close()
        self._thread: threading.Thread | None = None
        self._session: _Session | None = None
        self._fresh = False  # the session opened after the reset command and no episode has used it
        self._episode: dict[str, Any] | None = None
        try:  # the first episode's session, opened now so that a bad server fails here, naming itself
            client = self._fresh_session()
            self._server = {"name": client.server_info.name if client.server_info else "",
                            "version": client.server_info.version if client.server_info else ""}
            self._tools = self._list_tools()
        except BaseException:
            self.close()
            raise
        self.env_id = mcp_env_id(server_name or self._server["name"] or self._where_short())
        if not any(task.instruction for task in loaded):  # the open task's instruction names the server
            self._tasks = {task.id: task.model_copy(update={"instruction": task.instruction or
                           f"Use the tools of the MCP server {self._server['name'] or self._where_short()}."})
                           for task in loaded}
        self._properties = {tool["function"]["name"]: list(tool["function"]["parameters"].get("properties") or {})
                            for tool in self._tools}

    # -- protocol -----------------------------------------------------------------------------

    def tasks(self) -> list[str]:
        return list(self._tasks)

    def reset(self, task: str | None = None, *, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        """End the last session, run the reset command, open a new session (seed is unused: the server decides).

        The first episode uses the session the constructor opened (after the reset command)."""
        task_id = task if task is not None else next(iter(self._tasks))
        chosen = self._tasks.get(task_id)
        if chosen is None:
            raise UnknownTaskError(f"unknown MCP task {task_id!r}: the tasks file has {len(self._tasks)} "
                                   f"({', '.join(list(self._tasks)[:5])}{', ...' if len(self._tasks) > 5 else ''})")
        self._episode = None
        if not self._fresh:  # else the session opened after the last reset command, and untouched since, serves
            self._fresh_session()
            tools = self._list_tools()
            if tools != self._tools:  # a server may change its tools between sessions: the episode says what it saw
                self._tools = tools
                self._properties = {t["function"]["name"]: list(t["function"]["parameters"].get("properties") or {})
                                    for t in tools}
        self._fresh = False
        self._episode = {"task": chosen, "expert_done": 0, "ground_truth_ok": True, "finished": False}
        info = {"task": chosen.instruction, "env_id": self.env_id, "server": dict(self._server),
                "tools": [dict(tool) for tool in self._tools], "context": []}
        return Observation(text=chosen.instruction), info

    def step(self, action: Action | str) -> Step:
        episode = self._running()
        name, arguments, problem = self._call_of(action)
        if name == RESPOND:
            return self._answer(episode)
        if problem is not None:
            return Step(Observation(text=f"Invalid tool call: {problem}"), 0.0, False, False,
                        {"tool": name, "error": True})
        text, error, extra = self._call(name, arguments)
        task: McpTask = episode["task"]
        done = episode["expert_done"]
        if done < len(task.ground_truth):
            planned = task.ground_truth[done]
            if planned.name == name and _same(planned.arguments, arguments):
                episode["expert_done"] = done + 1
                episode["ground_truth_ok"] = episode["ground_truth_ok"] and not error
        return Step(Observation(text=text), 0.0, False, False, {"tool": name, "error": error, **extra})

    def admissible_actions(self) -> list[str] | None:
        """Every tool with its required arguments filled (known values, enums, defaults, typed placeholders), as
        JSON action objects, then `respond`: what lets the random policy act on any server. Not every call
        succeeds; the list is the same in every episode."""
        if self._episode is None:
            return None
        vocabulary: dict[str, list[Any]] = {}
        for task in self._tasks.values():
            for call in task.ground_truth:
                for key, value in call.arguments.items():
                    known = vocabulary.setdefault(key, [])
                    if value not in known:
                        known.append(value)
        calls: list[str] = []
        for tool in self._tools:
            function = tool["function"]
            parameters = function["parameters"]
            properties = parameters.get("properties") or {}
            required = [key for key in parameters.get("required") or [] if isinstance(key, str)]
            options = {key: _values(key, properties.get(key) or {}, vocabulary) for key in required}
            count = max((len(values) for values in options.values()), default=1)
            for index in range(count):
                arguments = {key: values[index % len(values)] for key, values in options.items()}
                calls.append(_json_call(function["name"], arguments))
        return [*dict.fromkeys(calls), _json_call(RESPOND, {"text": ""})]

    def expert_action(self) -> Action | None:
        """The next ground-truth call not yet made, then `respond` with the task's answer."""
        episode = self._episode
        if episode is None or episode["finished"]:
            return None
        task: McpTask = episode["task"]
        if episode["expert_done"] < len(task.ground_truth):
            planned = task.ground_truth[episode["expert_done"]]
            return Action(name=planned.name, arguments=dict(planned.arguments))
        return Action(name=RESPOND, arguments={"text": task.answer})

    def close(self) -> None:
        """End the session and stop the event loop's thread (a later reset starts both again)."""
        self._episode = None
        self._end_session()
        loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            if not thread.is_alive():
                loop.close()

    # -- the server ---------------------------------------------------------------------------

    def _where(self) -> str:
        return f"MCP server command `{shlex.join(self._argv)}`" if self._argv else f"MCP server at {self._url}"

    def _where_short(self) -> str:
        return Path(self._argv[0]).name if self._argv else re.sub(r"^https?://", "", self._url or "").split("/")[0]

    def _fresh_session(self) -> Any:
        """End the last session, run the reset command, open a new session (a new server process for a command)."""
        self._end_session()
        if self._reset is not None:
            self._run_reset()
        client = self._connect()
        self._fresh = True
        return client

    def _connect(self) -> Any:
        errlog: IO[str] | None = None
        if self._argv is not None:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            # The server's stderr goes to a file (quoted when it fails to start), not into the caller's terminal.
            errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115 - the session closes it
            target: Any = stdio_client(StdioServerParameters(command=self._argv[0], args=self._argv[1:]), errlog)
        else:
            target = self._url
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-env", daemon=True)
            self._thread.start()
        session = _Session(self._loop, target, errlog, self._timeout)
        try:
            client = session.open(self._connect_timeout)
        except Exception as error:  # noqa: BLE001 - every way a start fails is reported the same way
            said = ""
            if errlog is not None and not errlog.closed:
                errlog.seek(0)
                lines = [line.strip() for line in errlog.read().splitlines() if line.strip()]
                tail = " | ".join(lines[-_STDERR_LINES:])[-_STDERR_TAIL:]
                said = f"; the last lines it wrote on stderr: {tail}" if tail else ""
            session.close()
            raise McpServerError(f"cannot start the {self._where()}: {_reason(error)}{said}") from None
        self._session = session
        self._client = client
        return client

    def _end_session(self) -> None:
        self._fresh = False
        if self._session is not None:
            session, self._session = self._session, None
            session.close()

    def _list_tools(self) -> list[dict[str, Any]]:
        """The server's tools (every page of `tools/list`) as OpenAI function schemas, in the server's order."""
        assert self._session is not None
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(100):
            page = self._session.run(self._client.list_tools(cursor=cursor))
            for tool in page.tools:
                parameters = dict(tool.input_schema or {}) or {"type": "object", "properties": {}}
                tools.append({"type": "function", "function": {"name": tool.name, "description": tool.description
                                                               or "", "parameters": parameters}})
            cursor = page.next_cursor
            if cursor is None:
                break
        return orjson.loads(orjson.dumps(tools))  # plain JSON: what the episode stores is what the policy saw

    def _call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool, dict[str, Any]]:
        """One `tools/call`: (the observation, whether it is an error, extra info)."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        assert self._session is not None
        try:
            result = self._session.run(self._client.call_tool(name, arguments))
        except MCPError as error:
            if error.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT):  # no answer at all: the episode cannot go on
                raise EnvError(f"the {self._where()} failed on {name}: {error.message}") from None
            return error.message, True, {"protocol_error": error.code}  # unknown tool, bad parameters: its answer
        except concurrent.futures.TimeoutError:
            raise EnvError(f"the {self._where()} did not answer {name} within {self._timeout:g} s") from None
        except Exception as error:  # noqa: BLE001 - the connection broke: the episode cannot go on
            raise EnvError(f"the {self._where()} failed on {name}: {_reason(error)}") from None
        return _tool_text(result), bool(result.is_error), {}

    def _run_reset(self) -> None:
        assert self._reset is not None
        shown = shlex.join(self._reset)
        try:
            done = subprocess.run(self._reset, capture_output=True, text=True, timeout=self._reset_timeout,  # noqa: S603 - the user's own command, no shell
                                  check=False)
        except FileNotFoundError:
            raise EnvError(f"the reset command `{shown}`: no such program {self._reset[0]!r}") from None
        except subprocess.TimeoutExpired:
            raise EnvError(f"the reset command `{shown}` did not finish within {self._reset_timeout:g} s") from None
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip()[-_STDERR_TAIL:]
            raise EnvError(f"the reset command `{shown}` failed (exit code {done.returncode})"
                           + (f": {said}" if said else ""))

    # -- episodes -----------------------------------------------------------------------------

    def _running(self) -> dict[str, Any]:
        if self._episode is None or self._session is None:
            raise EnvError("call reset() before step()")
        if self._episode["finished"]:
            raise EnvError(f"the episode of {self._episode['task'].id!r} is over (the agent answered); reset()")
        return self._episode

    def _call_of(self, action: Action | str) -> tuple[str, dict[str, Any], str | None]:
        """(tool, arguments, why it cannot be sent) of an action: a named tool with JSON arguments, `name {json}`
        text, or Python call syntax (positional arguments in the schema's order)."""
        parsed = action if isinstance(action, Action) else as_action(action)
        structured = isinstance(action, Action) or action.lstrip().startswith("{")  # not parsed from a command line
        if structured and (parsed.name in self._properties or parsed.name == RESPOND):
            if parsed.parse_error:
                return parsed.name, {}, parsed.parse_error
            if not isinstance(parsed.arguments, dict):
                return parsed.name, {}, "arguments must be a JSON object"
            return parsed.name, dict(parsed.arguments), None
        text = (parsed.raw if parsed.raw is not None else parsed.name).strip()
        head, _, rest = text.partition(" ")
        if rest.strip().startswith("{"):
            try:
                value = orjson.loads(rest)
            except orjson.JSONDecodeError:
                value = None
            if isinstance(value, dict):
                return head, value, None
        call = _parse_call_text(text)
        if call is not None and call.name:
            if call.problem is not None:
                return call.name, {}, call.problem
            names = self._properties.get(call.name, [])
            if len(call.args) > len(names):
                return call.name, {}, f"{call.name} takes at most {len(names)} positional arguments"
            return call.name, {**dict(zip(names, call.args, strict=False)), **call.kwargs}, None
        if isinstance(parsed.arguments, dict) and parsed.name and not parsed.parse_error and " " not in text:
            return parsed.name, dict(parsed.arguments), None  # a tool the server does not list: it answers
        return parsed.name, {}, f"not a tool call: {text[:200]!r}"

    def _answer(self, episode: dict[str, Any]) -> Step:
        episode["finished"] = True
        task: McpTask = episode["task"]
        info: dict[str, Any] = {"record": False, "context": [], "ground_truth_calls": len(task.ground_truth)}
        if task.ground_truth:
            info["won"] = episode["expert_done"] == len(task.ground_truth) and episode["ground_truth_ok"]
        won = info.get("won")
        return Step(Observation(text=""), 1.0 if won else 0.0, True, False, info)


def _same(left: Any, right: Any) -> bool:
    return orjson.dumps(left, option=orjson.OPT_SORT_KEYS) == orjson.dumps(right, option=orjson.OPT_SORT_KEYS)


def _json_call(name: str, arguments: dict[str, Any]) -> str:
    return orjson.dumps({"name": name, "arguments": arguments}).decode()


def _values(key: str, schema: dict[str, Any], vocabulary: dict[str, list[Any]]) -> list[Any]:
    """Values for one required argument: known ones, else the schema's enum, default or examples, else a value of
    its type (which the server may well refuse: that answer is worth recording too)."""
    for found in (vocabulary.get(key), schema.get("enum"), [schema["default"]] if "default" in schema else None,
                  schema.get("examples")):
        if isinstance(found, list) and found:
            return found[:_VALUES_PER_PARAMETER]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    return [_PLACEHOLDERS.get(kind, "") if isinstance(kind, str) else ""]
