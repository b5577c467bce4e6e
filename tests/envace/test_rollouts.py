"""Generation on one cache (act -> rehearse reuse), the four rollout sources, rewards and GRPO's math."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from envace_support import TINY, bfcl_episodes  # noqa: E402

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
from worldsmith.envace.grpo import group_advantages, grpo_loss, keyed_advantages  # noqa: E402
from worldsmith.envace.modeling import collate_streams, load_policy, target_logprobs  # noqa: E402
from worldsmith.envace.rollouts import (  # noqa: E402
    ResponseCache,
    make_source_factory,
    rollout,
    score_rollouts,
    task_reward,
    task_specs,
)
from worldsmith.envs import available, make  # noqa: E402

needs_bfcl = pytest.mark.skipif(not available("bfcl"), reason="bfcl-eval is not installed")


@pytest.fixture(scope="module")
def policy():
    model, tokenizer = load_policy(TINY, device="cpu")
    model.eval()
    return model, tokenizer


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
    groups = rollout(model, tokenizer, specs, make_source_factory("imagined"), 2, max_steps=2, max_new_tokens=12,
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
    again = rollout(model, tokenizer, specs, make_source_factory("imagined"), 2, max_steps=2, max_new_tokens=12,
                    generator=torch.Generator().manual_seed(3))
    assert [r.actions for g in again for r in g.rollouts] == [r.actions for r in rollouts]


@needs_bfcl
def test_real_rollouts_are_scored_by_the_real_environment(policy, transcripts) -> None:
    import torch

    model, tokenizer = policy
    specs = task_specs(transcripts)[:1]
    groups = rollout(model, tokenizer, specs, make_source_factory("real", env="bfcl"), 2, max_steps=2,
                     max_new_tokens=12, rehearse="always", generator=torch.Generator().manual_seed(0))
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

    from worldsmith.worldbook.build import build_worldbook

    model, tokenizer = policy
    specs = task_specs(transcripts)[:1]
    book = build_worldbook(bfcl_episodes(), name="bfcl").book
    groups = rollout(model, tokenizer, specs, make_source_factory("worldbook", book=book), 2, max_steps=2,
                     max_new_tokens=12, generator=torch.Generator().manual_seed(0))
    score_rollouts(groups, env="bfcl")
    for item in groups[0].rollouts:
        assert all(step.answered_by == "worldbook" and step.rehearsed is None for step in item.steps)
        assert all(step.reference is not None for step in item.steps)  # replayed in the real environment
        assert item.rehearse_reward is None  # nothing was rehearsed
    # the cache answers a call it has seen after the same calls; the rest is rehearsed
    cache = ResponseCache()
    cache.add_transcripts(transcripts)
    expert = specs[0]
    recorded = next(t for t in transcripts if t.task_id == expert.task_id)
    source = make_source_factory("cache", cache=cache)()
    source.start(expert)
    first = recorded.exchanges[0]
    assert source.respond(first.action).text == first.response
    assert source.respond("made_up_tool(x=1)") is None
    groups = rollout(model, tokenizer, specs, make_source_factory("cache", cache=cache), 2, max_steps=2,
                     max_new_tokens=12, generator=torch.Generator().manual_seed(0))
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
