"""A policy that asks a language model for each action: any `LLM` acting in any real environment.

The conversation has the layout the tiny model is trained on (`worldsmith.llm.tiny.agent_messages`):
a system message naming the environment and the task, then observation (user) -> action
(assistant) exchanges. The model's first line is the action; an empty answer ends the episode.
"""

from __future__ import annotations

from typing import Any

from worldsmith.envs.base import Env, as_action
from worldsmith.traces.model import Action, Observation

__all__ = ["LLMPolicy"]

_ADMISSIBLE_SHOWN = 40


class LLMPolicy:
    """Acts with `llm` (any object with the `LLM.chat` method); greedy unless told otherwise."""

    name = "llm"

    def __init__(self, llm: Any, *, max_tokens: int = 48, temperature: float = 0.0, seed: int | None = None,
                 show_admissible: bool = True, history_turns: int = 20) -> None:
        self.llm = llm
        self.max_tokens, self.temperature, self.seed = max_tokens, temperature, seed
        self.show_admissible = show_admissible
        self.history_turns = history_turns
        self._env: Env | None = None
        self._system = ""
        self._exchanges: list[tuple[str, str]] = []
        self._pending: list[str] = []

    def reset(self, env: Env, observation: Observation, info: dict[str, Any]) -> None:
        from worldsmith.llm.tiny import AGENT_SYSTEM

        self._env = env
        self._system = AGENT_SYSTEM.format(env=env.name, task=str(info.get("task") or "(none given)"))
        self._exchanges = []
        self._pending = []

    def _observation_text(self, observation: Observation, info: dict[str, Any]) -> str:
        parts = [*self._pending, observation.text]
        parts += [str(event.get("content", "")) for event in info.get("context") or [] if event.get("role") == "user"]
        if self.show_admissible and self._env is not None:
            admissible = self._env.admissible_actions()
            if admissible:
                shown = ", ".join(admissible[:_ADMISSIBLE_SHOWN])
                more = f" (and {len(admissible) - _ADMISSIBLE_SHOWN} more)" if len(admissible) > _ADMISSIBLE_SHOWN else ""
                parts.append(f"Valid actions: {shown}{more}")
        return "\n\n".join(part for part in parts if part.strip()) or "(start)"

    def act(self, observation: Observation, info: dict[str, Any]) -> Action | None:
        user = self._observation_text(observation, info)
        messages = [{"role": "system", "content": self._system}]
        for seen, did in self._exchanges[-self.history_turns:]:
            messages += [{"role": "user", "content": seen}, {"role": "assistant", "content": did}]
        messages.append({"role": "user", "content": user})
        [completion] = self.llm.chat(messages, max_tokens=self.max_tokens, temperature=self.temperature,
                                     seed=self.seed, stop=["\n"])
        text = completion.text.strip().splitlines()[0].strip() if completion.text.strip() else ""
        self._pending = []
        if not text:
            return None
        self._exchanges.append((user, text))
        return as_action(text)
