"""GRPO's credit rules without a model: group normalisation per role, zero-variance groups, transition credit,
the per-token broadcast with role masks and sequence ids, the rollout settings GRPO samples with, the metrics."""

from __future__ import annotations

import math

import pytest

from worldsmith.envace.advantages import (
    TRAINED_ROLES,
    RolloutAdvantages,
    rollout_advantages,
    token_advantages,
    transition_keys,
)
from worldsmith.envace.config import GRPOConfig
from worldsmith.envace.data import IGNORE, ROLE_ACT, ROLE_NONE, ROLE_REHEARSE, DualRoleStream, Templates
from worldsmith.envace.generate import DecodeStats
from worldsmith.envace.grpo_batch import GRPOUpdate, ScoredRollouts, pack_batch, rollout_settings
from worldsmith.envace.grpo_metrics import grpo_metrics, mean, std
from worldsmith.envace.rollouts import Reply, Rollout, RolloutGroup, RolloutSettings, RolloutStep, TaskSpec

SPEC = TaskSpec("t", "bfcl", "a task", [], [], "(start)")
ACT, REH = ROLE_ACT, ROLE_REHEARSE


def _rollout(index: int, task: float | None, rehearse: float | None = None,
             steps: list[tuple[str, float | None]] | None = None, stream: DualRoleStream | None = None) -> Rollout:
    """A scored rollout; `steps`: (action, fidelity of its rehearsal, None: not rehearsed)."""
    steps = steps or []
    made = [RolloutStep(action, "answer", "real", None if value is None else "rehearsed") for action, value in steps]
    return Rollout("t", index, made, stream or DualRoleStream("t", 0), [], task_reward=task, rehearse_reward=rehearse,
                   rehearse_rewards=[value for _, value in steps])


def _group(*rollouts: Rollout) -> RolloutGroup:
    return RolloutGroup(SPEC, list(rollouts), "real")


def test_rewards_are_normalised_within_each_task_and_role() -> None:
    groups = [_group(_rollout(0, 1.0, 0.2), _rollout(1, 0.0, 0.6)), _group(_rollout(0, 0.5, 0.1), _rollout(1, 0.7))]
    plain = rollout_advantages(groups, dr_grpo=True)
    assert plain.act == pytest.approx([0.5, -0.5, -0.1, 0.1])
    assert plain.rehearse == pytest.approx([-0.2, 0.2, None, None])  # one rehearse reward: no baseline
    assert plain.transitions is None
    scaled = rollout_advantages(groups)
    std_pair = math.sqrt(2 * 0.5**2)  # sample std of (1, 0)
    assert scaled.act[0] == pytest.approx(0.5 / (std_pair + 1e-4))
    assert plain.act_values() == pytest.approx([0.5, -0.5, -0.1, 0.1])
    assert plain.rehearse_values() == pytest.approx([-0.2, 0.2])


def test_a_group_of_equal_rewards_gives_zero_advantages() -> None:
    groups = [_group(_rollout(0, 1.0, 0.3), _rollout(1, 1.0, 0.3), _rollout(2, 1.0, 0.3))]
    for dr_grpo in (False, True):
        advantages = rollout_advantages(groups, dr_grpo=dr_grpo)
        assert advantages.act == [0.0, 0.0, 0.0] and advantages.rehearse == [0.0, 0.0, 0.0]


def test_transition_credit_compares_rehearsals_of_the_same_calls() -> None:
    first = _rollout(0, 1.0, 0.5, [("a()", 0.8), ("b()", None), ("c()", 0.2)])
    second = _rollout(1, 0.0, 0.5, [("a()", 0.4), ("b()", 0.9)])
    assert transition_keys([_group(first, second)]) == [
        [((0, ("a()",)), 0.8), ((0, ("a()", "b()", "c()")), 0.2)],
        [((0, ("a()",)), 0.4), ((0, ("a()", "b()")), 0.9)],
    ]
    advantages = rollout_advantages([_group(first, second)], dr_grpo=True, credit="transition")
    assert advantages.transitions == [[pytest.approx(0.2), None], [pytest.approx(-0.2), None]]
    assert advantages.rehearse_values() == pytest.approx([0.2, -0.2])  # per rehearsal, not per rollout
    assert advantages.rehearse == [0.0, 0.0]


def test_each_token_gets_its_rollouts_advantage_for_its_role() -> None:
    advantages = RolloutAdvantages(act=[1.0, -1.0], rehearse=[0.5, None])
    rows = [0, 0, 0, 1, 1, 1]
    roles = [ACT, REH, ACT, ACT, REH, REH]
    segments = [0, 1, 0, 0, 1, 2]
    tokens = token_advantages(rows, roles, segments, advantages)
    assert tokens.keep == [0, 1, 2, 3]  # rollout 1's rehearse tokens have no advantage
    assert tokens.values == [1.0, 0.5, 1.0, -1.0]
    # sequences: (rollout 0, act), (rollout 0, rehearse), (rollout 1, act), numbered in that order
    assert tokens.sequences == [0, 1, 0, 2]
    only_act = token_advantages(rows, roles, segments, advantages, TRAINED_ROLES["act"])
    assert only_act.keep == [0, 2, 3] and only_act.sequences == [0, 0, 1]
    only_rehearse = token_advantages(rows, roles, segments, advantages, TRAINED_ROLES["rehearse"])
    assert only_rehearse.keep == [1] and only_rehearse.values == [0.5] and only_rehearse.sequences == [0]


def test_with_transition_credit_each_rehearsal_is_its_own_sequence() -> None:
    advantages = RolloutAdvantages(act=[0.3], rehearse=[9.0], transitions=[[0.7, -0.4]])
    tokens = token_advantages([0, 0, 0, 0, 0], [ACT, REH, REH, ACT, REH], [0, 1, 1, 0, 2], advantages)
    assert tokens.values == [0.3, 0.7, 0.7, 0.3, -0.4]  # the per-rollout rehearse advantage is not used
    assert tokens.sequences == [0, 1, 1, 0, 2]
    none = token_advantages([0, 0], [ACT, REH], [0, 1], RolloutAdvantages([None], [None], [[None]]))
    assert none.keep == [] and none.values == [] and none.sequences == []


def _stream(episode: str) -> DualRoleStream:
    """Prompt (no targets), an action, its rehearsal (segment 1), the observation, a second action."""
    segments = [0, 0, 0, 1, 1, 0, 0]
    roles = [ROLE_NONE, ACT, ACT, REH, REH, ROLE_NONE, ACT]
    labels = [IGNORE if role == ROLE_NONE else 10 + column for column, role in enumerate(roles)]
    return DualRoleStream(episode, 0, ids=list(range(10, 17)), positions=[0, 1, 2, 3, 4, 3, 4], segments=segments,
                          labels=labels, roles=roles)


def test_pack_batch_reads_each_target_tokens_segment() -> None:
    import torch

    scored = ScoredRollouts([_group(_rollout(0, 1.0, 0.9, [("a()", 0.9)], _stream("x")),
                                    _rollout(1, 0.0, 0.1, [("a()", 0.1)], _stream("y")))], DecodeStats())
    advantages = rollout_advantages(scored.groups, dr_grpo=True, credit="transition")
    batch = pack_batch(scored, advantages, TRAINED_ROLES["both"], pad_id=0, device="cpu")
    assert batch.packed.roles.tolist() == [ACT, ACT, REH, REH, ACT] * 2
    assert batch.values.tolist() == pytest.approx([0.5, 0.5, 0.4, 0.4, 0.5, -0.5, -0.5, -0.4, -0.4, -0.5])
    assert batch.sequences.tolist() == [0, 0, 1, 1, 0, 2, 2, 3, 3, 2]
    assert batch.keep.tolist() == list(range(10)) and batch.roles.tolist() == batch.packed.roles.tolist()
    assert batch.values.dtype == torch.float32


@pytest.mark.parametrize(("roles", "in_real", "calls_only", "expected"), [
    ("both", True, False, "always"), ("both", True, True, "calls"), ("rehearse", True, True, "calls"),
    ("act", True, False, "needed"), ("both", False, False, "needed"),
])
def test_grpo_rehearses_real_steps_when_the_rehearse_role_is_trained(roles, in_real, calls_only, expected) -> None:
    grpo = GRPOConfig(train_roles=roles, rehearse_in_real=in_real, rehearse_calls_only=calls_only, group_size=3,
                      max_steps=2, max_new_tokens=7, temperature=0.5)
    settings = rollout_settings(grpo, Templates(), None)
    assert settings == RolloutSettings(3, Templates(), 2, 7, 0.5, expected, None)


def test_the_settings_say_which_answers_the_model_rehearses() -> None:
    answered = Reply("ok")
    assert RolloutSettings(2).rehearses(None, "anything")
    assert not RolloutSettings(2).rehearses(answered, "f(x=1)")
    assert RolloutSettings(2, rehearse="always").rehearses(answered, "not a call")
    assert RolloutSettings(2, rehearse="calls").rehearses(answered, "f(x=1)")
    assert not RolloutSettings(2, rehearse="calls").rehearses(answered, "not a call")


def test_the_metrics_row_reports_rewards_and_advantages_per_role() -> None:
    import torch

    from worldsmith.envace.grpo import GRPOTerms

    groups = [_group(_rollout(0, 1.0, 0.2, [("a()", 0.2)]), _rollout(1, 0.0, 0.6, [("a()", 0.6), ("b()", None)]))]
    advantages = rollout_advantages(groups, dr_grpo=True)
    stats = DecodeStats()
    stats.forward_tokens = 30
    terms = GRPOTerms(torch.tensor(0.25), {"act": 0.1}, None, 0.5, {"act": 4})
    row = grpo_metrics(ScoredRollouts(groups, stats), advantages, GRPOUpdate(terms, {}, {}, 12), source="real",
                       log_alignment=False)
    assert row["loss"] == 0.25 and row["reward_act"] == 0.5 and row["reward_rehearse"] == pytest.approx(0.4)
    assert row["adv_act_mean"] == 0.0 and row["adv_act_std"] == pytest.approx(0.5)
    assert row["adv_rehearse_std"] == pytest.approx(0.2) and row["pg_loss_rehearse"] is None
    assert row["rollouts"] == 2 and row["rollout_steps"] == 3 and row["tokens"] == row["_tokens"] == 42
    assert "pg_align_act" not in row and "act_loss" not in row
    assert mean([]) is None and std([]) is None and std([1.0, 3.0]) == 1.0
