"""A log's system prompt and tool schemas are summarised, not cut, to fit the model's window: signatures and first
sentences, then names; first paragraphs and headings, then the opening sentences; before any history goes, and
the audit's `prompt_fit` says what was summarised. On real tool-API logs (toolshop's OpenAI conversations, BFCL)
with the bundled tiny model, whatever its window."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from worldsmith.llm import (
    PromptBudget,
    PromptPreamble,
    context_window,
    prompt_budget,
    summarize_system,
    summarize_tools,
)
from worldsmith.llm.base import Message
from worldsmith.sim import DirectPrompting, HistoryItem
from worldsmith.sim.prompts import PromptFit, episode_preamble, fit_simulator_messages
from worldsmith.traces import Action, Episode, action_line
from worldsmith.traces.importers.openai_chat import OpenAIChatImporter

REPO = Path(__file__).resolve().parents[2]
TOOLSHOP = REPO / "data_samples" / "toolshop" / "conversations.openai.jsonl"
BFCL = REPO / "data_samples" / "bfcl_multi_turn.openai.jsonl"


def _read(path: Path) -> list[Episode]:
    if not path.exists():
        pytest.fail(f"sample missing: {path}")
    return list(OpenAIChatImporter().read(path))


def _chars(messages: Sequence[Message]) -> int:
    return sum(len(m["content"]) for m in messages)


def test_tool_schemas_summarised_to_signatures_then_names() -> None:
    episode = _read(TOOLSHOP)[0]
    tools = episode.metadata["tools"]
    names = [tool["function"]["name"] for tool in tools]
    full, brief, only = (summarize_tools(tools, level) for level in ("full", "brief", "names"))
    assert len(only) < len(brief) < len(full) and summarize_tools(tools, "none") == ""
    assert only == ", ".join(names)
    lines = brief.splitlines()
    assert [line.split("(")[0].removeprefix("- ") for line in lines] == names
    cancel = next(line for line in lines if line.startswith("- cancel_order("))
    assert "order_id: string" in cancel and "reason: string" in cancel and "{" not in brief
    # BFCL opens every description with the same sentences: the first one of its own is kept instead
    bfcl = summarize_tools(_read(BFCL)[0].metadata["tools"], "brief")
    assert "This tool belongs to the Gorilla file system" not in bfcl
    assert "- cd(folder: string): Tool description: Change the current working directory" in bfcl
    with pytest.raises(ValueError, match="brief"):
        summarize_tools(tools, "short")


def test_system_prompt_summarised_to_first_paragraph_and_headings() -> None:
    prompt = (
        "You are a support agent. Be brief.\n\n## Refunds\nRefund only delivered orders. Ask first.\n\n"
        "Never promise dates. Always check the order.\n\nSHIPPING\n\nWe ship in the USA only. Not abroad."
    )
    outline = summarize_system(prompt, "outline")
    assert outline == (
        "You are a support agent. Be brief.\n\n## Refunds\nRefund only delivered orders.\n\n"
        "SHIPPING\nWe ship in the USA only.\n\n(1 more paragraph of the system prompt left out)"
    )
    assert summarize_system(prompt, "first") == "You are a support agent. Be brief."
    assert summarize_system(prompt, "full") == prompt and summarize_system(prompt, "none") == ""
    assert summarize_system("x" * 500, "first") == "x" * 299 + "…"  # one long sentence is clipped, not dropped


def _budget(limit: int) -> PromptBudget:
    return PromptBudget(window=limit + 10, reply_tokens=10, count=_chars, counted="estimate")


def test_the_preamble_is_summarised_before_any_history_goes() -> None:
    episode = _read(TOOLSHOP)[0]
    preamble = episode_preamble(episode)
    assert preamble.system_prompt.startswith("You are the customer-service agent of Toolshop")
    assert len(preamble.tools) == len(episode.metadata["tools"])
    history = [HistoryItem(action=Action(name=f"step{i}"), observation=f"obs{i} " + "x" * 100) for i in range(6)]

    def fit(limit: int | None) -> tuple[list[Message], PromptFit]:
        return fit_simulator_messages(
            env="shop",
            task="help",
            initial_observation="",
            history=history,
            action="get_order {}",
            preamble=preamble,
            budget=None if limit is None else _budget(limit),
        )

    full, _ = fit(None)
    brief = len(preamble.render("full", "brief"))
    # room for everything but the full tool schemas: summarised, every history step kept
    messages, fitted = fit(_chars(full) - len(preamble.render()) + brief + 50)
    assert fitted.fits and fitted.tools_level == "brief" and fitted.system_prompt_level == "full"
    assert fitted.steps_cut_by_tokens == 0 and fitted.summarised and fitted.cut
    assert (
        "signatures and first sentences" in fitted.summary()
        and "- get_order(order_id: string)" in messages[0]["content"]
    )
    # no summary leaves room for the whole history: the most summarised one stays, the oldest steps go
    names = len(preamble.render("first", "names"))
    messages, fitted = fit(_chars(full) - len(preamble.render()) + names - 300)
    assert fitted.fits and (fitted.system_prompt_level, fitted.tools_level) == ("first", "names")
    assert 0 < fitted.steps_cut_by_tokens < 6 and "cancel_order" in messages[0]["content"]
    json = fitted.to_json()
    assert json["tools_level"] == "names" and json["preamble_chars_shown"] == names < json["preamble_chars"]
    # a window too small even for the names: the preamble goes, the action never
    messages, fitted = fit(400)
    assert fitted.tools_level == "none" and messages[-1]["content"] == "get_order {}"
    assert PromptPreamble().steps() == [("full", "full")] and not PromptPreamble().render()


@pytest.mark.integration
@pytest.mark.parametrize("path", [TOOLSHOP, BFCL], ids=["toolshop", "bfcl"])
def test_direct_prompting_runs_real_tool_logs_on_the_tiny_model(tiny_llm, path: Path) -> None:
    """Every turn of the longest conversations answered by the model, within its window (1,024 tokens now; any
    window works): the tool schemas summarised when the full prompt does not fit, before the history is cut."""
    window = context_window(tiny_llm)
    assert window is not None
    model = DirectPrompting(tiny_llm, max_tokens=8)
    budget = prompt_budget(tiny_llm, reply_tokens=8)
    assert budget is not None
    summarised = 0
    for episode in sorted(_read(path), key=lambda e: -len(e.turns))[:2]:
        model.start(episode.model_copy(update={"turns": []}))
        for turn in episode.turns:
            full, _ = fit_simulator_messages(
                env=model.env_id,
                task=model.task,
                history=model.history,
                initial_observation=model.initial_observation,
                action=action_line(turn.action),
                preamble=model.preamble,
            )
            prediction = model.predict(turn.action)
            assert prediction.audit.route == "model", prediction.audit.notes
            fit = prediction.audit.prompt_fit
            assert fit is not None and fit["fits"] and fit["tokens"] <= fit["limit"] < window
            assert fit["tools"] == len(episode.metadata["tools"])
            if budget.count(full) > budget.limit:  # the full prompt overflows: summarised, named in the notes
                assert fit["preamble_chars_shown"] < fit["preamble_chars"]
                assert any("summarised" in note for note in prediction.audit.notes)
                summarised += 1
            if fit["steps_cut_by_tokens"]:  # history went only once the preamble was as short as it gets
                assert fit["tools_level"] in ("names", "none")
            model.commit()
    if window < 2048:  # the 1,024-token model cannot take the full schemas of these logs
        assert summarised > 0
