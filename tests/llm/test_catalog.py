"""The model catalog the Models page and `worldsmith llm` share: rows, one prompt sent and logged, the call log."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from worldsmith.cli.main import main
from worldsmith.llm import BackendSpec, Completion, LLMBase, parse_spec, register_backend
from worldsmith.llm import registry as backend_registry
from worldsmith.llm.catalog import (
    backend_rows,
    call_log_path,
    call_prompt,
    chat_once,
    model_rows,
    open_call_log,
    prompt_messages,
    run_rows,
    workbench_run_id,
)

HERE = __name__


class Echo(LLMBase):
    """Answers every conversation with its last message, reversed."""

    def __init__(self, spec: object) -> None:
        self.spec, self.backend, self.model = "catalogtest:x", "catalogtest", "x"

    def generate(self, conversations, params):
        return [[Completion(text=str(c[-1]["content"])[::-1], prompt_tokens=len(c), completion_tokens=1,
                            latency_s=0.25, model="x", backend="catalogtest") for _ in range(params.n)]
                for c in conversations]


def from_spec(spec: object) -> Echo:
    return Echo(spec)


@pytest.fixture
def echo() -> Iterator[None]:
    register_backend(BackendSpec("catalogtest", f"{HERE}:from_spec", "orjson", "catalogtest:NAME"))
    yield
    backend_registry._REGISTRY.unregister("catalogtest")


def test_rows_of_models_and_backends(echo: None) -> None:
    models = {"a": parse_spec("openai:m@http://h/v1?max_concurrency=4"), "b": parse_spec("catalogtest:y")}
    assert model_rows(models) == [
        {"name": "a", "backend": "openai", "model": "m", "base_url": "http://h/v1", "options": "max_concurrency=4"},
        {"name": "b", "backend": "catalogtest", "model": "y", "base_url": None, "options": ""}]
    rows = backend_rows()
    assert [row["kind"] for row in rows] == ["tiny", "hf", "vllm", "openai", "catalogtest"]  # registration order
    assert rows[-1] == {"kind": "catalogtest", "spec": "catalogtest:NAME", "package": "orjson", "available": True}


def test_prompt_messages_drop_a_blank_system_message() -> None:
    assert prompt_messages("hi", "  ") == [{"role": "user", "content": "hi"}]
    assert prompt_messages("hi", "be brief") == [{"role": "system", "content": "be brief"},
                                                 {"role": "user", "content": "hi"}]


def test_one_prompt_is_cached_logged_and_listed(echo: None, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert open_call_log(tmp_path) is None and not call_log_path(tmp_path).exists()  # reading creates nothing
    reply = chat_once("catalogtest:x", tmp_path, "look", system="sys", component="page", run="r1", max_tokens=4)
    assert reply.run == "r1" and reply.model_calls == 1 and [c.text for c in reply.completions] == ["kool"]
    again = chat_once("catalogtest:x", tmp_path, "look", system="sys", component="page", run="r1", max_tokens=4)
    assert again.model_calls == 0 and again.completions[0].cached
    log = open_call_log(tmp_path)
    assert log is not None and log.path == tmp_path / "llm" / "calls.sqlite"
    [row] = run_rows(log.runs())
    assert (row["run"], row["calls"], row["cached"], row["errors"]) == ("r1", 2, 1, 0)
    assert set(row) >= {"prompt tokens", "completion tokens", "latency s", "cost $", "last"}
    calls = log.calls()
    assert [call_prompt(call) for call in calls] == ["look", "look"] and calls[0].component == "page"
    assert main(["llm", "calls", "--workspace", str(tmp_path)]) == 0
    assert "> 'look'" in capsys.readouterr().out


def test_cli_models_lists_what_the_page_lists(echo: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "models.toml").write_text('[models.e]\nspec = "catalogtest:y"\n')
    assert main(["llm", "models", "--workspace", str(tmp_path), "--json"]) == 0
    listed = orjson.loads(capsys.readouterr().out)
    assert listed["models"]["e"] == "catalogtest:y"
    assert {"name": "e", "backend": "catalogtest", "model": "y", "base_url": None, "options": ""} in listed["configured"]
    assert sorted(listed["backends"], key=lambda b: b["kind"]) == sorted(backend_rows(), key=lambda b: b["kind"])


def test_workbench_run_id_names_the_time() -> None:
    assert workbench_run_id(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "workbench-20260102T030405"
    assert workbench_run_id().startswith("workbench-20")
