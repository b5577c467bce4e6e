"""Prompt lookup in the training decoder: the same greedy text (batches, cuts), the training forward's log-probs
when sampled, the run config's settings."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from envace_support import REPO, TINY, bfcl_episodes, small_config  # noqa: E402

from worldsmith.envace.config import ConfigError  # noqa: E402
from worldsmith.envace.data import (  # noqa: E402
    ROLE_ACT,
    ROLE_REHEARSE,
    ChatFormat,
    Templates,
    environment_prompt,
    policy_prompt,
    transcript_from_episode,
)
from worldsmith.envace.generate import SegmentDecoder  # noqa: E402
from worldsmith.envace.modeling import collate_streams, load_policy, target_logprobs  # noqa: E402
from worldsmith.envace.rollouts import make_source_factory, rollout, task_specs  # noqa: E402
from worldsmith.llm.prompt_lookup import PromptLookup  # noqa: E402

JOINT = REPO / "data_samples" / "models" / "tiny-envace-joint"
LOOKUP = PromptLookup(draft=5, ngram=3)


@pytest.fixture(scope="module")
def joint():
    model, tokenizer = load_policy(JOINT, device="cpu")
    model.eval()
    return model, tokenizer


@pytest.fixture(scope="module")
def random_model():
    """The tiny architecture with random weights (init 0.05: runs of one token broken by other tokens, so drafts
    are accepted and rejected often, and the argmax is never a near tie)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(TINY, local_files_only=True)
    config.initializer_range = 0.05
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def transcripts():
    return [transcript_from_episode(episode) for episode in bfcl_episodes()]


def _act_then_rehearse(model, fmt, prompts, transcripts, lookup, max_new_tokens):
    """Act (plain), then rehearse each row's action on the act cache (with `lookup`): actions, answers, stats."""
    decoder = SegmentDecoder(model, eos_id=fmt.eos_id, pad_id=fmt.pad_id)
    rows = list(range(len(prompts)))
    acted = decoder.generate(decoder.start(prompts), rows, role=ROLE_ACT, max_new_tokens=max_new_tokens,
                             temperature=0.0)
    headers = []
    for row, transcript in zip(rows, transcripts, strict=True):
        decoder.open_segment(row)
        action = fmt.decode(acted[row]).strip() or "respond()"
        headers.append(fmt.rehearse_header(environment_prompt(Templates(), transcript.env, transcript.task,
                                                              transcript.all_tools or transcript.tools, action)))
    answered = decoder.generate(decoder.feed(headers), rows, role=ROLE_REHEARSE, max_new_tokens=max_new_tokens,
                                temperature=0.0, lookup=lookup)
    for row in rows:
        decoder.close_segment(row)
    return acted, answered, decoder


def test_greedy_rehearsals_are_the_same_with_lookup_on_the_joint_checkpoint(joint, transcripts) -> None:
    import torch

    model, tokenizer = joint
    fmt = ChatFormat(tokenizer)
    prompts = [fmt.opening(policy_prompt(Templates(), t.env, t.task, t.tools), t.exchanges[0].observation)
               for t in transcripts[:4]]
    with torch.inference_mode():
        for max_new_tokens in (1, 3, 24):
            # a batch of four rows of different lengths, and each row alone
            plain = _act_then_rehearse(model, fmt, prompts, transcripts[:4], None, max_new_tokens)
            looked = _act_then_rehearse(model, fmt, prompts, transcripts[:4], LOOKUP, max_new_tokens)
            assert looked[0] == plain[0] and looked[1] == plain[1]
            assert [row.stream.ids for row in looked[2].rows] == [row.stream.ids for row in plain[2].rows]
            assert [row.stream.positions for row in looked[2].rows] == [row.stream.positions for row in plain[2].rows]
            assert all(len(answer) <= max_new_tokens and answer[-1] == fmt.eos_id for answer in looked[1].values())
            for row in range(2):
                alone = _act_then_rehearse(model, fmt, prompts[row:row + 1], transcripts[row:row + 1], LOOKUP,
                                           max_new_tokens)
                assert alone[1][0] == plain[1][row]
    stats = looked[2].stats.lookup
    assert stats.drafted > 0 and stats.tokens > stats.passes  # drafts were made, and some were taken


def test_greedy_decoding_is_the_same_with_lookup_on_a_random_model(random_model) -> None:
    import torch

    prompts = [[5, 6, 7, 8, 9] * 6 + [5, 6], list(range(10, 60)), [11, 12, 13, 11, 12, 13, 14] * 3]
    with torch.inference_mode():
        for max_new_tokens in (2, 9, 40):
            outputs = []
            for lookup in (None, PromptLookup(draft=1, ngram=1), LOOKUP, PromptLookup(draft=8, ngram=4)):
                decoder = SegmentDecoder(random_model, eos_id=2, pad_id=0)
                first = decoder.generate(decoder.start(prompts), [0, 1, 2], role=ROLE_ACT,
                                         max_new_tokens=max_new_tokens, temperature=0.0, lookup=lookup)
                decoder.open_segment(1)  # a rehearse segment for one row, the others go on acting
                logits = decoder.feed([[3, 4], [21, 22, 23], [3]])
                second = decoder.generate(logits, [0, 1, 2], role=ROLE_REHEARSE, max_new_tokens=max_new_tokens,
                                          temperature=0.0, lookup=lookup)
                outputs.append((first, second, [row.stream.ids for row in decoder.rows],
                                [row.logprobs for row in decoder.rows]))
                if lookup is LOOKUP and max_new_tokens == 40:
                    stats = decoder.stats.lookup
                    assert stats.accepted > 20 and stats.tokens_per_pass > 1.3
                    assert stats.accepted < stats.drafted  # and some rejected: both paths ran
                    assert decoder.key_valid.shape[1] < decoder.stats.forward_tokens  # rejected columns cropped
            for other in outputs[1:]:
                assert other[:3] == outputs[0][:3]
                assert all(max(abs(a - b) for a, b in zip(x, y, strict=True)) < 1e-4
                           for x, y in zip(other[3], outputs[0][3], strict=True) if x)


def test_sampled_rehearsals_with_lookup_record_the_training_forwards_logprobs(random_model, transcripts) -> None:
    """Rollouts with lookup: every target token's recorded sampling log-prob is the one training computes."""
    import torch

    tokenizer = load_policy(TINY, device="cpu")[1]
    specs = task_specs(transcripts)[:2]
    groups = rollout(random_model, tokenizer, specs, make_source_factory("imagined"), 2, max_steps=2,
                     max_new_tokens=16, temperature=0.3, generator=torch.Generator().manual_seed(3), lookup=LOOKUP)
    rollouts = [item for group in groups for item in group.rollouts]
    with torch.no_grad():
        scored = target_logprobs(random_model, collate_streams([r.stream for r in rollouts], 0, "cpu"),
                                 temperature=0.3).tolist()
    sampled = [value for item in rollouts for value in item.logprobs]
    assert len(scored) == len(sampled) > 0
    assert max(abs(a - b) for a, b in zip(scored, sampled, strict=True)) < 1e-3
    again = rollout(random_model, tokenizer, specs, make_source_factory("imagined"), 2, max_steps=2,
                    max_new_tokens=16, temperature=0.3, generator=torch.Generator().manual_seed(3), lookup=LOOKUP)
    assert [r.stream.ids for g in again for r in g.rollouts] == [r.stream.ids for r in rollouts]


def test_the_run_config_carries_the_lookup_settings(tmp_path: Path) -> None:
    config = small_config(tmp_path)
    assert config.prompt_lookup.enabled and not config.prompt_lookup.rollouts
    assert config.prompt_lookup.settings() == PromptLookup(True, 4, 3)
    assert config.prompt_lookup.settings(rollouts=True) is None  # off in rollouts by default
    changed = config.with_overrides({"prompt_lookup.rollouts": True, "prompt_lookup.draft": 6,
                                     "prompt_lookup.ngram": 2})
    assert changed.prompt_lookup.settings(rollouts=True) == PromptLookup(True, 6, 2)
    assert config.with_overrides({"prompt_lookup.enabled": False}).prompt_lookup.settings() is None
    assert changed.to_json()["prompt_lookup"] == {"enabled": True, "rollouts": True, "draft": 6, "ngram": 2}
    with pytest.raises(ConfigError, match="prompt_lookup.draft"):
        config.with_overrides({"prompt_lookup.draft": 0})
    with pytest.raises(ConfigError, match="prompt_lookup.ngram"):
        config.with_overrides({"prompt_lookup.ngram": 0})
    with pytest.raises(ConfigError, match="prompt_lookup.size"):
        config.with_overrides({"prompt_lookup.size": 3})
