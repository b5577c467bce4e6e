"""Prompt budgets: the model baselines fit their prompt to the model's context window, never overflowing it."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from toolshop_support import toolshop_book, toolshop_episodes

from worldsmith.llm import LLMBase, PromptBudget, context_window, prompt_budget
from worldsmith.llm.base import Completion, GenerationParams, Message
from worldsmith.sim import DirectPrompting, HistoryItem, TraceRAG, WorldbookPrompting
from worldsmith.sim.prompts import OMITTED_NOTE, PromptContext, fit_simulator_messages
from worldsmith.traces import Action


def _chars(messages: Sequence[Message]) -> int:
    return sum(len(m["content"]) for m in messages)


def _budget(limit: int) -> PromptBudget:
    return PromptBudget(window=limit + 10, reply_tokens=10, count=_chars, counted="estimate")


def _history(n: int, size: int = 100) -> list[HistoryItem]:
    return [HistoryItem(action=Action(name=f"step{i}"), observation=f"obs{i} " + "x" * size) for i in range(n)]


def _fit(limit: int | None, *, history: int = 10, context: PromptContext | None = None, task: str = "do it",
         action: str = "the current action") -> tuple[list[Message], object]:
    return fit_simulator_messages(env="shop", task=task, initial_observation="Hello.", history=_history(history),
                                  action=action, context=context, budget=None if limit is None else _budget(limit))


def test_the_oldest_steps_go_first_and_the_cut_is_recorded() -> None:
    full, fit = _fit(None)
    assert fit.limit is None and not fit.cut and fit.steps_shown == 10
    limit = _chars(full) - 350  # room for all but the oldest four steps
    messages, fit = _fit(limit)
    assert _chars(messages) <= limit and fit.fits and fit.cut
    assert fit.steps_cut_by_tokens == 4 and fit.steps_shown == 6
    shown = [m["content"] for m in messages if m["role"] == "user"]
    assert shown[0] == "step4" and shown[-1] == "the current action"  # newest kept, the action last
    assert OMITTED_NOTE.format(count=4).strip() in messages[0]["content"]
    assert "oldest 4 of 10 history steps" in fit.summary()
    assert fit.to_json()["tokens"] == _chars(messages) and fit.to_json()["cut"] is True


def test_context_goes_from_its_end_after_the_history_and_the_action_never() -> None:
    context = PromptContext(template="\nBOOK:\n{items}", items=tuple(f"line {i} " + "y" * 40 for i in range(10)),
                            joiner="\n", unit="worldbook lines", left_out="({count} more lines left out)")
    full, _ = _fit(None, context=context)
    messages, fit = _fit(_chars(full) - 1250, context=context)  # all but the newest step, and some lines
    assert fit.fits and fit.steps_shown == 1 and 0 < fit.context_cut < 10
    system = messages[0]["content"]
    assert "line 0 " in system and "line 9 " not in system and f"({fit.context_cut} more lines left out)" in system
    assert messages[-1]["content"] == "the current action"
    assert f"{fit.context_cut} of 10 worldbook lines" in fit.summary()


def test_a_prompt_that_cannot_fit_says_so_and_keeps_the_action_whole() -> None:
    action = "a" * 900
    messages, fit = _fit(400, action=action, task="t" * 500)
    assert not fit.fits and messages[-1]["content"] == action
    assert fit.steps_shown == 0 and fit.task_chars_cut == 500
    assert "does not fit" in fit.summary() and "never cut" in fit.summary()


class _Windowless(LLMBase):
    spec = "scripted"

    def __init__(self) -> None:
        self.prompts: list[list[Message]] = []

    def generate(self, conversations: list[list[Message]], params: GenerationParams) -> list[list[Completion]]:
        self.prompts += conversations
        return [[Completion(text="ok", prompt_tokens=1, completion_tokens=1)] for _ in conversations]


def test_a_window_given_for_a_backend_that_cannot_say_is_estimated() -> None:
    llm = _Windowless()
    assert context_window(llm) is None and prompt_budget(llm, reply_tokens=64) is None
    budget = prompt_budget(llm, reply_tokens=64, window=200)
    assert budget is not None and budget.counted == "estimate" and budget.limit == 200 - 50  # a quarter at most
    model = DirectPrompting(llm, context_tokens=200, max_tokens=64)
    model.start("Hello.")
    for step in _history(12):
        model.predict(step.action)
        model.commit()
    prediction = model.predict("look")
    assert prediction.audit.route == "model" and prediction.audit.prompt_fit is not None
    assert prediction.audit.prompt_fit["tokens"] <= 150 and prediction.audit.prompt_fit["steps_cut_by_tokens"] > 0
    assert any("prompt fitted" in note for note in prediction.audit.notes)


@pytest.mark.integration
def test_the_model_baselines_run_a_long_toolshop_conversation_on_the_tiny_model(tiny_llm) -> None:
    """The bundled model's 4,096-token window holds a long toolshop conversation's prompts whole: all three
    answered by the model (no ContextOverflowError fallback), each prompt within the window, direct prompting's
    history not cut at all (cutting is tested above on a small window)."""
    episodes = sorted(toolshop_episodes(), key=lambda e: -sum(len(t.observation.text) for t in e.turns))
    long, then = episodes[0], episodes[1]  # one long conversation: the longest run, then the next one's calls
    book = toolshop_book()
    window = context_window(tiny_llm)
    assert window is not None and window >= 4096
    models = [DirectPrompting(tiny_llm, evidence=book, max_tokens=8), TraceRAG(tiny_llm, book, max_tokens=8),
              WorldbookPrompting(tiny_llm, book, max_tokens=8)]
    for model in models:
        model.start(long)
        for turn in then.turns:
            prediction = model.predict(turn.action)
            assert not any("ContextOverflowError" in note for note in prediction.audit.notes), prediction.audit.notes
            assert prediction.audit.route == "model", (model.name, prediction.audit.notes)
            fit = prediction.audit.prompt_fit
            assert fit is not None and fit["counted"] == "tokenizer" and fit["tokens"] <= fit["limit"] < window
            if model.name == "direct":  # 1,024 tokens never held this history; the others add evidence to it
                assert fit["steps_cut_by_tokens"] == 0, fit
            model.commit()
    assert tiny_llm.model_calls >= len(models)
