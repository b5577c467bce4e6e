"""`worldsmith llm ...` as real subprocesses on the bundled tiny model, and the eight-line example script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from worldsmith.llm import default_model_spec

pytestmark = pytest.mark.slow  # runs `python -m worldsmith` in a subprocess per test

REPO = Path(__file__).resolve().parents[2]


def run(*args: str, workspace: Path, code: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(workspace), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "worldsmith", *args], capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode == code, result.stderr + result.stdout
    return result


@pytest.fixture(scope="module")
def tiny() -> str:
    spec = default_model_spec()
    if spec is None:
        pytest.fail("the bundled tiny model is missing: run data_samples/make_tiny_model.py")
    return spec


@pytest.mark.integration
def test_chat_is_cached_logged_and_searchable(tmp_path: Path, tiny: str) -> None:
    first = orjson.loads(run("llm", "chat", "You are in a kitchen. > open fridge", "--max-tokens", "8",
                             "--run", "r1", "--json", workspace=tmp_path).stdout)
    assert first["model"] == tiny and first["model_calls"] == 1
    completion = first["completions"][0]
    assert completion["completion_tokens"] > 0 and completion["prompt_tokens"] > 0 and not completion["cached"]
    again = orjson.loads(run("llm", "chat", "You are in a kitchen. > open fridge", "--max-tokens", "8",
                             "--run", "r1", "--json", workspace=tmp_path).stdout)
    assert again["model_calls"] == 0 and again["completions"][0]["cached"] is True
    assert again["completions"][0]["text"] == completion["text"]
    runs = orjson.loads(run("llm", "runs", "--json", workspace=tmp_path).stdout)["runs"]
    assert runs[0]["run"] == "r1" and runs[0]["calls"] == 2 and runs[0]["cache_hits"] == 1
    calls = orjson.loads(run("llm", "calls", "--search", "fridge", "--json", workspace=tmp_path).stdout)["calls"]
    assert len(calls) == 2 and calls[0]["component"] == "cli"
    models = orjson.loads(run("llm", "models", "--json", workspace=tmp_path).stdout)
    assert models["models"]["default"] == tiny


def test_chat_errors_are_clear(tmp_path: Path) -> None:
    bad = run("llm", "chat", "hi", "--model", "nope", workspace=tmp_path, code=1)
    assert "no model named 'nope'" in bad.stderr
    missing = run("llm", "chat", "hi", "--model", "hf:/no/such/model", workspace=tmp_path, code=3)
    assert "no model folder at /no/such/model" in missing.stderr


@pytest.mark.integration
def test_eight_line_example_runs_on_the_tiny_and_hf_specs(tmp_path: Path, tiny: str) -> None:
    path = tiny.split(":", 1)[1]
    for spec in (tiny, f"hf:{path}"):
        result = subprocess.run([sys.executable, str(REPO / "examples" / "chat.py"), spec, str(tmp_path / spec[:2])],
                                capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        assert result.returncode == 0, result.stderr
        assert "model calls: 1; second call from the cache: True" in result.stdout
        assert "usage " in result.stdout


@pytest.mark.integration
def test_collect_with_the_llm_policy_in_a_real_environment(tmp_path: Path, tiny: str) -> None:
    """The tiny model acting in BFCL's real backends; every call lands in the call log as `policy`."""
    pytest.importorskip("bfcl_eval")
    out = orjson.loads(run("collect", "bfcl", "--tasks", "multi_turn_base_1", "--policy", "llm", "--model", tiny,
                           "--max-steps", "3", "--workers", "0", "--dataset", "bfcl-tiny", "--json",
                           workspace=tmp_path).stdout)
    assert out["work_items"] == 1 and out["ingested"] == 1  # non-expert policies keep every episode
    calls = orjson.loads(run("llm", "calls", "--json", workspace=tmp_path).stdout)["calls"]
    assert calls and all(call["component"] == "policy" for call in calls)
    assert "multi_turn_base_1" not in calls[0]["messages"][0]["content"]  # the task text, not its id
