"""Test-time private rehearsal: imagine what a call will do, with the policy's own weights, before making it.

An EnvACE checkpoint both acts (the next call) and rehearses (the tool's response under the
environment prompt). `RehearsalPolicy` uses both roles at test time. Before each committed real
call it proposes an action (greedy), then, within a budget:

- **sequential** (`k`): K imagined steps: rehearse the proposed call's response, add it to an
  imagined history, act again, rehearse again, ...;
- **parallel** (`n`): N sampled first actions, each rehearsed (and continued `depth` steps), in
  batched calls;

condenses what it imagined into a short *rehearsal memory* placed at the end of the current
observation, and acts once more: that action is the one sent to the real environment. The real
history never contains imagined text, so every prompt keeps the layout the model was trained on.
`irreversible_only` spends the budget only when the proposed action's name matches one of the
`irreversible` patterns (delete, remove, transfer, submit, ...); other actions are committed at the
cost of one act.

Prompts are J's training prompts (`worldsmith.envace.data`): the same policy and environment
system prompts, observations built from steps as `transcript_from_episode` builds them from a
recorded episode, chunks restarted as `build_streams` restarts them, so a prompt at test time is
token for token a training prompt (the tests check this). Each rehearse prompt extends its act
prompt (the call appended, then the environment prompt), and the imagined continuations extend the
real context, so on the `hf`/`tiny` backend the key/value prefix cache serves the shared history
and only the new suffix runs. Any `LLM` works; other backends simply recompute.
"""

from __future__ import annotations

import fnmatch
import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from worldsmith.envace.data import (
    HANDOVER_ACTIONS,
    ChatFormat,
    Templates,
    environment_prompt,
    policy_prompt,
    tools_text,
)
from worldsmith.envs.base import Env, as_action
from worldsmith.llm.base import Completion, ContextOverflowError, Message
from worldsmith.traces.model import Action, Observation
from worldsmith.util.text import clip

__all__ = [
    "DEFAULT_IRREVERSIBLE",
    "ImaginedStep",
    "RehearsalConfig",
    "RehearsalPolicy",
    "RehearsalRecord",
    "action_name",
    "condense_memory",
    "is_irreversible",
    "load_checkpoint_llm",
    "templates_for_checkpoint",
]

# Name patterns (fnmatch, case-insensitive) of actions that cannot be taken back.
DEFAULT_IRREVERSIBLE: tuple[str, ...] = (
    "*delete*", "*remove*", "rm", "rmdir", "*transfer*", "*submit*", "*cancel*", "*sell*", "*buy*",
    "*purchase*", "*pay*", "*place_order*", "*book_flight*", "*send*", "*post*",
)
_CALL = re.compile(r"^\s*\[?\s*([A-Za-z_][\w.]*)\s*\(")
MEMORY_HEADER = "Rehearsal (imagined with my own model of the environment, not executed):"


class RehearsalConfig(BaseModel):
    """Budgets and generation settings of test-time rehearsal (k = n = 0: the plain policy)."""

    model_config = ConfigDict(extra="forbid")

    k: int = Field(default=0, ge=0, description="sequential imagined steps before each committed call")
    n: int = Field(default=0, ge=0, description="parallel imagined continuations (sampled) before each call")
    depth: int = Field(default=1, ge=1, description="imagined steps per parallel continuation")
    irreversible_only: bool = Field(default=False, description="rehearse only before irreversible actions")
    irreversible: list[str] = Field(default_factory=lambda: list(DEFAULT_IRREVERSIBLE),
                                    description="fnmatch patterns of irreversible action names")
    max_action_tokens: int = Field(default=48, ge=1)
    max_response_tokens: int = Field(default=96, ge=1)
    sample_temperature: float = Field(default=1.0, gt=0.0, le=5.0, description="temperature of parallel branches")
    memory_chars: int = Field(default=1200, ge=64, description="longest rehearsal memory placed in the context")
    response_chars: int = Field(default=240, ge=16, description="longest imagined response quoted in the memory")
    max_seq_len: int = Field(default=1024, ge=64, description="chunk length of training (a longer history restarts)")
    max_observation_chars: int = Field(default=800, ge=16)
    chunk_reserve: int = Field(default=120, ge=0, description="tokens an exchange adds beyond its observation (action, "
                               "rehearse header, response; 120 is the median on the BFCL sample)")
    seed: int = 0

    @property
    def rehearses(self) -> bool:
        return self.k > 0 or self.n > 0

    def label(self) -> str:
        """A short method name: plain, k2, n4, k2-n4, with -irr when only irreversible actions rehearse."""
        if not self.rehearses:
            return "plain"
        parts = ([f"k{self.k}"] if self.k else []) + ([f"n{self.n}" + (f"d{self.depth}" if self.depth > 1 else "")]
                                                     if self.n else [])
        return "-".join(parts) + ("-irr" if self.irreversible_only else "")


@dataclass
class ImaginedStep:
    """One imagined step: the action, the rehearsed response, its branch (-1: sequential) and depth."""

    action: str
    response: str
    branch: int = -1
    depth: int = 0


@dataclass
class RehearsalRecord:
    """What happened before one committed call: the proposal, what was imagined, what was sent."""

    step: int
    proposed: str
    committed: str
    rehearsed: bool
    reason: str  # "budget 0", "reversible", "rehearsed", "context full", ...
    imagined: list[ImaginedStep] = field(default_factory=list)
    memory: str = ""
    model_calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0

    @property
    def changed(self) -> bool:
        return self.committed != self.proposed

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"changed": self.changed}


def action_name(action: str) -> str:
    """The tool or command an action text names: `rm` for `rm(file_name='a')` or `[rm(...)]`, `go` for `go north`."""
    match = _CALL.match(action)
    if match:
        return match.group(1)
    words = action.split()
    return words[0] if words else ""


def is_irreversible(action: str, patterns: list[str] | tuple[str, ...] = DEFAULT_IRREVERSIBLE) -> bool:
    """Whether an action's name matches one of the irreversible patterns (fnmatch, case-insensitive)."""
    name = action_name(action).lower()
    return bool(name) and any(fnmatch.fnmatchcase(name, pattern.lower()) for pattern in patterns)


def condense_memory(imagined: list[ImaginedStep], *, max_chars: int = 1200, response_chars: int = 240) -> str:
    """The imagined steps as a short text: a chain per branch, each distinct (branch path) once."""
    if not imagined:
        return ""
    lines = [MEMORY_HEADER]
    seen: set[tuple[str, str]] = set()
    branches: dict[int, list[ImaginedStep]] = {}
    for step in imagined:
        branches.setdefault(step.branch, []).append(step)
    for branch, steps in branches.items():
        chain = " | ".join(f"{s.action} -> {clip(s.response, response_chars)}" for s in sorted(steps, key=lambda s: s.depth))
        key = (steps[0].action, chain)
        if key in seen:
            continue
        seen.add(key)
        label = "plan" if branch < 0 else f"option {len(seen)}"
        lines.append(f"- {label}: {chain}")
    return clip("\n".join(lines), max_chars)


def _first_line(text: str) -> str:
    stripped = text.strip()
    return stripped.splitlines()[0].strip() if stripped else ""


def _find_tokenizer(llm: Any) -> Any | None:
    """The tokenizer of an hf/tiny backend, also behind a TrackedLLM wrapper; None for other backends."""
    for candidate in (llm, getattr(llm, "llm", None)):
        tokenizer = getattr(candidate, "tokenizer", None)
        if tokenizer is not None and hasattr(tokenizer, "get_vocab"):
            return tokenizer
    return None


class RehearsalPolicy:
    """A `worldsmith.envs.policies.Policy` that rehearses privately before each committed real call."""

    def __init__(
        self,
        llm: Any,
        config: RehearsalConfig | None = None,
        *,
        templates: Templates | None = None,
        tokenizer: Any | None = None,
        name: str | None = None,
    ) -> None:
        self.llm = llm
        self.config = config or RehearsalConfig()
        self.templates = templates or Templates()
        tokenizer = tokenizer if tokenizer is not None else _find_tokenizer(llm)
        self._format = ChatFormat(tokenizer) if tokenizer is not None else None
        self.name = name or f"envace-{self.config.label()}"
        self.records: list[RehearsalRecord] = []
        self._env_label = "unknown"
        self._task = "(none given)"
        self._tools: list[dict[str, Any]] = []  # shown in the policy prompt (the episode's first tools)
        self._all_tools: list[dict[str, Any]] = []  # shown to the environment role (with later additions)
        self._chunk: list[tuple[str, str]] = []  # (observation, action) of the current chunk
        self._chunk_tokens = 0
        self._last_observation = ""
        self._step = 0

    # ------------------------------------------------------------------ the Policy protocol

    def reset(self, env: Env, observation: Observation, info: dict[str, Any]) -> None:
        """A new episode: the task, tools and environment label as a recorded episode would carry them."""
        self._env_label = str(info.get("env_id") or env.name)
        self._task = str(info.get("task") or "").strip() or "(none given)"
        self._tools = [tool for tool in info.get("tools") or [] if isinstance(tool, dict)]
        self._all_tools = list(self._tools)
        self._chunk, self._chunk_tokens, self._step = [], 0, 0
        self.records = []
        opening = [observation.text] if observation.text.strip() else []
        self._last_observation = self._observation(opening, info, initial=True)

    def act(self, observation: Observation, info: dict[str, Any]) -> Action | None:
        """Propose, rehearse within the budget, commit; None (end) when the model proposes nothing."""
        if self._step > 0:
            if info.get("record", True) is False:  # a hand-over: the user's reply is what came back
                parts: list[str] = []
                self._last_observation = self._observation(parts, info, initial=False)
                response = "\n\n".join(self._user_events(info))
            else:
                response = clip(observation.text or "(nothing)", self.config.max_observation_chars)
                self._last_observation = self._observation([response], info, initial=False)
            if response and self._chunk:
                self._chunk_tokens += self._target_tokens(response)
        text = self._last_observation
        record = self._decide(text)
        self.records.append(record)
        self._step += 1
        if not record.committed:
            return None
        self._append(text, record.committed)
        return as_action(record.committed)

    # ------------------------------------------------------------------ observations and prompts

    def _user_events(self, info: dict[str, Any]) -> list[str]:
        """User and system messages that arrived with a step (the task's own text is not repeated)."""
        out = []
        for event in info.get("context") or []:
            if not isinstance(event, dict):
                continue
            content = str(event.get("content", "")).strip()
            if event.get("role") in ("user", "system") and content and content != self._task:
                out.append(content)
        return out

    def _observation(self, parts: list[str], info: dict[str, Any], *, initial: bool) -> str:
        """The agent's view before its next action, as `transcript_from_episode` writes it."""
        parts = [*parts, *self._user_events(info)]
        if not initial:
            added = [tool for tool in info.get("tools") or [] if isinstance(tool, dict) and tool not in self._all_tools]
            if added:
                self._all_tools.extend(added)
                parts.append("Tools added: " + tools_text(added, "signatures"))
        return clip("\n\n".join(parts) or "(start)", self.config.max_observation_chars)

    def _system(self) -> str:
        return policy_prompt(self.templates, self._env_label, self._task, self._tools)

    def act_messages(self, observation: str, history: list[tuple[str, str]] | None = None) -> list[Message]:
        """System, the chunk's (observation, action) exchanges, then `observation`: the act prompt."""
        messages: list[Message] = [{"role": "system", "content": self._system()}]
        for seen, did in self._chunk if history is None else history:
            messages += [{"role": "user", "content": seen}, {"role": "assistant", "content": did}]
        messages.append({"role": "user", "content": observation})
        return messages

    def rehearse_messages(self, act_messages: list[Message], action: str) -> list[Message]:
        """The act prompt, the action, then the environment prompt for it: the rehearse prompt."""
        tools = self._all_tools or self._tools
        system = environment_prompt(self.templates, self._env_label, self._task, tools, action)
        return [*act_messages, {"role": "assistant", "content": action}, {"role": "system", "content": system}]

    def _target_tokens(self, text: str) -> int:
        return len(self._format.target(text)) if self._format is not None else len(text) // 3 + 2

    def _append(self, observation: str, action: str) -> None:
        """Add a committed exchange to the chunk as a packed training chunk holds it (view, action, header)."""
        fmt = self._format
        tools = self._all_tools or self._tools
        header = environment_prompt(self.templates, self._env_label, self._task, tools, action)
        first = not self._chunk
        if fmt is None:
            size = (len(observation) + len(action) + len(header) + (len(self._system()) if first else 0)) // 3 + 24
        else:
            view = fmt.opening(self._system(), observation) if first else fmt.observation(observation)
            size = len(view) + len(fmt.target(action)) + len(fmt.rehearse_header(header))
        self._chunk.append((observation, action))
        self._chunk_tokens += size

    def _fits(self, observation: str) -> bool:
        """Whether training would have kept this exchange in the current chunk (else the prompt restarts).

        Training starts a new chunk when the exchange (observation, action, rehearse header, response)
        does not fit in `max_seq_len`; before acting only the observation is known, so `chunk_reserve`
        stands for the rest.
        """
        if not self._chunk:
            return True
        fmt = self._format
        view = len(fmt.observation(observation)) if fmt is not None else len(observation) // 3 + 8
        return self._chunk_tokens + view + self.config.chunk_reserve <= self.config.max_seq_len

    # ------------------------------------------------------------------ deciding

    def _generate(self, conversations: list[list[Message]], record: RehearsalRecord, *, max_tokens: int,
                  temperature: float = 0.0, n: int = 1, seed: int | None = None) -> list[list[str]]:
        started = time.perf_counter()
        kwargs: dict[str, Any] = {"max_tokens": max_tokens, "temperature": temperature, "n": n}
        if seed is not None:
            kwargs["seed"] = seed
        results: list[list[Completion]] = self.llm.chat_many(conversations, **kwargs)
        record.latency_s += time.perf_counter() - started
        record.model_calls += len(conversations)
        for completions in results:
            for completion in completions:
                record.prompt_tokens += completion.prompt_tokens
                record.cached_tokens += completion.cached_tokens
                record.completion_tokens += completion.completion_tokens
        return [[completion.text for completion in completions] for completions in results]

    def _decide(self, observation: str) -> RehearsalRecord:
        config = self.config
        if not self._fits(observation):
            self._chunk, self._chunk_tokens = [], 0
        messages = self.act_messages(observation)
        record = RehearsalRecord(step=self._step, proposed="", committed="", rehearsed=False, reason="budget 0")
        [[proposal]] = self._generate([messages], record, max_tokens=config.max_action_tokens)
        proposed = clip(_first_line(proposal), config.max_observation_chars)
        record.proposed = record.committed = proposed
        if not proposed or not config.rehearses:
            record.reason = "no action" if not proposed else "budget 0"
            return record
        if config.irreversible_only and not is_irreversible(proposed, config.irreversible):
            record.reason = "reversible"
            return record
        try:
            if config.k:
                record.imagined += self._sequential(messages, proposed, record)
            if config.n:
                record.imagined += self._parallel(messages, record)
        except ContextOverflowError:
            record.reason = "context full"
        if not record.imagined:
            record.reason = record.reason if record.reason == "context full" else "nothing imagined"
            return record
        record.rehearsed = True
        record.reason = "rehearsed" if record.reason != "context full" else "context full (partial)"
        record.memory = condense_memory(record.imagined, max_chars=config.memory_chars,
                                        response_chars=config.response_chars)
        informed = self.act_messages(observation + "\n\n" + record.memory)
        try:
            [[final]] = self._generate([informed], record, max_tokens=config.max_action_tokens)
        except ContextOverflowError:
            record.reason = "context full (kept the proposal)"
            return record
        record.committed = clip(_first_line(final), config.max_observation_chars) or proposed
        return record

    def _sequential(self, messages: list[Message], action: str, record: RehearsalRecord) -> list[ImaginedStep]:
        """K imagined steps: rehearse the call, continue the imagined history, act again."""
        config = self.config
        steps: list[ImaginedStep] = []
        context = list(messages)
        for depth in range(config.k):
            [[response]] = self._generate([self.rehearse_messages(context, action)], record,
                                          max_tokens=config.max_response_tokens)
            response = response.strip() or "(nothing)"
            steps.append(ImaginedStep(action=action, response=response, branch=-1, depth=depth))
            if depth == config.k - 1 or action_name(action) in HANDOVER_ACTIONS:
                break
            context = [*context, {"role": "assistant", "content": action},
                       {"role": "user", "content": clip(response, config.max_observation_chars)}]
            [[following]] = self._generate([context], record, max_tokens=config.max_action_tokens)
            action = clip(_first_line(following), config.max_observation_chars)
            if not action:
                break
        return steps

    def _parallel(self, messages: list[Message], record: RehearsalRecord) -> list[ImaginedStep]:
        """N sampled first actions, rehearsed (and continued `depth` steps) in batched calls."""
        config = self.config
        [samples] = self._generate([messages], record, max_tokens=config.max_action_tokens,
                                   temperature=config.sample_temperature, n=config.n,
                                   seed=config.seed * 1_000_003 + self._step)
        branches = [(index, list(messages), clip(_first_line(text), config.max_observation_chars))
                    for index, text in enumerate(samples)]
        branches = [branch for branch in branches if branch[2]]
        steps: list[ImaginedStep] = []
        for depth in range(config.depth):
            if not branches:
                break
            responses = self._generate([self.rehearse_messages(context, action) for _, context, action in branches],
                                       record, max_tokens=config.max_response_tokens)
            following: list[tuple[int, list[Message], str]] = []
            for (index, context, action), [response] in zip(branches, responses, strict=True):
                response = response.strip() or "(nothing)"
                steps.append(ImaginedStep(action=action, response=response, branch=index, depth=depth))
                if action_name(action) not in HANDOVER_ACTIONS:
                    following.append((index, [*context, {"role": "assistant", "content": action},
                                              {"role": "user", "content": clip(response, config.max_observation_chars)}],
                                      ""))
            if depth == config.depth - 1 or not following:
                break
            actions = self._generate([context for _, context, _ in following], record,
                                     max_tokens=config.max_action_tokens)
            branches = [(index, context, clip(_first_line(text), config.max_observation_chars))
                        for (index, context, _), [text] in zip(following, actions, strict=True)]
            branches = [branch for branch in branches if branch[2]]
        return steps

    # ------------------------------------------------------------------ usage

    def usage(self) -> dict[str, Any]:
        """Totals of this episode's records: calls, tokens (prompt, cached, generated), time, rehearsals."""
        records = self.records
        return {
            "steps": len(records),
            "rehearsed_steps": sum(record.rehearsed for record in records),
            "changed_steps": sum(record.rehearsed and record.changed for record in records),
            "model_calls": sum(record.model_calls for record in records),
            "prompt_tokens": sum(record.prompt_tokens for record in records),
            "cached_tokens": sum(record.cached_tokens for record in records),
            "completion_tokens": sum(record.completion_tokens for record in records),
            "latency_s": round(sum(record.latency_s for record in records), 6),
        }


# ---------------------------------------------------------------------------------------------
# Checkpoints


def templates_for_checkpoint(checkpoint: str | Path) -> tuple[Templates, dict[str, Any] | None]:
    """The prompt templates a checkpoint was trained with (from its run's `config.json`), and that config.

    A checkpoint lives in `<run>/checkpoints/step-<N>/`; the run's EnvACE config sits in `<run>/`. A model
    folder that is not part of a run (or whose config has no data section) gets the default templates.
    """
    from worldsmith.envace.config import ConfigError, EnvACEConfig

    folder = Path(checkpoint)
    for candidate in (folder / "envace_config.json", folder.parent.parent / "config.json", folder / "config.json"):
        if not candidate.is_file():
            continue
        try:
            raw = json.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if not isinstance(raw, dict) or "data" not in raw or "objective" not in raw:
            continue  # a Hugging Face model config, not a run's
        try:
            config = EnvACEConfig.from_dict(raw, source=str(candidate))
        except ConfigError:
            continue
        return Templates.from_config(config.data), raw
    return Templates(), None


def load_checkpoint_llm(checkpoint: str | Path, *, device: str | None = None, threads: int | None = None,
                        dtype: str | None = None, prefix_cache: int = 16) -> Any:
    """The hf backend over a checkpoint folder (weights + tokenizer), with its key/value prefix cache."""
    from worldsmith.llm.hf import HFLLM

    return HFLLM(Path(checkpoint), device=device, threads=threads, dtype=dtype, prefix_cache=prefix_cache)

