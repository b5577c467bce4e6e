"""Any OpenAI-compatible chat server (OpenAI, a vLLM server, llama.cpp, ...) through the `openai` SDK.

    llm = make_llm("openai:gpt-4o-mini@https://api.openai.com/v1?price_in=0.15&price_out=0.6")
    llm = make_llm("openai:tiny@http://127.0.0.1:8000/v1")  # a local vLLM server needs no key

Options: api_key_env (OPENAI_API_KEY; a local server without a key gets "EMPTY"), timeout (seconds,
60), max_retries (4) with exponential backoff from backoff_s (0.5) up to backoff_max_s (30) on
transient errors (429, 408, 409, 5xx, timeouts, connection errors; Retry-After is honoured),
max_concurrency (8 requests in flight for chat_many), price_in / price_out / price_cached (USD per
million tokens; cached prompt tokens cost price_in unless price_cached is given), json_mode
(json_schema | json_object | none: how a json_schema is sent), json_strict (False), max_tokens_field
(max_tokens; OpenAI's reasoning models need max_completion_tokens), extra_body (a table sent as is,
e.g. vLLM's top_k).

Errors are typed so callers can react: ContextOverflowError (400 with a context-length message),
RefusalError (every choice refused or filtered), TransientLLMError (still failing after retries),
BackendUnavailableError (server unreachable, bad key, unknown model, quota exhausted).
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from email.utils import parsedate_to_datetime
from typing import Any

from worldsmith.llm.base import (
    BackendUnavailableError,
    Completion,
    ContextOverflowError,
    GenerationParams,
    LLMBase,
    LLMError,
    Message,
    RefusalError,
    TransientLLMError,
)
from worldsmith.llm.spec import ModelSpec
from worldsmith.util.errors import BadInputError

__all__ = ["OpenAILLM", "from_spec", "is_context_overflow"]

_OPTIONS = {
    "api_key_env", "timeout", "max_retries", "backoff_s", "backoff_max_s", "max_concurrency", "price_in",
    "price_out", "price_cached", "json_mode", "json_strict", "max_tokens_field", "extra_body",
}
_TRANSIENT_STATUS = {408, 409, 425, 429}
_CONTEXT_MARKERS = (
    "maximum context length",  # OpenAI and vLLM
    "context_length_exceeded",  # OpenAI's error code
    "longer than the maximum model length",  # vLLM's engine
    "exceeds model's maximum context length",  # vLLM's server
    "cannot be greater than max_model_len",  # vLLM's server, max_tokens alone too large
    "context window",
    "prompt is too long",
    "reduce the length of the",
    "too many tokens",
)


def is_context_overflow(message: str) -> bool:
    """Whether an error text says the prompt does not fit the context window (vLLM's and OpenAI's wording)."""
    lowered = message.lower()
    return any(marker in lowered for marker in _CONTEXT_MARKERS)


class _Transient(Exception):
    """One failed attempt worth retrying (internal)."""

    def __init__(self, message: str, *, retry_after: float | None = None, unreachable: bool = False) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.unreachable = unreachable


def _retry_after(headers: Any) -> float | None:
    """Seconds from a Retry-After / retry-after-ms header, if the server sent one."""
    if headers is None:
        return None
    try:
        milliseconds = headers.get("retry-after-ms")
        if milliseconds is not None:
            return max(0.0, float(milliseconds) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _error_text(error: Any) -> str:
    """The server's error message (the SDK's str() adds the status and the whole body)."""
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            code = inner.get("code")
            return f"{inner['message']}" + (f" ({code})" if code else "")
        if isinstance(body.get("message"), str):
            return body["message"]
    return str(getattr(error, "message", None) or error)


class OpenAILLM(LLMBase):
    """Chat completions over HTTP, with retries, a concurrency cap and typed errors."""

    backend = "openai"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        *,
        spec: str = "",
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        backoff_max_s: float = 30.0,
        max_concurrency: int = 8,
        price_in: float = 0.0,
        price_out: float = 0.0,
        price_cached: float | None = None,
        json_mode: str = "json_schema",
        json_strict: bool = False,
        max_tokens_field: str = "max_tokens",
        extra_body: dict[str, Any] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        try:
            import openai
        except ImportError as error:
            raise BackendUnavailableError("the openai package is not installed: pip install 'openai>=1.40'") from error
        if json_mode not in ("json_schema", "json_object", "none"):
            raise BadInputError(f"json_mode must be json_schema, json_object or none, not {json_mode!r}")
        if max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise BadInputError(f"max_tokens_field must be max_tokens or max_completion_tokens, not {max_tokens_field!r}")
        if int(max_concurrency) < 1 or int(max_retries) < 0:
            raise BadInputError("max_concurrency must be at least 1 and max_retries at least 0")
        self.model = model
        self.base_url = base_url
        self.spec = spec or f"openai:{model}" + (f"@{base_url}" if base_url else "")
        key = os.environ.get(api_key_env, "")
        if not key:
            if base_url is None or "api.openai.com" in base_url:
                raise BackendUnavailableError(f"{self.spec}: set the API key in ${api_key_env}")
            key = "EMPTY"  # local servers (vLLM, llama.cpp) accept any key
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.backoff_max_s = float(backoff_max_s)
        self.max_concurrency = int(max_concurrency)
        self.price_in = float(price_in)
        self.price_out = float(price_out)
        self.price_cached = self.price_in if price_cached is None else float(price_cached)
        self.json_mode = json_mode
        self.json_strict = bool(json_strict)
        self.max_tokens_field = max_tokens_field
        self.extra_body = dict(extra_body or {})
        self._sleep = sleep
        self._openai = openai
        # Retries are ours (max_retries=0 in the SDK) so that they are typed, logged and testable.
        self._client = openai.OpenAI(api_key=key, base_url=base_url, timeout=self.timeout, max_retries=0)
        self._lock = threading.Lock()
        self.requests = 0  # HTTP requests sent, retries included
        self.retries = 0

    # -- one request -------------------------------------------------------------------------------

    def request_body(self, messages: list[Message], params: GenerationParams) -> dict[str, Any]:
        """The chat.completions.create arguments for one conversation."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            self.max_tokens_field: params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
        }
        if params.n != 1:
            body["n"] = params.n
        if params.stop:
            body["stop"] = list(params.stop)
        if params.seed is not None:
            body["seed"] = params.seed
        if params.json_schema is not None and self.json_mode == "json_schema":
            schema = {"name": "output", "schema": params.json_schema, "strict": self.json_strict}
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        elif params.json_schema is not None and self.json_mode == "json_object":
            body["response_format"] = {"type": "json_object"}
        if self.extra_body:
            body["extra_body"] = dict(self.extra_body)
        return body

    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry `attempt` (0-based): exponential with jitter, or the server's Retry-After."""
        if retry_after is not None:
            return min(retry_after, self.backoff_max_s)
        base = min(self.backoff_max_s, self.backoff_s * (2**attempt))
        return base * random.uniform(0.5, 1.0)

    def _attempt(self, body: dict[str, Any]) -> Any:
        """One HTTP request; raises _Transient for what a retry may fix and typed errors for the rest."""
        openai = self._openai
        with self._lock:
            self.requests += 1
        try:
            return self._client.chat.completions.create(**body)
        except openai.APITimeoutError as error:
            raise _Transient(f"timed out after {self.timeout:g}s") from error
        except openai.APIConnectionError as error:
            cause = error.__cause__
            unreachable = type(cause).__name__ == "ConnectError" or isinstance(cause, ConnectionRefusedError)
            raise _Transient(f"cannot connect to {self.base_url}: {cause or error}", unreachable=unreachable) from error
        except openai.APIStatusError as error:
            status, text = error.status_code, _error_text(error)
            if status == 429 and "insufficient_quota" in text:
                raise BackendUnavailableError(f"{self.spec}: quota exhausted: {text}") from error
            if status in _TRANSIENT_STATUS or status >= 500:
                raise _Transient(f"HTTP {status}: {text}", retry_after=_retry_after(error.response.headers)) from error
            if is_context_overflow(text):
                raise ContextOverflowError(f"{self.spec}: {text}") from error
            if status in (401, 403):
                raise BackendUnavailableError(f"{self.spec}: HTTP {status} (check ${self.api_key_env}): {text}") from error
            if status == 404:
                raise BackendUnavailableError(f"{self.spec}: HTTP 404 (unknown model or URL): {text}") from error
            raise LLMError(f"{self.spec}: HTTP {status}: {text}") from error

    def _request(self, messages: list[Message], params: GenerationParams) -> list[Completion]:
        """One conversation: retry transient failures with backoff, then turn the response into completions."""
        body = self.request_body(messages, params)
        started = time.perf_counter()
        attempt = 0
        while True:
            try:
                response = self._attempt(body)
                break
            except _Transient as failure:
                if attempt >= self.max_retries:
                    if failure.unreachable:
                        raise BackendUnavailableError(f"{self.spec}: server unreachable: {failure}") from failure
                    raise TransientLLMError(
                        f"{self.spec}: still failing after {attempt + 1} attempt(s): {failure}"
                    ) from failure
                self._sleep(self.backoff(attempt, failure.retry_after))
                attempt += 1
                with self._lock:
                    self.retries += 1
        return self._completions(response, time.perf_counter() - started, attempt + 1)

    def _completions(self, response: Any, latency: float, attempts: int) -> list[Completion]:
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_total = int(getattr(usage, "completion_tokens", 0) or 0)
        details = getattr(usage, "prompt_tokens_details", None)
        cached = int(getattr(details, "cached_tokens", 0) or 0)
        choices = sorted(response.choices or [], key=lambda choice: choice.index)
        if not choices:
            raise LLMError(f"{self.spec}: the server returned no choices")
        # Usage is reported per request: the prompt goes on the first choice and the completion
        # tokens are split evenly, so that sums over completions equal what was billed.
        share, remainder = divmod(completion_total, len(choices))
        out: list[Completion] = []
        refusals: list[str] = []
        for position, choice in enumerate(choices):
            message = choice.message
            refusal = getattr(message, "refusal", None) if message is not None else None
            finish = choice.finish_reason or "stop"
            if refusal or finish == "content_filter":
                refusals.append(refusal or "content filter")
                finish = "refusal" if refusal else finish
            prompt = prompt_tokens if position == 0 else 0
            cached_here = cached if position == 0 else 0
            generated = share + (remainder if position == 0 else 0)
            cost = ((prompt - cached_here) * self.price_in + cached_here * self.price_cached + generated * self.price_out) / 1e6
            extra: dict[str, Any] = {"attempts": attempts, "id": getattr(response, "id", "")}
            if refusal:
                extra["refusal"] = refusal
            if len(choices) > 1:
                extra["completion_tokens_estimated"] = True
            out.append(
                Completion(
                    text=(message.content if message is not None else None) or "",
                    finish_reason=finish,
                    prompt_tokens=prompt,
                    completion_tokens=generated,
                    cached_tokens=cached_here,
                    latency_s=latency,
                    cost_usd=cost,
                    model=getattr(response, "model", None) or self.model,
                    backend=self.backend,
                    extra=extra,
                )
            )
        if len(refusals) == len(choices):
            raise RefusalError(f"{self.spec}: the model refused: {refusals[0]}")
        return out

    # -- the batch ---------------------------------------------------------------------------------

    def generate(self, conversations: list[list[Message]], params: GenerationParams) -> list[list[Completion]]:
        if len(conversations) == 1 or self.max_concurrency == 1:
            return [self._request(messages, params) for messages in conversations]
        workers = min(self.max_concurrency, len(conversations))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openai-llm") as pool:
            futures: list[Future[list[Completion]]] = [
                pool.submit(self._request, messages, params) for messages in conversations
            ]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failed = [future for future in futures if future in done and future.exception() is not None]
            if failed:
                for future in futures:
                    future.cancel()  # those not started yet; running ones finish and are dropped
                raise failed[0].exception()  # type: ignore[misc]
            return [future.result() for future in futures]

    def close(self) -> None:
        self._client.close()


def from_spec(spec: ModelSpec) -> OpenAILLM:
    """The `openai:MODEL@BASE_URL[?options]` factory that `make_llm` calls."""
    unknown = sorted(set(spec.options) - _OPTIONS)
    if unknown:
        raise BadInputError(f"{spec.text}: unknown openai option(s) {', '.join(unknown)} (known: {', '.join(sorted(_OPTIONS))})")
    return OpenAILLM(spec.model, spec.base_url, spec=spec.text, **spec.options)
