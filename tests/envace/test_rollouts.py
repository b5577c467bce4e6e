"""Generation on one cache (act -> rehearse reuse, prompt lookup), the four rollout sources, rewards and GRPO's math."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from envace_support import REPO, TINY, bfcl_episodes, small_config

from worldsmith.envace.config import ConfigError
from worldsmith.envace.data import (
    ROLE_ACT,
    ROLE_REHEARSE,
    ChatFormat,
    Templates,
    environment_prompt,
    policy_prompt,
    transcript_from_episode,
)
from worldsmith.envace.generate import SegmentDecoder
from worldsmith.envace.grpo import group_advantages, grpo_loss, keyed_advantages
from worldsmith.envace.modeling import collate_streams, load_policy, target_logprobs
from worldsmith.envace.rollouts import (
    RealResponseCache,
    RolloutSettings,
    make_source_factory,
    rollout,
    score_rollouts,
    task_reward,
    task_specs,
)
from worldsmith.envs import available, make
from worldsmith.llm.prompt_lookup import PromptLookup

needs_bfcl = pytest.mark.skipif(not available("bfcl"), reason="bfcl-eval is not installed")


def _eval_policy(path: Path) -> tuple:
    model, tokenizer = load_policy(path, device="cpu")
    model.eval()
    return model, tokenizer


@pytest.fixture(scope="module")
def policy():
    return _eval_policy(TINY)


@pytest.fixture(scope="module")
def transcripts():
    return [transcript_from_episode(episode) for episode in bfcl_episodes()]


def test_rehearsing_on_the_act_cache_equals_rehearsing_from_scratch(policy, transcripts) -> None:
    import torch

    model, tokenizer = policy
    fmt, templates = ChatFormat(tokenizer), Templates()
    transcript = transcripts[0]
    prompt = fmt.opening(policy_prompt(templates, transcript.env, transcript.task, transcript.tools),
                         transcript.exchanges[0].observation)
    with torch.inference_mode():
        decoder = SegmentDecoder(model, eos_id=fmt.eos_id, pad_id=fmt.pad_id)
        logits = decoder.start([prompt])
        action = decoder.generate(logits, [0], role=ROLE_ACT, max_new_tokens=16, temperature=0.0)[0]
        decoder.open_segment(0)
        header = fmt.rehearse_header(environment_prompt(templates, transcript.env, transcript.task,
                                                        transcript.tools, fmt.decode(action)))
        before = decoder.stats.forward_tokens
        logits = decoder.feed([header])
        assert decoder.stats.forward_tokens - before == 1 + len(header)  # the action's end token, then the header
        reused = decoder.generate(logits, [0], role=ROLE_REHEARSE, max_new_tokens=24, temperature=0.0)[0]
        cold = SegmentDecoder(model, eos_id=fmt.eos_id, pad_id=fmt.pad_id)
        logits = cold.start([prompt + action + header])
        fresh = cold.generate(logits, [0], role=ROLE_REHEARSE, max_new_tokens=24, temperature=0.0)[0]
    assert reused == fresh


def test_sampling_logprobs_match_the_training_forward(policy, transcripts) -> None:
    import torch

    model, tokenizer = policy
    specs = task_specs(transcripts)[:2]
    generator = torch.Generator().manual_seed(3)
    groups = rollout(model, tokenizer, specs, make_source_factory("imagined"), RolloutSettings(2, max_steps=2, max_new_tokens=12),
                     generator=generator)
    rollouts = [item for group in groups for item in group.rollouts]
    assert len(rollouts) == 4 and all(item.steps for item in rollouts)
    assert all(step.answered_by == "rehearsal" and step.rehearsed == step.response for r in rollouts for step in r.steps)
    with torch.no_grad():
        scored = target_logprobs(model, collate_streams([r.stream for r in rollouts], 0, "cpu")).tolist()
    sampled = [value for item in rollouts for value in item.logprobs]
    assert len(scored) == len(sampled)
    assert max(abs(a - b) for a, b in zip(scored, sampled, strict=True)) < 1e-4
    # same seed, same rollouts
    again = rollout(model, tokenizer, specs, make_source_factory("imagined"), RolloutSettings(2, max_steps=2, max_new_tokens=12),
                    generator=torch.Generator().manual_seed(3))
    assert [r.actions for g in again for r in g.rollouts] == [r.actions for r in rollouts]


@needs_bfcl
def test_real_rollouts_are_scored_by_the_real_environment(policy, transcripts) -> None:
    import torch

    model, tokenizer = policy
    specs = task_specs(transcripts)[:1]
    groups = rollout(model, tokenizer, specs, make_source_factory("real", env="bfcl"),
                     RolloutSettings(2, max_steps=2, max_new_tokens=12, rehearse="always"), generator=torch.Generator().manual_seed(0))
    score_rollouts(groups, env="bfcl", reward="partial")
    env = make("bfcl")
    for item in groups[0].rollouts:
        assert item.task_reward is not None and 0.0 <= item.task_reward <= 1.0
        assert item.rehearse_reward is not None and 0.0 <= item.rehearse_reward <= 1.0
        assert item.final_info.get("ground_truth_calls")  # the episode was finished for BFCL's verdict
        env.reset(specs[0].task_id)
        for step in item.steps:
            assert step.answered_by == "real" and step.rehearsed is not None
            assert step.reference == step.response == env.step(step.action).observation.text
    env.close()


@needs_bfcl
def test_worldbook_and_cache_sources(policy, transcripts) -> None:
    import torch

    from worldsmith.sim.route_learning import build_simulator_book

    model, tokenizer = policy
    specs = task_specs(transcripts)[:1]
    book = build_simulator_book(bfcl_episodes(), name="bfcl").book
    groups = rollout(model, tokenizer, specs, make_source_factory("worldbook", book=book),
                     RolloutSettings(2, max_steps=2, max_new_tokens=12), generator=torch.Generator().manual_seed(0))
    score_rollouts(groups, env="bfcl")
    for item in groups[0].rollouts:
        assert all(step.answered_by == "worldbook" and step.rehearsed is None for step in item.steps)
        assert all(step.reference is not None for step in item.steps)  # replayed in the real environment
        assert item.rehearse_reward is None  # nothing was rehearsed
    # the cache answers a call it has seen after the same calls; the rest is rehearsed
    cache = RealResponseCache()
    cache.add_transcripts(transcripts)
    expert = specs[0]
    recorded = next(t for t in transcripts if t.task_id == expert.task_id)
    source = make_source_factory("cache", cache=cache)()
    source.start(expert)
    first = recorded.exchanges[0]
    assert source.respond(first.action).text == first.response
    assert source.respond("made_up_tool(x=1)") is None
    groups = rollout(model, tokenizer, specs, make_source_factory("cache", cache=cache),
                     RolloutSettings(2, max_steps=2, max_new_tokens=12), generator=torch.Generator().manual_seed(0))
    score_rollouts(groups, env="bfcl", cache=cache)
    for item in groups[0].rollouts:
        prior: list[str] = []
        for step in item.steps:
            assert step.answered_by in ("cache", "rehearsal")
            assert cache.get(expert.task_id, prior, step.action) == step.reference  # real answers join the cache
            prior.append(step.action)


def test_task_reward_kinds() -> None:
    info = {"won": False, "ground_truth_calls": 4, "ground_truth_ok": 1}
    assert task_reward(info, "binary") == 0.0
    assert task_reward(info, "partial") == 0.25
    assert task_reward({"won": True}, "partial") == 1.0
    from worldsmith.envace.rollouts import RolloutStep

    steps = [RolloutStep("a()", "x", "real", error=False), RolloutStep("b()", "y", "real", error=True)]
    assert task_reward(info, "shaped", steps) == pytest.approx(0.5 * 0.25 + 0.5 * 0.5)


def test_group_advantages_per_role() -> None:
    rewards = [1.0, 0.0, 0.0, 1.0]
    normalised = group_advantages(rewards)
    std = math.sqrt(sum((r - 0.5) ** 2 for r in rewards) / 3)
    assert normalised == pytest.approx([0.5 / (std + 1e-4), -0.5 / (std + 1e-4)] * 1 + [-0.5 / (std + 1e-4),
                                       0.5 / (std + 1e-4)])
    assert group_advantages(rewards, dr_grpo=True) == [0.5, -0.5, -0.5, 0.5]
    assert group_advantages([0.3, None, 0.5], dr_grpo=True) == pytest.approx([-0.1, None, 0.1])
    assert group_advantages([0.3, None]) == [None, None]  # no baseline from one reward
    assert group_advantages([0.2, 0.2]) == [0.0, 0.0]


def test_grpo_loss_clips_and_normalises() -> None:
    import torch

    old = torch.zeros(4)
    new = torch.tensor([0.5, 0.5, -0.5, -0.5], requires_grad=True)  # ratios e^±0.5, beyond the clip of 0.2
    advantages = torch.tensor([1.0, 1.0, -1.0, 1.0])
    sequences = torch.tensor([0, 0, 1, 2])
    roles = torch.tensor([0, 0, 1, 1])
    terms = grpo_loss(new, old, advantages, sequences, roles, clip=0.2)
    # per token -min(r A, clip(r) A): [-1.2, -1.2, +0.8, -e^-0.5]; per-sequence means, then their mean
    expected = (-1.2 + 0.8 - math.exp(-0.5)) / 3
    assert float(terms.loss.detach()) == pytest.approx(expected, rel=1e-5)
    assert terms.clipped_fraction == 1.0 and terms.tokens == {"act": 2, "rehearse": 2}
    dr = grpo_loss(new, old, advantages, sequences, roles, clip=0.2, dr_grpo=True, normaliser=10.0)
    assert float(dr.loss.detach()) == pytest.approx((-1.2 - 1.2 + 0.8 - math.exp(-0.5)) / (3 * 10.0), rel=1e-5)
    kl = grpo_loss(new, old, advantages, sequences, roles, ref_logprobs=torch.zeros(4), kl_coef=0.1)
    assert kl.kl == pytest.approx(float((torch.exp(-new) + new - 1).mean().detach()), rel=1e-5)
    kl.loss.backward()
    assert new.grad is not None


def test_keyed_advantages_compare_only_items_of_the_same_transition() -> None:
    # rollout 0 and 1 share the first transition ("a"); only rollout 1 and 2 reach "b"; "c" has no sibling
    items = [[("a", 1.0)], [("a", 0.0), ("b", 0.5)], [("b", 0.25), ("c", 1.0)]]
    plain = keyed_advantages(items, dr_grpo=True)
    assert plain == [[0.5], [-0.5, 0.125], [-0.125, None]]
    scaled = keyed_advantages(items)
    assert scaled[0][0] == pytest.approx(-scaled[1][0]) and scaled[0][0] > 0.7  # over the std of the pair
    assert scaled[2][1] is None


# -- prompt lookup: the same greedy text (batches, cuts), the training forward's log-probs when sampled

JOINT = REPO / "data_samples" / "models" / "tiny-envace-joint"
LOOKUP = PromptLookup(draft=5, ngram=3)


@pytest.fixture(scope="module")
def joint():
    return _eval_policy(JOINT)


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
    settings = RolloutSettings(2, max_steps=2, max_new_tokens=16, temperature=0.3, lookup=LOOKUP)
    groups = rollout(random_model, tokenizer, specs, make_source_factory("imagined"), settings,
                     generator=torch.Generator().manual_seed(3))
    rollouts = [item for group in groups for item in group.rollouts]
    with torch.no_grad():
        scored = target_logprobs(random_model, collate_streams([r.stream for r in rollouts], 0, "cpu"),
                                 temperature=0.3).tolist()
    sampled = [value for item in rollouts for value in item.logprobs]
    assert len(scored) == len(sampled) > 0
    assert max(abs(a - b) for a, b in zip(scored, sampled, strict=True)) < 1e-3
    again = rollout(random_model, tokenizer, specs, make_source_factory("imagined"), settings,
                    generator=torch.Generator().manual_seed(3))
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
