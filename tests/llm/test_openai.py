"""OpenAI-compatible backend: retries and error mapping against a scripted in-process HTTP server, then
the real thing against a vLLM OpenAI server on the tiny model (started here, on a free local port)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ports import free_port
from worldsmith.llm import (
    BackendUnavailableError,
    ContextOverflowError,
    LLMError,
    RefusalError,
    TransientLLMError,
    make_llm,
    parse_spec,
)
from worldsmith.llm.openai_backend import OpenAILLM, from_spec, is_context_overflow

USER = [{"role": "user", "content": "look"}]
VLLM_OVERFLOW = (
    "This model's maximum context length is 512 tokens. However, your prompt contains at least 513 input "
    "tokens, which exceeds this limit even without any output tokens. Please reduce the length of the input prompt."
)
OPENAI_OVERFLOW = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130017 tokens. "
    "Please reduce the length of the messages."
)


def reply(
    content: str | None = "ok",
    *,
    finish: str = "stop",
    refusal: str | None = None,
    usage: dict[str, Any] | None = None,
    choices: int = 1,
) -> dict[str, Any]:
    """A chat.completion body as OpenAI and vLLM send it."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-model",
        "choices": [
            {
                "index": index,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish,
            }
            for index in range(choices)
        ],
        "usage": usage or {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    }


def error(message: str, code: str | int | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "BadRequestError", "code": code}}


class FakeServer:
    """A scripted chat-completions server: each request takes the next (status, body, headers, delay) step;
    when the script runs out it echoes the last user message."""

    def __init__(self) -> None:
        self.script: list[tuple[int, dict[str, Any], dict[str, str], float]] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                with fake.lock:
                    fake.requests.append(body)
                    fake.headers.append({key.lower(): value for key, value in self.headers.items()})
                    step = fake.script.pop(0) if fake.script else None
                    fake.in_flight += 1
                    fake.peak_in_flight = max(fake.peak_in_flight, fake.in_flight)
                try:
                    if step is None:
                        step = (200, reply(body["messages"][-1]["content"]), {}, 0.0)
                    status, payload, headers, delay = step
                    time.sleep(delay)
                    data = json.dumps(payload).encode()
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out first
                    pass
                finally:
                    with fake.lock:
                        fake.in_flight -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def then(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None, delay: float = 0.0):
        self.script.append((status, body, headers or {}, delay))
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def openai_fake_server() -> Iterator[FakeServer]:
    server = FakeServer()
    yield server
    server.close()


@pytest.fixture
def openai_sleeps() -> list[float]:
    """Backoff delays the backend asked for (recorded instead of slept)."""
    return []


def fake_llm(server: FakeServer, sleeps: list[float], **options: Any) -> OpenAILLM:
    options.setdefault("max_retries", 3)
    return OpenAILLM("fake-model", server.url, sleep=sleeps.append, **options)


# -- retries ----------------------------------------------------------------------------------------


def test_rate_limit_then_success_retries_after_the_server_delay(openai_fake_server, openai_sleeps) -> None:
    openai_fake_server.then(429, error("Rate limit reached", "rate_limit_exceeded"), {"retry-after": "0.25"})
    openai_fake_server.then(200, reply("hello"))
    llm = fake_llm(openai_fake_server, openai_sleeps)
    [completion] = llm.chat(USER)
    assert completion.text == "hello"
    assert completion.extra["attempts"] == 2
    assert openai_sleeps == [0.25]
    assert len(openai_fake_server.requests) == 2 and llm.retries == 1


def test_server_errors_back_off_exponentially(openai_fake_server, openai_sleeps) -> None:
    for _ in range(3):
        openai_fake_server.then(500, error("internal error"))
    openai_fake_server.then(200, reply("finally"))
    llm = fake_llm(openai_fake_server, openai_sleeps, backoff_s=1.0, backoff_max_s=3.0)
    [completion] = llm.chat(USER)
    assert completion.text == "finally"
    assert len(openai_sleeps) == 3
    for delay, ceiling in zip(openai_sleeps, (1.0, 2.0, 3.0), strict=True):  # capped at backoff_max_s
        assert ceiling / 2 <= delay <= ceiling


def test_persistent_server_error_becomes_transient_error(openai_fake_server, openai_sleeps) -> None:
    for _ in range(5):
        openai_fake_server.then(503, error("overloaded"))
    llm = fake_llm(openai_fake_server, openai_sleeps, max_retries=2)
    with pytest.raises(TransientLLMError, match="after 3 attempt.*HTTP 503.*overloaded"):
        llm.chat(USER)
    assert len(openai_fake_server.requests) == 3


def test_timeout_is_transient(openai_fake_server, openai_sleeps) -> None:
    openai_fake_server.then(200, reply("late"), delay=1.5)
    llm = fake_llm(openai_fake_server, openai_sleeps, timeout=0.3, max_retries=0)
    with pytest.raises(TransientLLMError, match="timed out"):
        llm.chat(USER)


def test_connection_refused_is_unavailable(openai_sleeps) -> None:
    port = free_port()  # nothing listens there
    llm = OpenAILLM("m", f"http://127.0.0.1:{port}/v1", max_retries=1, sleep=openai_sleeps.append)
    with pytest.raises(BackendUnavailableError, match="unreachable"):
        llm.chat(USER)
    assert len(openai_sleeps) == 1


# -- error mapping ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [error(VLLM_OVERFLOW, 400), error(OPENAI_OVERFLOW, "context_length_exceeded")],
    ids=["vllm", "openai"],
)
def test_context_length_400_is_context_overflow(openai_fake_server, openai_sleeps, body) -> None:
    openai_fake_server.then(400, body)
    with pytest.raises(ContextOverflowError, match="maximum context length"):
        fake_llm(openai_fake_server, openai_sleeps).chat(USER)
    assert len(openai_fake_server.requests) == 1 and openai_sleeps == []  # never retried


def test_other_client_errors(openai_fake_server, openai_sleeps) -> None:
    openai_fake_server.then(400, error("temperature must be at most 2"))
    openai_fake_server.then(401, error("Incorrect API key provided"))
    openai_fake_server.then(404, error("The model `nope` does not exist"))
    openai_fake_server.then(429, error("You exceeded your current quota", "insufficient_quota"))
    llm = fake_llm(openai_fake_server, openai_sleeps)
    with pytest.raises(LLMError, match="HTTP 400: temperature") as caught:
        llm.chat(USER)
    assert type(caught.value) is LLMError
    with pytest.raises(BackendUnavailableError, match="OPENAI_API_KEY"):
        llm.chat(USER)
    with pytest.raises(BackendUnavailableError, match="404"):
        llm.chat(USER)
    with pytest.raises(BackendUnavailableError, match="quota"):
        llm.chat(USER)
    assert openai_sleeps == []


def test_refusals(openai_fake_server, openai_sleeps) -> None:
    openai_fake_server.then(200, reply(None, refusal="I can't help with that."))
    openai_fake_server.then(200, reply("", finish="content_filter"))
    partial = reply("fine", choices=2)
    partial["choices"][1]["message"] = {"role": "assistant", "content": None, "refusal": "no"}
    openai_fake_server.then(200, partial)
    llm = fake_llm(openai_fake_server, openai_sleeps)
    with pytest.raises(RefusalError, match="can't help"):
        llm.chat(USER)
    with pytest.raises(RefusalError, match="content filter"):
        llm.chat(USER)
    kept, refused = llm.chat(USER, n=2)  # one choice refused: the other is still worth returning
    assert kept.text == "fine" and refused.finish_reason == "refusal" and refused.extra["refusal"] == "no"


def test_context_overflow_texts() -> None:
    assert is_context_overflow(VLLM_OVERFLOW) and is_context_overflow(OPENAI_OVERFLOW)
    assert is_context_overflow("The decoder prompt (length 900) is longer than the maximum model length of 512.")
    assert is_context_overflow("max_tokens=600 cannot be greater than max_model_len=512.")
    assert not is_context_overflow("temperature must be at most 2")


# -- requests, usage, concurrency -------------------------------------------------------------------


def test_request_body_key_usage_and_cost(openai_fake_server, openai_sleeps, monkeypatch) -> None:
    monkeypatch.setenv("WS_TEST_KEY", "sk-test-123")
    usage = {"prompt_tokens": 1000, "completion_tokens": 200, "prompt_tokens_details": {"cached_tokens": 400}}
    openai_fake_server.then(200, reply('{"a": 1}', usage=usage))
    llm = make_llm(
        f"openai:fake-model@{openai_fake_server.url}?api_key_env=WS_TEST_KEY&price_in=2&price_out=8&price_cached=0.5"
    )
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    [completion] = llm.chat(USER, max_tokens=20, temperature=0.5, top_p=0.9, stop=["\n"], seed=4, json_schema=schema)
    body = openai_fake_server.requests[0]
    assert body["model"] == "fake-model" and body["messages"] == USER
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["stop"], body["seed"]) == (20, 0.5, 0.9, ["\n"], 4)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": schema, "strict": False},
    }
    assert openai_fake_server.headers[0]["authorization"] == "Bearer sk-test-123"
    assert (completion.prompt_tokens, completion.completion_tokens, completion.cached_tokens) == (1000, 200, 400)
    assert completion.cost_usd == pytest.approx((600 * 2 + 400 * 0.5 + 200 * 8) / 1e6)
    assert completion.backend == "openai" and completion.model == "fake-model" and completion.latency_s > 0


def test_n_choices_split_usage_so_sums_match(openai_fake_server, openai_sleeps) -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 7, "total_tokens": 17}
    openai_fake_server.then(200, reply("x", usage=usage, choices=3))
    choices = fake_llm(openai_fake_server, openai_sleeps, price_in=1, price_out=1).chat(USER, n=3)
    assert sum(c.prompt_tokens for c in choices) == 10 and sum(c.completion_tokens for c in choices) == 7
    assert sum(c.cost_usd for c in choices) == pytest.approx(17 / 1e6)
    assert openai_fake_server.requests[0]["n"] == 3


def test_chat_many_keeps_order_and_caps_concurrency(openai_fake_server, openai_sleeps) -> None:
    for _ in range(10):
        openai_fake_server.then(200, reply("slow"), delay=0.15)
    llm = fake_llm(openai_fake_server, openai_sleeps, max_concurrency=3)
    conversations = [[{"role": "user", "content": f"q{index}"}] for index in range(10)]
    results = llm.chat_many(conversations)
    assert openai_fake_server.peak_in_flight == 3  # overlapped, capped (wall time: benchmarks/timeouts.py)
    sent = [request["messages"][0]["content"] for request in openai_fake_server.requests]
    assert sorted(sent) == sorted(f"q{index}" for index in range(10))
    assert [choices[0].text for choices in results] == ["slow"] * 10
    echoed = llm.chat_many(conversations)  # script exhausted: the server echoes each prompt
    assert [choices[0].text for choices in echoed] == [f"q{index}" for index in range(10)]


def test_chat_many_raises_the_failing_conversations_error(openai_fake_server, openai_sleeps) -> None:
    openai_fake_server.then(400, error(OPENAI_OVERFLOW, "context_length_exceeded"))
    llm = fake_llm(openai_fake_server, openai_sleeps, max_concurrency=2)
    with pytest.raises(ContextOverflowError):
        llm.chat_many([USER, USER, USER])


def test_json_modes_and_max_tokens_field(openai_fake_server, openai_sleeps) -> None:
    schema = {"type": "object"}
    fake_llm(openai_fake_server, openai_sleeps, json_mode="json_object").chat(USER, json_schema=schema)
    fake_llm(openai_fake_server, openai_sleeps, json_mode="none", max_tokens_field="max_completion_tokens").chat(
        USER, json_schema=schema, max_tokens=9
    )
    fake_llm(openai_fake_server, openai_sleeps, extra_body={"top_k": 5}).chat(USER)
    first, second, third = openai_fake_server.requests
    assert first["response_format"] == {"type": "json_object"}
    assert "response_format" not in second and second["max_completion_tokens"] == 9 and "max_tokens" not in second
    assert third["top_k"] == 5


def test_spec_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(BackendUnavailableError, match=r"\$OPENAI_API_KEY"):
        make_llm("openai:gpt-4o-mini@https://api.openai.com/v1")
    with pytest.raises(ValueError, match="unknown openai option.*colour"):
        from_spec(parse_spec("openai:m@http://127.0.0.1:1/v1?colour=red"))
    llm = make_llm("openai:m@http://127.0.0.1:1/v1?max_concurrency=2&timeout=5")  # a local server needs no key
    assert (llm.max_concurrency, llm.timeout, llm._client.api_key) == (2, 5.0, "EMPTY")


# -- a real vLLM OpenAI server --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def openai_vllm_server(vllm_required: None, vllm_tiny_model: Path, tmp_path_factory) -> Iterator[str]:
    """`python -m vllm.entrypoints.openai.api_server` on the tiny model; yields its /v1 URL."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("vllm_server") / "server.log"
    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(vllm_tiny_model), "--served-model-name", "tiny",
        "--host", "127.0.0.1", "--port", str(port),
        "--enforce-eager", "--dtype", "float32", "--max-model-len", "512", "--seed", "0",
        "--enable-prefix-caching", "--enable-prompt-tokens-details", "--no-enable-chunked-prefill",
        "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}',
    ]  # fmt: skip
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while True:
            if process.poll() is not None:
                pytest.fail(f"the vLLM server exited ({process.returncode}):\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the vLLM server was not healthy within 240 s:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)  # its own session: the engine subprocess goes too
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@pytest.fixture(scope="module")
def openai_vllm_llm(openai_vllm_server: str) -> Iterator[OpenAILLM]:
    llm = make_llm(f"openai:tiny@{openai_vllm_server}?max_concurrency=4&price_in=1&price_out=2")
    yield llm
    llm.close()


@pytest.mark.integration
def test_vllm_server_chat_usage(openai_vllm_llm: OpenAILLM) -> None:
    [completion] = openai_vllm_llm.chat(USER, max_tokens=8)
    assert completion.model == "tiny" and completion.prompt_tokens > 3
    assert 1 <= completion.completion_tokens <= 8
    assert completion.cost_usd == pytest.approx((completion.prompt_tokens + 2 * completion.completion_tokens) / 1e6)


@pytest.mark.integration
def test_vllm_server_chat_many_seeded(openai_vllm_llm: OpenAILLM) -> None:
    conversations = [[{"role": "user", "content": f"open box {index}"}] for index in range(12)]
    before = openai_vllm_llm.requests
    first = openai_vllm_llm.chat_many(conversations, max_tokens=12, temperature=1.0, seed=5)
    again = openai_vllm_llm.chat_many(conversations, max_tokens=12, temperature=1.0, seed=5)
    assert openai_vllm_llm.requests - before == 24
    assert [c[0].text for c in first] == [c[0].text for c in again]
    assert all(c[0].completion_tokens > 0 for c in first)


@pytest.mark.integration
def test_vllm_server_json_schema(openai_vllm_llm: OpenAILLM, vllm_json_schema: dict) -> None:
    conversations = [[{"role": "user", "content": f"act {index}"}] for index in range(4)]
    for [completion] in openai_vllm_llm.chat_many(
        conversations, max_tokens=48, temperature=1.0, seed=2, json_schema=vllm_json_schema
    ):
        value = json.loads(completion.text)
        assert value["action"] in vllm_json_schema["properties"]["action"]["enum"] and isinstance(value["ok"], bool)


@pytest.mark.integration
def test_vllm_server_cached_tokens_and_overflow(openai_vllm_llm: OpenAILLM) -> None:
    system = {"role": "system", "content": "the room has a door and a box and a lamp. " * 15}
    conversation = [system, {"role": "user", "content": "look"}]
    openai_vllm_llm.chat(conversation, max_tokens=2)
    [again] = openai_vllm_llm.chat(conversation, max_tokens=2)
    assert again.cached_tokens >= 128
    with pytest.raises(ContextOverflowError, match="maximum context length"):
        openai_vllm_llm.chat([{"role": "user", "content": "look " * 700}], max_tokens=4)


@pytest.mark.integration
def test_eight_line_example_runs_against_the_server(openai_vllm_server: str, tmp_path: Path) -> None:
    """examples/chat.py, unchanged, on an openai: spec: completions with usage, then a cache hit."""
    script = Path(__file__).resolve().parents[2] / "examples" / "chat.py"
    result = subprocess.run([sys.executable, str(script), f"openai:tiny@{openai_vllm_server}", str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "usage " in result.stdout and "model calls: 1; second call from the cache: True" in result.stdout
