"""An LLM judge of predicted observations: five dimensions scored 1-5, parsed strictly, retried, cached.

    judge = open_judge("openai:gpt-4o-mini@https://...", workspace_root)
    verdict = judge.judge(env_id="alfworld/pick", action="open drawer 1", reference=real, prediction=predicted)
    verdict.total      # mean of the valid dimensions mapped to 0-100, None when none is valid

Text metrics miss predictions that are right in substance but worded differently; the judge reads
the reference, the prediction and the recent history. Its prompt depends on the environment family
(text games, tool/JSON APIs, shells): what "format" and "facts" mean differs between them. The reply
must be a JSON object whose five fields are integers 1-5; a field that is not is null (a verdict with
no valid field is retried with the problems named, a bounded number of times, then counted as
invalid). Calls go through the model layer (`open_llm(..., component="judge")`), so a judged
record is never paid for twice and every call is in the call log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from worldsmith.evals.bootstrap import DEFAULT_RESAMPLES, bootstrap_mean
from worldsmith.llm.base import LLM, LLMError, Message
from worldsmith.llm.structured import extract_json
from worldsmith.util.errors import BadInputError
from worldsmith.util.text import clip
from worldsmith.workspace.layout import env_family

__all__ = [
    "DIMENSIONS",
    "FAMILIES",
    "Judge",
    "JudgeVerdict",
    "judge_family",
    "judge_frame",
    "judge_messages",
    "judge_total",
    "open_judge",
    "parse_verdict",
]

DIMENSIONS = ("format", "factuality", "consistency", "realism", "quality")

_RUBRIC = (
    "Score the PREDICTED observation against the REAL one on five dimensions, each an integer from 1 (worst) to "
    "5 (best):\n"
    "- format: {format}\n"
    "- factuality: {factuality}\n"
    "- consistency: does it agree with the history and the action (nothing contradicts what was shown before)?\n"
    "- realism: could this environment really have printed it (no commentary, no invented conventions)?\n"
    "- quality: overall, how well could it stand in for the real observation?\n"
    "Reply with only a JSON object with exactly these integer fields: "
    '{{"format": N, "factuality": N, "consistency": N, "realism": N, "quality": N}}'
)

# family -> (who the environment is, what format means, what the facts are)
FAMILIES: dict[str, tuple[str, str, str]] = {
    "text-game": (
        "a text game (ALFWorld, TextWorld, ScienceWorld): the agent types commands and the game answers in prose",
        "the game's sentence patterns, list punctuation and capitalisation, with nothing added",
        "the same objects, locations, numbers, states (open/closed, held, on/in) and success or failure as the real one",
    ),
    "tool-api": (
        "a tool or JSON API (function calls answered with JSON results or error messages)",
        "valid JSON (or the API's error text) with the same structure and field names",
        "the same field values, list items, ids and error or success status",
    ),
    "shell": (
        "a Unix shell in a terminal: commands run and print output, then the prompt returns",
        "the terminal layout: echoed command, output lines, prompt with the right working directory",
        "the same files, paths, numbers, command output and exit behaviour",
    ),
}
_FAMILY_OF = {"alfworld": "text-game", "textworld": "text-game", "scienceworld": "text-game", "jericho": "text-game",
              "bfcl": "tool-api", "tau": "tool-api", "tau-bench": "tool-api", "api": "tool-api",
              "shell": "shell", "terminal": "shell", "bash": "shell"}


def judge_family(env_id: str | None, reference: str = "") -> str:
    """The prompt family of an environment: by its id's first part, else JSON references are tool APIs."""
    head = env_family(env_id).split(":")[0].lower()
    if head in _FAMILY_OF:
        return _FAMILY_OF[head]
    stripped = reference.lstrip()
    if stripped[:1] in ("{", "["):
        return "tool-api"
    if stripped.startswith(("$", "#")) or "@" in stripped.split("\n", 1)[0][:40]:
        return "shell"
    return "text-game"


_clip = partial(clip, strip=False)  # the judge quotes both answers verbatim: whitespace is evidence


def judge_messages(*, family: str, action: str, reference: str, prediction: str, task: str | None = None,
                   history: Sequence[tuple[str, str]] = (), history_steps: int = 3,
                   item_chars: int = 1500) -> list[Message]:
    """The judge's conversation: the rubric for the family, then the case (recent history, action, both answers)."""
    who, fmt, facts = FAMILIES[family]
    system = f"You evaluate simulators of {who}.\n" + _RUBRIC.format(format=fmt, factuality=f"does it state {facts}?")
    parts = []
    if task:
        parts.append(f"TASK: {_clip(task, 500)}")
    recent = list(history)[-history_steps:] if history_steps > 0 else []
    if recent:
        lines = [f"> {_clip(a, 300)}\n{_clip(o, item_chars)}" for a, o in recent]
        parts.append("RECENT HISTORY:\n" + "\n".join(lines))
    parts += [f"ACTION: {_clip(action, 500)}", f"REAL observation:\n{_clip(reference, item_chars * 2)}",
              f"PREDICTED observation:\n{_clip(prediction, item_chars * 2)}"]
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


def parse_verdict(text: str) -> tuple[dict[str, int | None], list[str]]:
    """The five scores from a reply (None where a field is missing or not an integer 1-5) and the problems."""
    try:
        value = extract_json(text)
    except ValueError as error:
        return dict.fromkeys(DIMENSIONS), [f"no JSON object in the reply ({error})"]
    if not isinstance(value, dict):
        return dict.fromkeys(DIMENSIONS), [f"expected a JSON object, found {type(value).__name__}"]
    scores: dict[str, int | None] = {}
    problems: list[str] = []
    for name in DIMENSIONS:
        raw = value.get(name)
        if isinstance(raw, int) and not isinstance(raw, bool) and 1 <= raw <= 5:
            scores[name] = raw
        else:
            scores[name] = None
            problems.append(f"{name}: {'missing' if name not in value else 'not an integer from 1 to 5'}")
    return scores, problems


def _valid_count(scores: dict[str, int | None]) -> int:
    return sum(value is not None for value in scores.values())


def judge_total(scores: dict[str, int | None]) -> float | None:
    """Mean of the valid dimensions mapped from 1-5 to 0-100; None when no dimension is valid."""
    valid = [v for v in scores.values() if v is not None]
    if not valid:
        return None
    return round((sum(valid) / len(valid) - 1) / 4 * 100, 4)


@dataclass
class JudgeVerdict:
    """One judged prediction: scores (None where invalid), the 0-100 total, and what it cost."""

    scores: dict[str, int | None]
    total: float | None
    family: str
    attempts: int = 0
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    problems: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def valid(self) -> bool:
        return self.total is not None

    def to_json(self) -> dict[str, Any]:
        return {"scores": self.scores, "total": self.total, "family": self.family, "attempts": self.attempts,
                "model_calls": self.model_calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "problems": self.problems, "error": self.error}


class Judge:
    """Scores predictions with `llm` (greedy, so the response cache answers a repeated case)."""

    def __init__(self, llm: LLM, *, retries: int = 2, max_tokens: int = 120, history_steps: int = 3) -> None:
        if retries < 0:
            raise BadInputError(f"retries must be 0 or more, not {retries}")
        self.llm = llm
        self.spec = getattr(llm, "spec", "")
        self.retries = retries
        self.max_tokens = max_tokens
        self.history_steps = history_steps

    def judge(self, *, env_id: str | None, action: str, reference: str, prediction: str, task: str | None = None,
              history: Sequence[tuple[str, str]] = ()) -> JudgeVerdict:
        family = judge_family(env_id, reference)
        conversation = judge_messages(family=family, action=action, reference=reference, prediction=prediction,
                                      task=task, history=history, history_steps=self.history_steps)
        verdict = JudgeVerdict(scores=dict.fromkeys(DIMENSIONS), total=None, family=family)
        for attempt in range(self.retries + 1):
            try:
                [completion, *_] = self.llm.chat(conversation, max_tokens=self.max_tokens, temperature=0.0)
            except LLMError as error:
                verdict.error = f"{type(error).__name__}: {error}"
                break
            verdict.attempts, verdict.model_calls = attempt + 1, verdict.model_calls + 1
            verdict.prompt_tokens += completion.prompt_tokens
            verdict.completion_tokens += completion.completion_tokens
            scores, problems = parse_verdict(completion.text)
            if attempt == 0 or _valid_count(scores) > _valid_count(verdict.scores):  # keep the best reply
                verdict.scores, verdict.problems = scores, problems
            if not problems:
                break
            if attempt < self.retries:  # show the reply and what is wrong with it, once per retry
                conversation = [*conversation, {"role": "assistant", "content": _clip(completion.text, 2000)},
                                {"role": "user", "content": "Not valid: " + "; ".join(problems[:5]) + ". Reply with "
                                 "only the JSON object with the five integer fields (1-5)."}]
        verdict.total = judge_total(verdict.scores)
        return verdict


def open_judge(spec: str, workspace_root: str | Path | None = None, **options: Any) -> Judge:
    """A judge on the model `spec`, through the workspace's response cache and call log (component "judge")."""
    from worldsmith.llm.tracked import open_llm

    return Judge(open_llm(spec, workspace_root, component="judge"), **options)


def judge_frame(records: pd.DataFrame, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> pd.DataFrame:
    """Judge score per method and dimension (1-5): the mean over records with a 95% cluster-bootstrap interval.

    A report carries intervals for `judge_total` only; these per-dimension ones resample episodes like it does
    (`bootstrap_mean`), so that the turns of one trajectory move together. Columns: method, dimension, mean, low,
    high, n.
    """
    columns = ["method", "dimension", "mean", "low", "high", "n"]
    present = [d for d in DIMENSIONS if f"judge_{d}" in records.columns and records[f"judge_{d}"].notna().any()]
    rows: list[dict[str, Any]] = []
    for method, group in records.groupby("method", sort=True) if present else ():
        for dimension in present:
            values = group[["episode_id", f"judge_{dimension}"]].dropna()
            if values.empty:
                continue
            interval = bootstrap_mean(values["episode_id"].tolist(), values[f"judge_{dimension}"].to_numpy(float),
                                      resamples=resamples, seed=seed)
            rows.append({"method": method, "dimension": dimension, "mean": interval.mean, "low": interval.low,
                         "high": interval.high, "n": interval.n})
    return pd.DataFrame(rows, columns=columns)
