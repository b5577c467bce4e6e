"""Dual-role samples: one set of weights both acts (the next call) and rehearses (the tool's response).

From any episode (real or simulated) we build, per step,

- **act**: policy system prompt (task, tool signatures) + history -> the next action;
- **rehearse**: the act prompt + that action + an environment system prompt (the called tool's
  schema injected, how invalid calls are answered) -> the environment's response,

each with a role id and labels on the target tokens only (the target's `<|im_end|>` included, as
the model must learn to stop). Because the rehearse prompt *extends* the act prompt, a generator
can rehearse on the act step's key/value cache instead of recomputing the history.

Packing. A `DualRoleStream` holds a whole episode (cut into chunks of `max_seq_len`) as one token
sequence: the agent's view (system, observations as user messages, actions) with every rehearse
step inserted as a *segment* right after its action. Segment tokens see the agent's view up to
their action and their own segment; agent tokens never see a segment; positions inside a segment
continue from its action, so every target is scored exactly as in its own `DualRoleSample`, in one
forward pass per chunk (`segment_attention`). The rollout generator uses the same layout.

Invalid calls: `invalid_call_rate` adds rehearse-only segments for corrupted calls (unknown tool,
unexpected or missing argument) whose targets are the real environment's answers when the
environment can run here (`ErrorOracle`), else a structured `{"error": ...}` response.
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from worldsmith.traces.actions import action_line
from worldsmith.traces.model import ContextEvent, Episode
from worldsmith.util.text import clip
from worldsmith.workspace.layout import env_family

if TYPE_CHECKING:
    from worldsmith.envace.config import DataConfig

__all__ = [
    "DEFAULT_ENVIRONMENT_SYSTEM",
    "DEFAULT_POLICY_SYSTEM",
    "HANDOVER_ACTIONS",
    "IGNORE",
    "ROLE_ACT",
    "ROLE_IDS",
    "ROLE_NONE",
    "ROLE_REHEARSE",
    "ChatFormat",
    "DualRoleSample",
    "DualRoleStream",
    "EnvErrorOracle",
    "ErrorOracle",
    "Exchange",
    "Templates",
    "Transcript",
    "build_samples",
    "build_streams",
    "environment_prompt",
    "error_example",
    "handover_line",
    "parse_call",
    "policy_prompt",
    "tool_signature",
    "tools_text",
    "transcript_from_episode",
]

ROLE_NONE, ROLE_ACT, ROLE_REHEARSE = -1, 0, 1
ROLE_IDS: dict[str, int] = {"act": ROLE_ACT, "rehearse": ROLE_REHEARSE}
IGNORE = -100  # label of a token that is not a target
HANDOVER_ACTIONS = frozenset({"respond"})  # actions that hand the turn back to the user (BFCL)
_HANDOVER_PREFIX = "handover:"  # context-event name the recorder gives a hand-over step

DEFAULT_POLICY_SYSTEM = (
    "You are an agent in the environment {env}.\nTask: {task}\nTools: {tools}\nReply with your next action only."
)
DEFAULT_ENVIRONMENT_SYSTEM = (
    "Now be the environment {env}: reply with exactly what the last action returns.\nTool: {tool}\n"
    "Invalid calls get errors like: {error_example}"
)
_ERROR_EXAMPLES = {"bfcl": "Error during execution: name 'x' is not defined"}
_JSON_ERROR_EXAMPLE = '{"error": "unknown tool \'x\'"}'


# ---------------------------------------------------------------------------------------------
# Prompts


@dataclass(frozen=True)
class Templates:
    """The two role prompts and how much of the tool schemas the policy prompt shows."""

    policy_system: str = DEFAULT_POLICY_SYSTEM
    environment_system: str = DEFAULT_ENVIRONMENT_SYSTEM
    tool_detail: Literal["names", "signatures", "full"] = "signatures"

    @classmethod
    def from_config(cls, data: DataConfig) -> Templates:
        return cls(
            policy_system=data.templates.policy_system or DEFAULT_POLICY_SYSTEM,
            environment_system=data.templates.environment_system or DEFAULT_ENVIRONMENT_SYSTEM,
            tool_detail=data.tool_detail,
        )


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    inner = tool.get("function")
    return inner if isinstance(inner, dict) else tool


def _description(text: str) -> str:
    """The tool's own sentence (BFCL prefixes every description with its class's blurb)."""
    marker = "Tool description: "
    if marker in text:
        text = text.split(marker, 1)[1]
    text = " ".join(text.split())
    end = text.find(". ")
    return text[: end + 1] if end >= 0 else text


def tool_signature(tool: dict[str, Any], detail: Literal["names", "signatures", "full"] = "signatures") -> str:
    """One tool as text: `name`, `name(a, b?)` or `name(a: string, b?: integer) - what it does`."""
    function = _function(tool)
    name = str(function.get("name", "?"))
    if detail == "names":
        return name
    parameters = function.get("parameters") or {}
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    parts = []
    for key, schema in properties.items():
        mark = "" if key in required else "?"
        kind = schema.get("type") if isinstance(schema, dict) else None
        parts.append(f"{key}{mark}: {kind}" if detail == "full" and kind else f"{key}{mark}")
    signature = f"{name}({', '.join(parts)})"
    if detail == "full" and function.get("description"):
        signature += " - " + _description(str(function["description"]))
    return signature


def tools_text(tools: Sequence[dict[str, Any]], detail: Literal["names", "signatures", "full"] = "signatures") -> str:
    if not tools:
        return "(free text commands)"
    return ("\n" if detail == "full" else "; ").join(tool_signature(tool, detail) for tool in tools)


def error_example(env: str) -> str:
    """How this environment answers an invalid call (shown in the environment prompt)."""
    return _ERROR_EXAMPLES.get(env_family(env), _JSON_ERROR_EXAMPLE)


def policy_prompt(templates: Templates, env: str, task: str, tools: Sequence[dict[str, Any]]) -> str:
    return templates.policy_system.format(env=env, task=task, tools=tools_text(tools, templates.tool_detail))


def environment_prompt(
    templates: Templates, env: str, task: str, tools: Sequence[dict[str, Any]], action: str
) -> str:
    """The rehearse role's system prompt for `action`: the called tool's schema injected."""
    name = parse_call(action)[0]
    known = {str(_function(tool).get("name")): tool for tool in tools}
    if name in known:
        tool = tool_signature(known[name], "full")
    elif name in HANDOVER_ACTIONS:
        tool = f"{name}() - ends the agent's turn; the reply is the user's next message"
    elif tools:
        tool = f"none named {name!r}"
    else:
        tool = name or "(text command)"
    return templates.environment_system.format(
        env=env, task=task, tools=tools_text(tools, templates.tool_detail), tool=tool, error_example=error_example(env)
    )


def parse_call(text: str) -> tuple[str, dict[str, Any] | None]:
    """(name, keyword arguments) of a call written as Python (`cd(folder='x')`), read as data only.

    Arguments are None when the text is no such call (a text command: its first word is the name)
    or an argument is not a literal.
    """
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        node = None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args:
        try:
            return node.func.id, {str(k.arg): ast.literal_eval(k.value) for k in node.keywords if k.arg}
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return node.func.id, None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id, None
    words = text.strip().split(maxsplit=1)
    return (words[0].split("(", 1)[0] if words else ""), None


def handover_line(name: str, said: str = "") -> str:
    """A hand-over step as an action line (`respond()`), what BFCL's env parses as a hand-over."""
    return f"{name}(text={said!r})" if said.strip() else f"{name}()"


# ---------------------------------------------------------------------------------------------
# Episodes -> transcripts


@dataclass(frozen=True)
class Exchange:
    """One step as both roles see it: what the agent saw, what it did, what came back."""

    observation: str  # the agent's view before acting (a user message)
    action: str  # the act target
    response: str | None  # the rehearse target; None: nothing came back (the episode ended)
    turn: int | None  # the episode's turn index; None for a hand-over step
    kind: Literal["tool", "handover"] = "tool"


@dataclass
class Transcript:
    """An episode as exchanges, with what both system prompts need."""

    episode_id: str
    env: str
    task: str
    task_id: str | None
    tools: list[dict[str, Any]]
    exchanges: list[Exchange]
    all_tools: list[dict[str, Any]] = field(default_factory=list)  # including tools added later (miss_func)

    @property
    def actions(self) -> list[str]:
        return [exchange.action for exchange in self.exchanges]



def transcript_from_episode(
    episode: Episode, *, max_observation_chars: int = 800, handovers: bool = True
) -> Transcript:
    """Exchanges of an episode: tool turns, and (if `handovers`) the hand-overs recorded in context."""
    task = (episode.task or "").strip() or "(none given)"
    tools = [tool for tool in episode.initial_info.get("tools") or [] if isinstance(tool, dict)]
    all_tools = list(tools)
    exchanges: list[Exchange] = []
    pending: list[str] = []
    if episode.initial_observation is not None and episode.initial_observation.text.strip():
        pending.append(episode.initial_observation.text)
    open_handover: list[Any] = []  # [observation, action, [user messages]] of a hand-over awaiting its reply

    def close_handover() -> None:
        if open_handover:
            observation, action, replies = open_handover
            reply = "\n\n".join(replies) if replies else None
            exchanges.append(Exchange(observation, action, reply, None, "handover"))
            open_handover.clear()

    def consume(events: Iterable[ContextEvent], extra_info: list[dict[str, Any]]) -> None:
        nonlocal pending
        for event in events:
            if event.name and event.name.startswith(_HANDOVER_PREFIX):
                close_handover()
                if handovers:
                    observation = clip("\n\n".join(pending) or "(start)", max_observation_chars)
                    name = event.name[len(_HANDOVER_PREFIX):]
                    open_handover.extend([observation, handover_line(name, event.content), []])
                pending = []
                continue
            content = event.content.strip()
            if event.role in ("user", "system") and content and content != task:
                pending.append(content)
                if open_handover:
                    open_handover[2].append(content)
        for info in extra_info:  # tools that arrive with a hand-over (BFCL's held-out functions)
            added = [tool for tool in info.get("tools") or [] if isinstance(tool, dict)]
            new = [tool for tool in added if tool not in all_tools]
            if new:
                all_tools.extend(new)
                pending.append("Tools added: " + tools_text(new, "signatures"))
        close_handover()

    for turn in episode.turns:
        consume(turn.context, [item for item in turn.info.get("handover") or [] if isinstance(item, dict)])
        observation = clip("\n\n".join(pending) or "(start)", max_observation_chars)
        response = clip(turn.observation.text or "(nothing)", max_observation_chars)
        exchanges.append(Exchange(observation, clip(action_line(turn.action), max_observation_chars), response,
                                  turn.index, "tool"))
        pending = [response]
    final_info = [item for item in episode.metadata.get("final_handover") or [] if isinstance(item, dict)]
    consume(episode.final_context, final_info)
    return Transcript(
        episode_id=episode.id,
        env=episode.env_id or "unknown",
        task=task,
        task_id=episode.task_id,
        tools=tools,
        exchanges=exchanges,
        all_tools=all_tools,
    )


# ---------------------------------------------------------------------------------------------
# Tokens


class ChatFormat:
    """Token pieces of the ChatML layout the tiny model (and Qwen-style models) use.

    Every piece is tokenized on its own and joined, exactly as a generator joins what it samples
    with what comes next, so training text and generation text never disagree at a boundary.
    """

    def __init__(self, tokenizer: Any) -> None:
        vocab = tokenizer.get_vocab()
        missing = [token for token in ("<|im_start|>", "<|im_end|>") if token not in vocab]
        if missing:
            raise ValueError(f"EnvACE needs a ChatML tokenizer (<|im_start|>/<|im_end|> tokens); this one lacks {missing}")
        self.tokenizer = tokenizer
        self.eos_id = int(vocab["<|im_end|>"])
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad) if isinstance(pad, int) else self.eos_id

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode([i for i in ids if i != self.eos_id], skip_special_tokens=True)

    def opening(self, system: str, observation: str) -> list[int]:
        """System message, the first observation, and the assistant's turn opened."""
        return self.encode(f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{observation}<|im_end|>\n"
                           "<|im_start|>assistant\n")

    def observation(self, text: str) -> list[int]:
        """After an action's `<|im_end|>`: the next observation and the assistant's turn opened."""
        return self.encode(f"\n<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n")

    def rehearse_header(self, environment_system: str) -> list[int]:
        """After an action's `<|im_end|>`: the environment prompt, then the answer's turn opened."""
        return self.encode(f"\n<|im_start|>system\n{environment_system}<|im_end|>\n<|im_start|>assistant\n")

    def target(self, text: str) -> list[int]:
        return [*self.encode(text), self.eos_id]


# ---------------------------------------------------------------------------------------------
# Samples and streams


@dataclass
class DualRoleSample:
    """One target with its whole prompt: `labels` is IGNORE on the prompt, the token id on the target."""

    role: Literal["act", "rehearse"]
    prompt_ids: list[int]
    target_ids: list[int]
    episode_id: str
    turn: int | None  # the episode turn (None: a hand-over step)
    exchange: int  # index of the exchange in the transcript
    invalid: bool = False  # a corrupted call's rehearse sample
    action: str = ""  # the action this target is (act) or answers (rehearse)
    truncated: bool = False  # the target was cut to fit `max_seq_len`: no reference to score a rehearsal against

    @property
    def role_id(self) -> int:
        return ROLE_IDS[self.role]

    @property
    def input_ids(self) -> list[int]:
        return self.prompt_ids + self.target_ids

    @property
    def labels(self) -> list[int]:
        return [IGNORE] * len(self.prompt_ids) + list(self.target_ids)


@dataclass
class DualRoleStream:
    """A packed chunk: tokens with positions, segments (0: the agent's view), labels and role ids."""

    episode_id: str
    chunk: int
    ids: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    segments: list[int] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    roles: list[int] = field(default_factory=list)
    samples: list[DualRoleSample] = field(default_factory=list)  # the same targets, unpacked

    def __len__(self) -> int:
        return len(self.ids)

    def target_tokens(self, role: int) -> int:
        return sum(1 for value in self.roles if value == role)


class _Builder:
    """Appends the agent's view and rehearse segments, keeping the unpacked samples in step."""

    def __init__(self, episode_id: str, chunk: int) -> None:
        self.stream = DualRoleStream(episode_id=episode_id, chunk=chunk)
        self.view: list[int] = []  # the agent's view so far (what an act/rehearse prompt starts with)
        self.position = 0
        self.next_segment = 1

    def agent(self, ids: list[int], role: int = ROLE_NONE) -> None:
        stream = self.stream
        stream.ids += ids
        stream.positions += range(self.position, self.position + len(ids))
        stream.segments += [0] * len(ids)
        stream.labels += list(ids) if role != ROLE_NONE else [IGNORE] * len(ids)
        stream.roles += [role] * len(ids)
        self.view += ids
        self.position += len(ids)

    def segment(self, context: list[int], target: list[int]) -> list[int]:
        """A rehearse segment after the view so far; returns its prompt (view + context)."""
        stream, segment = self.stream, self.next_segment
        self.next_segment += 1
        ids = context + target
        stream.ids += ids
        stream.positions += range(self.position, self.position + len(ids))
        stream.segments += [segment] * len(ids)
        stream.labels += [IGNORE] * len(context) + list(target)
        stream.roles += [ROLE_NONE] * len(context) + [ROLE_REHEARSE] * len(target)
        return self.view + context


class ErrorOracle(Protocol):
    """Answers an invalid call as the real environment would (None: it cannot here)."""

    def error_response(self, transcript: Transcript, call: str) -> str | None: ...


class EnvErrorOracle:
    """Asks a real environment (a fresh episode of the transcript's task) how it answers a call.

    Used only for calls that fail before they run (unknown tool, bad arguments), whose answer
    does not depend on the state, so no prefix needs replaying.
    """

    def __init__(self, env_name: str) -> None:
        from worldsmith.envs import make

        self.env = make(env_name)
        self._task: str | None = None
        self._answers: dict[tuple[str, str], str] = {}

    def error_response(self, transcript: Transcript, call: str) -> str | None:
        task = transcript.task_id
        if not task:
            return None
        key = (task, call)
        if key not in self._answers:
            from worldsmith.envs import EnvError

            try:
                if self._task != task:
                    self.env.reset(task)
                    self._task = task
                self._answers[key] = self.env.step(call).observation.text
            except EnvError:
                self._task = None
                return None
        return self._answers[key]

    def close(self) -> None:
        self.env.close()


def _python_call(name: str, arguments: dict[str, Any]) -> str:
    return f"{name}({', '.join(f'{key}={value!r}' for key, value in arguments.items())})"


def _invalid_calls(exchange: Exchange, tools: Sequence[dict[str, Any]], rng: random.Random) -> tuple[str, str] | None:
    """A corrupted version of a tool call and the reason it fails: (call text, reason)."""
    called, arguments = parse_call(exchange.action)
    if arguments is None or not called:
        return None
    names = {str(_function(tool).get("name")) for tool in tools}
    kinds = ["unknown_tool", "unexpected_argument"] + (["missing_argument"] if arguments else [])
    kind = rng.choice(kinds)
    if kind == "unknown_tool":
        name = next(candidate for candidate in (f"{called}s", f"get_{called}", f"{called}_x")
                    if candidate not in names)
        return _python_call(name, arguments), f"unknown tool {name!r}"
    if kind == "unexpected_argument":
        return _python_call(called, {**arguments, "verbose": True}), "unexpected argument 'verbose'"
    dropped = rng.choice(sorted(arguments))
    arguments.pop(dropped)
    return _python_call(called, arguments), f"missing argument {dropped!r}"


def _episode_rng(seed: int, episode_id: str) -> random.Random:
    digest = hashlib.blake2b(f"{seed}:{episode_id}".encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def _exchange_pieces(
    fmt: ChatFormat, templates: Templates, transcript: Transcript, index: int, first: bool
) -> tuple[list[int], list[int], list[int] | None, list[int] | None]:
    """(observation ids, action target, rehearse header, response target) of one exchange."""
    exchange = transcript.exchanges[index]
    if first:
        system = policy_prompt(templates, transcript.env, transcript.task, transcript.tools)
        observation = fmt.opening(system, exchange.observation)
    else:
        observation = fmt.observation(exchange.observation)
    action = fmt.target(exchange.action)
    if exchange.response is None:
        return observation, action, None, None
    tools = transcript.all_tools or transcript.tools
    header = fmt.rehearse_header(environment_prompt(templates, transcript.env, transcript.task, tools,
                                                    exchange.action))
    return observation, action, header, fmt.target(exchange.response)


def _pack_transcript(
    transcript: Transcript,
    fmt: ChatFormat,
    templates: Templates,
    *,
    max_seq_len: int,
    invalid_call_rate: float = 0.0,
    oracle: ErrorOracle | None = None,
    seed: int = 0,
) -> list[DualRoleStream]:
    rng = _episode_rng(seed, transcript.episode_id)
    streams: list[DualRoleStream] = []
    builder: _Builder | None = None
    tools = transcript.all_tools or transcript.tools
    for index, exchange in enumerate(transcript.exchanges):
        invalid = None
        invalid_call = ""
        if invalid_call_rate and exchange.kind == "tool" and rng.random() < invalid_call_rate:
            corrupted = _invalid_calls(exchange, tools, rng)
            if corrupted is not None:
                call, reason = corrupted
                answer = oracle.error_response(transcript, call) if oracle is not None else None
                answer = answer if answer is not None else json.dumps({"error": reason})
                invalid_header = fmt.rehearse_header(
                    environment_prompt(templates, transcript.env, transcript.task, tools, call))
                invalid = (fmt.encode(call) + [fmt.eos_id] + invalid_header, fmt.target(answer))
                invalid_call = call
        for attempt in range(2):
            first = builder is None
            observation, action, header, response = _exchange_pieces(fmt, templates, transcript, index, first)
            size = len(observation) + len(action) + (len(header) + len(response) if header and response else 0)
            size += sum(len(part) for part in invalid) if invalid else 0
            if builder is not None and len(builder.stream) + size > max_seq_len and attempt == 0:
                streams.append(builder.stream)
                builder = None
                continue
            break
        if builder is None:
            builder = _Builder(transcript.episode_id, len(streams))
        builder.agent(observation)
        stream = builder.stream
        if invalid is not None:
            prompt = builder.segment(*invalid)
            stream.samples.append(DualRoleSample("rehearse", prompt, invalid[1], transcript.episode_id,
                                                 exchange.turn, index, invalid=True, action=invalid_call))
        stream.samples.append(DualRoleSample("act", list(builder.view), action, transcript.episode_id,
                                             exchange.turn, index, action=exchange.action))
        builder.agent(action, ROLE_ACT)
        if header is not None and response is not None:
            room = max(2, max_seq_len - len(stream) - len(header) - len(fmt.observation("")))
            fitted = _fit(response, room, fmt.eos_id)
            prompt = builder.segment(header, fitted)
            stream.samples.append(DualRoleSample("rehearse", prompt, fitted, transcript.episode_id, exchange.turn,
                                                 index, action=exchange.action,
                                                 truncated=len(fitted) < len(response)
                                                 or len(prompt) + len(fitted) > max_seq_len))
    if builder is not None:
        streams.append(builder.stream)
    return streams


def _fit(target: list[int], limit: int, eos_id: int) -> list[int]:
    """A target cut to `limit` tokens, still ending with the end-of-turn token."""
    return target if len(target) <= limit else target[: limit - 1] + [eos_id]


def _transcripts(episodes: Iterable[Episode], config: DataConfig | None) -> list[Transcript]:
    max_chars = config.max_observation_chars if config is not None else 800
    handovers = config.handovers if config is not None else True
    out = []
    for episode in episodes:
        if episode.dialogue_only:  # no tool turn: nothing to act or rehearse (a hand-over alone is no transition)
            continue
        transcript = transcript_from_episode(episode, max_observation_chars=max_chars, handovers=handovers)
        if transcript.exchanges:
            out.append(transcript)
    return out


def build_streams(
    episodes: Iterable[Episode],
    tokenizer: Any,
    config: DataConfig | None = None,
    *,
    seed: int = 0,
    oracle: ErrorOracle | None = None,
) -> list[DualRoleStream]:
    """Packed dual-role chunks of `episodes` (each chunk starts with the system prompt)."""
    fmt = ChatFormat(tokenizer)
    templates = Templates.from_config(config) if config is not None else Templates()
    max_seq_len = config.max_seq_len if config is not None else 1024
    rate = config.invalid_call_rate if config is not None else 0.0
    streams: list[DualRoleStream] = []
    for transcript in _transcripts(episodes, config):
        streams += _pack_transcript(transcript, fmt, templates, max_seq_len=max_seq_len, invalid_call_rate=rate,
                                    oracle=oracle, seed=seed)
    return streams


def build_samples(
    episodes: Iterable[Episode],
    tokenizer: Any,
    config: DataConfig | None = None,
    *,
    seed: int = 0,
    oracle: ErrorOracle | None = None,
) -> list[DualRoleSample]:
    """Every act and rehearse target of `episodes` with its whole prompt (history within its chunk)."""
    return [sample for stream in build_streams(episodes, tokenizer, config, seed=seed, oracle=oracle)
            for sample in stream.samples]
