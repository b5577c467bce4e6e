"""Test-time private rehearsal: prompts equal training prompts, budgets, memory, irreversible-only, prefix reuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from envace_scripted import BFCL_SAMPLE, TINY, ScriptedLLM

from worldsmith.envace.data import Templates, build_samples, transcript_from_episode
from worldsmith.envace.rehearsal import (
    MEMORY_HEADER,
    ImaginedStep,
    RehearsalConfig,
    RehearsalPolicy,
    condense_memory,
    is_irreversible,
    templates_for_checkpoint,
)
from worldsmith.envs import Policy, available, make, record_episode
from worldsmith.llm.tiny import render_chat
from worldsmith.traces import read_traces
from worldsmith.traces.model import Episode

needs_bfcl = pytest.mark.skipif(not available("bfcl"), reason="bfcl-eval is not installed")


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(TINY, local_files_only=True)


@pytest.fixture(scope="module")
def bfcl_episodes() -> list[Episode]:
    return [item for item in read_traces([BFCL_SAMPLE]) if isinstance(item, Episode)]


@pytest.fixture(scope="module")
def bfcl():
    env = make("bfcl")
    yield env
    env.close()


def _replaying(actions: list[str]) -> ScriptedLLM:
    """Acts with the recorded actions in order (real-context acts only: the first of each committed call)."""
    queue = list(actions)
    return ScriptedLLM(act=lambda messages, index: queue.pop(0) if queue else "")


def _ids(tokenizer, messages) -> list[int]:
    return tokenizer(render_chat(messages, add_generation_prompt=True), add_special_tokens=False)["input_ids"]


# ------------------------------------------------------------------------------------------ prompts


@needs_bfcl
def test_act_prompts_in_a_real_bfcl_episode_are_the_training_prompts(tokenizer, bfcl_episodes, bfcl) -> None:
    """Replaying each recorded episode's actions in real BFCL: every act prompt of the first chunk is token for
    token the act sample `build_samples` trains on, and nearly all of the rest (chunk restarts are estimated)."""
    samples = build_samples(bfcl_episodes, tokenizer)
    first_chunk = same = total = 0
    for episode in bfcl_episodes:
        llm = _replaying(transcript_from_episode(episode).actions)
        policy = RehearsalPolicy(llm, RehearsalConfig(), tokenizer=tokenizer)
        replayed = record_episode(bfcl, policy, episode.task_id, max_steps=60)
        assert replayed.success is True, episode.id  # the recorded calls reproduce the episode
        acts = [sample for sample in samples if sample.episode_id == episode.id and sample.role == "act"]
        prompts = [call.messages for call in llm.calls]
        assert len(prompts) == len(acts), episode.id
        in_first = True
        for messages, sample in zip(prompts, acts, strict=True):
            equal = _ids(tokenizer, messages) == sample.prompt_ids
            if len(sample.prompt_ids) < len(acts[0].prompt_ids) or (not equal and in_first):
                in_first = False  # training restarted a chunk here (or we did)
            if in_first:
                assert equal, f"{episode.id}: act prompt {sample.exchange} differs from training"
                first_chunk += 1
            same += equal
            total += 1
    assert first_chunk >= len(bfcl_episodes) * 4
    # the later chunks hang on the estimated restarts (chunk_reserve against the tokenizer's counts): 0.87 with
    # the 1,024-token tiny model's tokenizer, 0.75 with the 4,096-token one's (trained on more traces)
    assert same / total >= 0.7, f"{same}/{total} act prompts equal the training prompts"


@needs_bfcl
def test_rehearse_prompt_extends_the_act_prompt_as_in_training(tokenizer, bfcl_episodes, bfcl) -> None:
    episode = bfcl_episodes[0]
    samples = build_samples([episode], tokenizer)
    recorded = transcript_from_episode(episode).actions
    llm = _replaying([recorded[0], recorded[0]])  # proposal, then the same call after the memory
    policy = RehearsalPolicy(llm, RehearsalConfig(k=1), tokenizer=tokenizer)
    observation, info = bfcl.reset(episode.task_id)
    policy.reset(bfcl, observation, info)
    assert str(policy.act(observation, info).raw) == recorded[0]
    act_call, rehearse_call, final_call = llm.calls
    assert llm.roles() == ["act", "rehearse", "act"]
    act_sample, rehearse_sample = (next(s for s in samples if s.exchange == 0 and s.role == role and not s.invalid)
                                   for role in ("act", "rehearse"))
    assert _ids(tokenizer, act_call.messages) == act_sample.prompt_ids
    assert _ids(tokenizer, rehearse_call.messages) == rehearse_sample.prompt_ids
    assert rehearse_sample.prompt_ids[: len(act_sample.prompt_ids)] == act_sample.prompt_ids
    # the memory goes at the end of the current observation: the final prompt shares everything before it
    assert final_call.messages[:-1] == act_call.messages[:-1]
    assert final_call.messages[-1]["content"].startswith(act_call.messages[-1]["content"])
    assert MEMORY_HEADER in final_call.messages[-1]["content"]


def test_custom_templates_of_the_run_are_used(tmp_path: Path) -> None:
    run = tmp_path / "run"
    checkpoint = run / "checkpoints" / "step-4"
    checkpoint.mkdir(parents=True)
    (checkpoint / "config.json").write_text(json.dumps({"model_type": "llama"}))  # the model's own config
    (run / "config.json").write_text(json.dumps({
        "objective": "joint", "data": {"paths": ["x.jsonl"], "templates": {"policy_system": "AGENT {env} {task} {tools}"}},
    }))
    templates, raw = templates_for_checkpoint(checkpoint)
    assert templates.policy_system == "AGENT {env} {task} {tools}"
    assert raw is not None and raw["objective"] == "joint"
    assert templates_for_checkpoint(TINY) == (Templates(), None)


# ------------------------------------------------------------------------------------------ budgets


class _FakeEnv:
    name = "fake"


def _observation(text: str):
    from worldsmith.traces.model import Observation

    return Observation(text=text)


def _policy(llm: ScriptedLLM, **config) -> RehearsalPolicy:
    policy = RehearsalPolicy(llm, RehearsalConfig(**config))
    policy.reset(_FakeEnv(), _observation("start"), {"task": "tidy the files", "tools": []})  # type: ignore[arg-type]
    return policy


def test_sequential_budget_imagines_k_steps_then_commits_once() -> None:
    llm = ScriptedLLM(act=lambda messages, index: f"step{len(messages)}()",
                      rehearse=lambda messages: f"result of {messages[-2]['content']}")
    policy = _policy(llm, k=3)
    action = policy.act(_observation("start"), {})
    # propose, (rehearse, act) x 2, rehearse, then the committed act with the memory
    assert llm.roles() == ["act", "rehearse", "act", "rehearse", "act", "rehearse", "act"]
    [record] = policy.records
    assert record.rehearsed and record.reason == "rehearsed"
    assert [step.depth for step in record.imagined] == [0, 1, 2]
    assert record.imagined[0].action == record.proposed == "step2()"
    assert record.imagined[1].action == "step4()"  # acted on the imagined history (two more messages)
    assert all(step.response == f"result of {step.action}" for step in record.imagined)
    assert "result of step2()" in record.memory and "plan:" in record.memory
    assert action is not None and action.raw == record.committed
    # the real history holds the real observation only: imagined text never enters it
    llm.calls.clear()
    policy.act(_observation("real answer"), {})
    history = llm.calls[0].messages
    assert [m["content"] for m in history[1:]] == ["start", record.committed, "real answer"]
    assert all(MEMORY_HEADER not in m["content"] for m in history)


def test_parallel_budget_samples_n_branches_in_batched_calls() -> None:
    llm = ScriptedLLM(act=lambda messages, index: f"option{index}()" if MEMORY_HEADER not in messages[-1]["content"]
                      else "chosen()", rehearse=lambda messages: f"ok {messages[-2]['content']}")
    policy = _policy(llm, n=3, depth=2)
    policy.act(_observation("start"), {})
    [record] = policy.records
    # proposal; 3 samples in one call; 3 rehearsals batched; 3 next acts batched; 3 rehearsals batched; final
    assert llm.batches == [1, 1, 3, 3, 3, 1]
    sampled = llm.calls[1].params
    assert sampled.n == 3 and sampled.temperature == 1.0
    assert sorted({step.branch for step in record.imagined}) == [0, 1, 2]
    assert len(record.imagined) == 6 and {step.depth for step in record.imagined} == {0, 1}
    assert record.committed == "chosen()"
    assert record.memory.count("- option") == 3


def test_irreversible_only_rehearses_before_irreversible_calls() -> None:
    plan = iter(["ls()", "rm(file_name='a.txt')", "rm(file_name='a.txt')"])
    llm = ScriptedLLM(act=lambda messages, index: next(plan), rehearse=lambda messages: "removed")
    policy = _policy(llm, k=1, irreversible_only=True)
    policy.act(_observation("start"), {})
    policy.act(_observation("a.txt b.txt"), {})
    first, second = policy.records
    assert (first.rehearsed, first.reason, first.model_calls) == (False, "reversible", 1)
    assert (second.rehearsed, second.reason, second.model_calls) == (True, "rehearsed", 3)
    assert policy.usage()["rehearsed_steps"] == 1
    assert policy.name == "envace-k1-irr"


@pytest.mark.parametrize(("action", "expected"), [
    ("rm(file_name='a')", True), ("delete_file(path='x')", True), ("cancel_booking(booking_id='1')", True),
    ("transfer_funds(amount=3)", True), ("submit", True), ("ls(a=True)", False), ("look", False),
    ("go to kitchen", False), ("", False),
])
def test_irreversible_patterns(action: str, expected: bool) -> None:
    assert is_irreversible(action) is expected


def test_an_empty_proposal_ends_the_episode_and_a_plain_budget_costs_one_call() -> None:
    llm = ScriptedLLM(act=lambda messages, index: "   ")
    policy = _policy(llm, k=2)
    assert policy.act(_observation("start"), {}) is None
    assert policy.records[0].reason == "no action" and llm.roles() == ["act"]
    plain = _policy(ScriptedLLM(act=lambda messages, index: "look"))
    assert plain.act(_observation("start"), {}).name == "look"
    assert plain.records[0].model_calls == 1 and plain.name == "envace-plain"
    assert isinstance(plain, Policy)


def test_memory_keeps_each_distinct_branch_once_and_is_bounded() -> None:
    steps = [ImaginedStep("a()", "x", branch=0), ImaginedStep("a()", "x", branch=1), ImaginedStep("b()", "y" * 500, branch=2)]
    memory = condense_memory(steps, max_chars=200, response_chars=50)
    assert memory.startswith(MEMORY_HEADER)
    assert memory.count("a() -> x") == 1 and "b() ->" in memory
    assert len(memory) <= 200
    assert condense_memory([]) == ""


def test_budget_labels() -> None:
    assert RehearsalConfig().label() == "plain"
    assert RehearsalConfig(k=2, n=4, depth=2, irreversible_only=True).label() == "k2-n4d2-irr"
    with pytest.raises(ValueError):
        RehearsalConfig(k=-1)


# ------------------------------------------------------------------------------------------ the tiny model


@needs_bfcl
def test_tiny_model_rehearses_in_real_bfcl_with_prefix_reuse(bfcl) -> None:
    from worldsmith.envace.rehearsal import load_checkpoint_llm

    llm = load_checkpoint_llm(TINY, threads=1)
    try:
        policy = RehearsalPolicy(llm, RehearsalConfig(k=1, n=2, max_action_tokens=24, max_response_tokens=24))
        episode = record_episode(bfcl, policy, "multi_turn_base_0", max_steps=2)
        assert len(episode.turns) == len(policy.records) == 2
        for record in policy.records:
            assert record.rehearsed
            assert len(record.imagined) == 3  # one sequential step, two parallel branches
            # the rehearse prompts extend the act prompt: the backend served the shared history from its cache
            assert record.cached_tokens > record.prompt_tokens / 2
        stats = llm.prefix_cache_stats
        assert stats.hits > 0 and stats.reused_tokens > 0
        # greedy proposals do not depend on the cache: a cold backend proposes the same first action
        cold = load_checkpoint_llm(TINY, threads=1, prefix_cache=0)
        try:
            again = RehearsalPolicy(cold, RehearsalConfig(max_action_tokens=24))
            observation, info = bfcl.reset("multi_turn_base_0")
            again.reset(bfcl, observation, info)
            again.act(observation, info)
            assert again.records[0].proposed == policy.records[0].proposed
        finally:
            cold.close()
    finally:
        llm.close()
