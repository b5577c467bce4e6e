"""A scripted `LLM` for unit-testing rehearsal logic (what is asked, in which role, how often).

Real components get real tests elsewhere (the tiny model in real BFCL); this one only answers by
rule so the tests can check the control flow: act prompts end with a user message, rehearse
prompts with the environment's system message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from worldsmith.llm.base import Completion, GenerationParams, LLMBase, Message

REPO = Path(__file__).resolve().parents[2]
BFCL_SAMPLE = REPO / "data_samples" / "collected" / "bfcl.jsonl"
TINY = REPO / "data_samples" / "models" / "tiny"


@dataclass
class Call:
    role: str  # "act" | "rehearse"
    messages: list[Message]
    params: GenerationParams


@dataclass
class ScriptedLLM(LLMBase):
    """Answers act prompts with `act(messages, index)` and rehearse prompts with `rehearse(messages)`."""

    act: Callable[[list[Message], int], str]
    rehearse: Callable[[list[Message]], str] = lambda messages: "ok"
    spec: str = "scripted"
    calls: list[Call] = field(default_factory=list)
    batches: list[int] = field(default_factory=list)  # conversations per backend call

    def generate(self, conversations: list[list[Message]], params: GenerationParams) -> list[list[Completion]]:
        self.batches.append(len(conversations))
        out = []
        for messages in conversations:
            role = "rehearse" if messages[-1]["role"] == "system" else "act"
            self.calls.append(Call(role, messages, params))
            if role == "act":
                texts = [self.act(messages, index) for index in range(params.n)]
            else:
                texts = [self.rehearse(messages) for _ in range(params.n)]
            out.append([Completion(text=text, prompt_tokens=10, completion_tokens=2) for text in texts])
        return out

    def roles(self) -> list[str]:
        return [call.role for call in self.calls]
