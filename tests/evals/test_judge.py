"""The judge: strict parsing, the 0-100 total, family prompts, bounded retries, caching through the model layer.

A scripted backend (canned replies) unit-tests the retry and parsing logic; the tiny model judges for real in
test_run_tiny.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from worldsmith.evals.judge import DIMENSIONS, Judge, judge_family, judge_messages, judge_total, parse_verdict
from worldsmith.llm import Completion, GenerationParams, LLMBase, Message, ResponseCache, TrackedLLM

VALID = '{"format": 5, "factuality": 4, "consistency": 4, "realism": 5, "quality": 3}'


class Scripted(LLMBase):
    """Replies with the next canned text; counts the conversations it was sent."""

    spec = "scripted:judge"

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)
        self.sent: list[list[Message]] = []

    def generate(self, conversations: list[list[Message]], params: GenerationParams) -> list[list[Completion]]:
        out = []
        for conversation in conversations:
            self.sent.append(conversation)
            text = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
            out.append([Completion(text=text, prompt_tokens=100, completion_tokens=20)])
        return out


def test_parse_verdict_is_strict() -> None:
    scores, problems = parse_verdict(f"Here you go: {VALID}")
    assert scores == {"format": 5, "factuality": 4, "consistency": 4, "realism": 5, "quality": 3} and not problems
    scores, problems = parse_verdict('{"format": "4", "factuality": 6, "consistency": true, "realism": 0}')
    assert all(value is None for value in scores.values())
    assert {p.split(":")[0] for p in problems} == set(DIMENSIONS)
    assert "quality: missing" in problems
    scores, problems = parse_verdict("I think it is good")
    assert all(value is None for value in scores.values()) and "no JSON" in problems[0]
    assert parse_verdict("[1, 2, 3]")[1] == ["expected a JSON object, found list"]


def test_total_maps_the_mean_of_valid_dimensions_to_0_100() -> None:
    assert judge_total(dict.fromkeys(DIMENSIONS, 5)) == 100.0
    assert judge_total(dict.fromkeys(DIMENSIONS, 1)) == 0.0
    partial = {**dict.fromkeys(DIMENSIONS), "format": 5, "factuality": 3}
    assert judge_total(partial) == 75.0  # mean 4 -> (4 - 1) / 4 * 100
    assert judge_total(dict.fromkeys(DIMENSIONS)) is None


def test_family_prompts() -> None:
    assert judge_family("alfworld/pick_and_place_simple") == "text-game"
    assert judge_family("textworld/cooking") == "text-game"
    assert judge_family("bfcl/GorillaFileSystem") == "tool-api"
    assert judge_family("shell/csv") == judge_family("terminal") == "shell"
    assert judge_family(None, '{"result": 1}') == "tool-api"
    text = judge_messages(family="tool-api", action="ls()", reference="{}", prediction="{}")[0]["content"]
    assert "valid JSON" in text and "integer" in text
    shell = judge_messages(family="shell", action="pwd", reference="/app", prediction="/app",
                           history=[("cd /app", "")] * 5, history_steps=2)
    assert "working directory" in shell[0]["content"] and shell[1]["content"].count("> cd /app") == 2


def test_retries_are_bounded_and_the_best_reply_is_kept() -> None:
    backend = Scripted(["not json", VALID])
    verdict = Judge(backend, retries=2).judge(env_id="alfworld/x", action="look", reference="a", prediction="b")
    assert verdict.valid and verdict.attempts == 2 and verdict.model_calls == 2
    assert verdict.total == pytest.approx(((5 + 4 + 4 + 5 + 3) / 5 - 1) / 4 * 100)
    assert "Not valid" in backend.sent[1][-1]["content"]  # the retry names the problems

    broken = Scripted(["nope"])
    verdict = Judge(broken, retries=2).judge(env_id="alfworld/x", action="look", reference="a", prediction="b")
    assert not verdict.valid and verdict.total is None and verdict.attempts == 3 and len(broken.sent) == 3
    assert all(value is None for value in verdict.scores.values())

    half = Scripted(['{"format": 4, "factuality": 2}'])
    verdict = Judge(half, retries=1).judge(env_id=None, action="x", reference="a", prediction="b")
    assert verdict.scores["format"] == 4 and verdict.total == pytest.approx(50.0) and verdict.attempts == 2


def test_judged_cases_are_cached_through_the_model_layer(tmp_path: Path) -> None:
    backend = Scripted([VALID])
    tracked = TrackedLLM(backend, cache=ResponseCache(tmp_path / "cache.sqlite"), component="judge")
    judge = Judge(tracked)
    first = judge.judge(env_id="alfworld/x", action="look", reference="a", prediction="b")
    second = judge.judge(env_id="alfworld/x", action="look", reference="a", prediction="b")
    assert first.scores == second.scores and len(backend.sent) == 1 and tracked.model_calls == 1
