"""Structured output: ask for JSON matching a pydantic model, and get a validated object or a typed error.

The schema goes to the backend as `json_schema` (guided decoding where the backend has it: vLLM,
OpenAI-compatible servers). Whatever comes back is parsed and validated here; on failure the
model is shown its output and the validation errors and asked to repair it, a bounded number of
times. Callers never parse raw model text themselves.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from worldsmith.llm.base import LLM, Completion, Message, StructuredOutputError

__all__ = ["chat_structured", "extract_json", "parse_structured", "validation_problems"]

T = TypeVar("T", bound=BaseModel)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def extract_json(text: str) -> Any:
    """The JSON value in a model's text: the whole text, a fenced block, or the first balanced object/array."""
    candidates = [text.strip()]
    candidates += [match.group(1).strip() for match in _FENCE.finditer(text)]
    for opener in ("{", "["):
        start = text.find(opener)
        if start >= 0:
            candidates.append(text[start:])
    decoder_errors = []
    for candidate in candidates:
        if not candidate:
            continue
        try:
            return orjson.loads(candidate)
        except orjson.JSONDecodeError as error:
            decoder_errors.append(str(error))
        # A valid value followed by trailing text: decode the longest valid prefix.
        value = _leading_json(candidate)
        if value is not _NOTHING:
            return value
    raise ValueError("no JSON value found" + (f" ({decoder_errors[0]})" if decoder_errors else ""))


_NOTHING = object()


def _leading_json(text: str) -> Any:
    if text[:1] not in ("{", "["):
        return _NOTHING
    try:
        value, _ = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError:
        return _NOTHING
    return value


def validation_problems(error: ValidationError) -> list[str]:
    """One line per problem, naming the field (`rules.0.template: Field required`)."""
    return [f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in error.errors()]


def parse_structured(model: type[T], text: str) -> tuple[T | None, list[str]]:
    """The model's JSON text as `model`, or None and the problems (what a repair prompt quotes back)."""
    try:
        value = extract_json(text)
    except ValueError as error:
        return None, [str(error)]
    try:
        return model.model_validate(value), []
    except ValidationError as error:
        return None, validation_problems(error)


def chat_structured(
    llm: LLM,
    messages: Sequence[Message],
    model: type[T],
    *,
    retries: int = 2,
    max_tokens: int = 512,
    **params: Any,
) -> tuple[T, list[Completion]]:
    """A validated `model` instance from the LLM, plus every completion it took (for cost accounting).

    Raises `StructuredOutputError` (with the last output and errors) when `retries` repairs fail.
    """
    schema = model.model_json_schema()
    conversation: list[Message] = list(messages)
    used: list[Completion] = []
    errors: list[str] = []
    text = ""
    for attempt in range(retries + 1):
        completion = llm.chat(conversation, max_tokens=max_tokens, json_schema=schema, **params)[0]
        used.append(completion)
        text = completion.text
        value, errors = parse_structured(model, text)
        if value is not None:
            return value, used
        if attempt < retries:
            conversation = [
                *conversation,
                {"role": "assistant", "content": text},
                {"role": "user", "content": (
                    "That answer is not valid. Reply with only a JSON value matching this schema:\n"
                    f"{orjson.dumps(schema).decode()}\nProblems: " + "; ".join(errors[:10])
                )},
            ]
    raise StructuredOutputError(
        f"no valid {model.__name__} after {retries + 1} attempts: " + "; ".join(errors[:5]),
        last_output=text, errors=errors,
    )
