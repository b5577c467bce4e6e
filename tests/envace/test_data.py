"""Dual-role samples: masks on targets only, role ids, packed streams equal unpacked samples, invalid calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from envace_support import TINY, bfcl_episodes

from worldsmith.envace.config import ConfigError, DataConfig, EnvACEConfig
from worldsmith.envace.data import (
    IGNORE,
    ROLE_ACT,
    ROLE_REHEARSE,
    ChatFormat,
    EnvErrorOracle,
    build_samples,
    build_streams,
    parse_call,
    tool_signature,
    transcript_from_episode,
)
from worldsmith.envs import available, make

needs_bfcl = pytest.mark.skipif(not available("bfcl"), reason="bfcl-eval is not installed")


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(TINY, local_files_only=True)


@pytest.fixture(scope="module")
def episodes():
    return bfcl_episodes()


def test_transcript_has_tool_steps_and_handovers(episodes) -> None:
    episode = next(e for e in episodes if e.task_id == "multi_turn_base_1")
    transcript = transcript_from_episode(episode)
    tools = [x for x in transcript.exchanges if x.kind == "tool"]
    handovers = [x for x in transcript.exchanges if x.kind == "handover"]
    assert [x.action for x in tools] == [turn.action.raw for turn in episode.turns]
    assert [x.response for x in tools] == [turn.observation.text for turn in episode.turns]
    assert [x.turn for x in tools] == list(range(len(episode.turns)))
    assert len(handovers) == episode.initial_info["turns"]  # one hand-over per user turn
    assert all(x.action == "respond()" for x in handovers)
    assert handovers[-1].response is None  # the last hand-over ends the episode
    # the reply to a hand-over is the next user message, which the agent then sees
    first = transcript.exchanges.index(handovers[0])
    assert handovers[0].response == transcript.exchanges[first + 1].observation
    assert "Go to workspace directory" in handovers[0].response


def test_held_out_tools_arrive_with_their_turn(episodes) -> None:
    episode = next(e for e in episodes if e.task_id == "multi_turn_miss_func_0")
    transcript = transcript_from_episode(episode)
    assert len(transcript.all_tools) > len(transcript.tools)
    assert any(x.observation.startswith(("Tools added:",)) or "Tools added:" in x.observation
               for x in transcript.exchanges)


def test_samples_mask_only_their_targets(episodes, tokenizer) -> None:
    fmt = ChatFormat(tokenizer)
    samples = build_samples(episodes, tokenizer, DataConfig(paths=["x"], max_seq_len=768))
    assert {s.role for s in samples} == {"act", "rehearse"}
    for sample in samples:
        labels = sample.labels
        assert len(labels) == len(sample.input_ids)
        assert all(label == IGNORE for label in labels[: len(sample.prompt_ids)])
        assert labels[len(sample.prompt_ids):] == sample.target_ids
        assert sample.target_ids[-1] == fmt.eos_id  # the model learns to end its turn
        assert sample.role_id == (ROLE_ACT if sample.role == "act" else ROLE_REHEARSE)
        text = fmt.decode(sample.target_ids)
        if sample.role == "act":
            assert text == sample.action
        prompt = tokenizer.decode(sample.prompt_ids)
        assert prompt.endswith("<|im_start|>assistant\n")
        if sample.role == "rehearse":
            assert "Now be the environment" in prompt.rsplit("<|im_start|>system", 1)[1]
    by_turn = {(s.episode_id, s.exchange, s.role): s for s in samples}
    episode = episodes[0]
    first_turn = next(s for s in samples if s.episode_id == episode.id and s.role == "rehearse" and s.turn == 0)
    assert fmt.decode(first_turn.target_ids) == episode.turns[0].observation.text
    # a rehearse prompt extends its act prompt: the history is shared, so generation reuses its cache
    act = by_turn[(first_turn.episode_id, first_turn.exchange, "act")]
    assert first_turn.prompt_ids[: len(act.input_ids)] == act.input_ids


def test_streams_pack_exactly_the_samples(episodes, tokenizer) -> None:
    streams = build_streams(episodes, tokenizer, DataConfig(paths=["x"], max_seq_len=768))
    assert all(len(stream) <= 768 + 400 for stream in streams)  # cut at exchange boundaries
    for stream in streams:
        assert len(stream.ids) == len(stream.positions) == len(stream.segments) == len(stream.labels)
        targets = [label for label, role in zip(stream.labels, stream.roles, strict=True) if role != -1]
        assert targets == [token for sample in stream.samples for token in sample.target_ids]
        roles = [role for role in stream.roles if role != -1]
        assert roles == [s.role_id for s in stream.samples for _ in s.target_ids]
        assert all(label == IGNORE for label, role in zip(stream.labels, stream.roles, strict=True) if role == -1)
        assert stream.segments[0] == 0 and max(stream.positions) < len(stream.ids)


def test_packed_forward_scores_every_target_as_its_own_sample(episodes, tokenizer) -> None:
    import torch

    from worldsmith.envace.modeling import collate_streams, load_policy, target_logprobs

    model, _ = load_policy(TINY, device="cpu")
    model.eval()
    streams = build_streams(episodes[:1], tokenizer, DataConfig(paths=["x"], max_seq_len=512, invalid_call_rate=0.5))
    streams = streams[:2]
    with torch.no_grad():
        packed = target_logprobs(model, collate_streams(streams, 0, "cpu")).tolist()
        single = []
        for sample in (s for stream in streams for s in stream.samples):
            logits = model(input_ids=torch.tensor([sample.input_ids])).logits[0].float()
            logp = torch.log_softmax(logits, -1)
            start = len(sample.prompt_ids)
            single += [float(logp[start + i - 1, token]) for i, token in enumerate(sample.target_ids)]
    assert len(packed) == len(single) > 50
    assert max(abs(a - b) for a, b in zip(packed, single, strict=True)) < 1e-4


@needs_bfcl
def test_invalid_calls_are_answered_by_the_real_environment(episodes, tokenizer) -> None:
    config = DataConfig(paths=["x"], max_seq_len=768, invalid_call_rate=1.0)
    oracle = EnvErrorOracle("bfcl")
    try:
        samples = build_samples(episodes[:2], tokenizer, config, oracle=oracle)
    finally:
        oracle.close()
    fmt = ChatFormat(tokenizer)
    invalid = [s for s in samples if s.invalid]
    assert len(invalid) >= 5
    kinds = set()
    env = make("bfcl")
    by_id = {e.id: e for e in episodes}
    for sample in invalid[:6]:
        answer = fmt.decode(sample.target_ids)
        assert answer.startswith("Error during execution: ")
        kinds.add("not defined" if "is not defined" in answer else "argument")
        # the same answer after the recorded prefix: such errors do not depend on the state
        episode = by_id[sample.episode_id]
        env.reset(episode.task_id)
        for turn in episode.turns[: sample.turn]:
            env.step(turn.action.raw)
        assert env.step(sample.action).observation.text == answer
    env.close()
    assert kinds  # unknown tools and/or bad arguments


def test_invalid_calls_without_an_environment_get_structured_errors(episodes, tokenizer) -> None:
    samples = build_samples(episodes[:1], tokenizer, DataConfig(paths=["x"], invalid_call_rate=1.0))
    fmt = ChatFormat(tokenizer)
    answers = [json.loads(fmt.decode(s.target_ids)) for s in samples if s.invalid]
    assert answers and all(set(answer) == {"error"} for answer in answers)
    assert any("unknown tool" in a["error"] or "argument" in a["error"] for a in answers)


def test_prompts_inject_the_tool_schemas(episodes, tokenizer) -> None:
    tools = episodes[0].initial_info["tools"]
    cd = next(tool for tool in tools if tool["function"]["name"] == "cd")
    assert tool_signature(cd) == "cd(folder)"
    assert tool_signature(cd, "full").startswith("cd(folder: string) - Change the current working directory")
    sample = next(s for s in build_samples(episodes[:1], tokenizer) if s.role == "rehearse" and s.action.startswith("cd("))
    environment = tokenizer.decode(sample.prompt_ids).rsplit("<|im_start|>system\n", 1)[1]
    assert "Tool: cd(folder: string)" in environment and "Error during execution" in environment
    assert parse_call("cd(folder='x')") == ("cd", {"folder": "x"})
    assert parse_call("go to kitchen") == ("go", None)


def test_config_errors_name_the_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("data: {paths: [x.jsonl]}\nlam: -1\ngrpo: {group_size: 1, bogus: 2}\n")
    with pytest.raises(ConfigError) as caught:
        EnvACEConfig.from_file(path)
    message = str(caught.value)
    assert str(path) in message and "lam" in message and "grpo.group_size" in message and "grpo.bogus" in message
    path.write_text("data: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        EnvACEConfig.from_file(path)
    with pytest.raises(ConfigError, match="data.dataset"):
        EnvACEConfig.from_dict({"data": {}})
    config = EnvACEConfig.from_dict({"data": {"paths": ["x"]}}).with_overrides({"grpo.clip": 0.1, "lam": 0})
    assert config.grpo.clip == 0.1 and config.lam == 0


def test_a_dialogue_only_episode_gives_no_sample(episodes, tokenizer) -> None:
    episode = next(e for e in episodes if e.task_id == "multi_turn_base_1")
    messages = [event for turn in episode.turns for event in turn.context] + episode.final_context
    talk = episode.model_copy(update={"id": "talk", "turns": [], "final_context": messages})
    assert talk.dialogue_only and transcript_from_episode(talk).exchanges  # its hand-overs alone are no transition
    config = DataConfig(paths=["x"], max_seq_len=768)
    assert build_streams([talk], tokenizer, config) == []
    assert len(build_streams([talk, episode], tokenizer, config)) == len(build_streams([episode], tokenizer, config))
