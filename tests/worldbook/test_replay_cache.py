"""Per-episode replay results reused across replays (`ReplayCache`): a cached replay equals a fresh one, and an
episode is replayed again exactly when something its replay reads changed."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest

from helpers import sample_episodes
from worldsmith.worldbook import build_worldbook
from worldsmith.worldbook.induce import episode_of
from worldsmith.worldbook.model import Evidence, Rule, RuleStatus
from worldsmith.worldbook.rule_replay import MatchMemo, ReplayCache, _observe_order, replay_evidence, review_rules


def _built(name: str) -> tuple[list[Evidence], list[Rule], list[Rule]]:
    artifacts = build_worldbook(sample_episodes(name), name=name).artifacts
    assert artifacts is not None
    return artifacts["evidence"], artifacts["reviewed"], artifacts["rules"].rules


def _turns(rules: list[Rule], evidence: list[Evidence], **options: Any) -> list[dict[str, Any]]:
    return [asdict(turn) for turn in replay_evidence(rules, evidence, **options).turns]


def _episodes_taking(evidence: list[Evidence], action: str) -> int:
    return len({episode_of(item.turn_id) for item in evidence if item.action == action})


@pytest.mark.parametrize("sample", ["bfcl_curious", "alfworld_expert", "shell"])
def test_a_cached_replay_equals_a_fresh_one_and_is_reused(sample: str) -> None:
    evidence, reviewed, _ = _built(sample)
    episodes = len({episode_of(item.turn_id) for item in evidence})
    cache, memo = ReplayCache(), MatchMemo()
    fresh = _turns(reviewed, evidence)
    assert _turns(reviewed, evidence, cache=cache, memo=memo) == fresh
    assert (cache.hits, cache.misses) == (0, episodes)
    assert _turns(reviewed, evidence, cache=cache, memo=memo) == fresh  # every episode from the cache
    assert (cache.hits, cache.misses) == (episodes, episodes)
    # the same rules as new objects (a later round's copies): still the same replay, still reused
    copies = [rule.model_copy() for rule in reviewed]
    assert _turns(copies, evidence, cache=cache, memo=memo) == fresh and cache.hits == 2 * episodes


def test_a_changed_rule_replays_exactly_the_episodes_that_take_its_action() -> None:
    evidence, reviewed, _ = _built("bfcl_curious")
    target = next(r for r in reviewed if r.status == RuleStatus.SUPPORTED and
                  _episodes_taking(evidence, r.action) < len({episode_of(i.turn_id) for i in evidence}))
    demoted = [r.model_copy(update={"status": RuleStatus.CONFLICTED}) if r.id == target.id else r for r in reviewed]
    cache = ReplayCache()
    _turns(reviewed, evidence, cache=cache)
    misses = cache.misses
    assert _turns(demoted, evidence, cache=cache) == _turns(demoted, evidence)
    assert cache.misses - misses == _episodes_taking(evidence, target.action)
    # support alone is no change while the rules keep their order; a support that reorders them is one
    same_order = [r.model_copy(update={"support": r.support * 3 + 1}) for r in reviewed]
    before = cache.misses
    assert _turns(same_order, evidence, cache=cache) == _turns(same_order, evidence) and cache.misses == before
    action, reordered = next((a, changed) for a in sorted({r.action for r in reviewed})
                             if _read_order(changed := _zero_first(reviewed, a), a) != _read_order(reviewed, a))
    assert _turns(reordered, evidence, cache=cache) == _turns(reordered, evidence)
    assert cache.misses - before == _episodes_taking(evidence, action)


def _read_order(rules: list[Rule], action: str) -> list[str]:
    return [r.id for r in sorted((r for r in rules if r.action == action), key=_observe_order)]


def _zero_first(rules: list[Rule], action: str) -> list[Rule]:
    """The rules with the support of `action`'s first rule (in read-back order) set to 0."""
    first = _read_order(rules, action)[0]
    return [r.model_copy(update={"support": 0}) if r.id == first else r for r in rules]


def test_reviews_of_subsets_sharing_a_memo_and_cache_equal_fresh_reviews() -> None:
    """What the cross-fit folds do: several reviews of subsets of one evidence list, one memo and one cache."""
    evidence, _, candidates = _built("alfworld_expert")
    episodes = sorted({episode_of(item.turn_id) for item in evidence})
    memo, cache = MatchMemo(), ReplayCache()
    for fold in range(3):
        kept = [item for item in evidence if episodes.index(episode_of(item.turn_id)) % 3 != fold]
        shared = review_rules(candidates, kept, memo=memo, cache=cache)
        assert shared == review_rules(candidates, kept)
    assert cache.hits > 0


def test_supports_that_swap_an_assumed_choice_are_a_change() -> None:
    """Where a conditioned rule's state is unknown, the best-supported open rule is assumed: supports that keep
    both orders of selection and read-back but swap that choice must replay the episode again."""
    from worldsmith.worldbook.model import Condition

    evidence = [Evidence(turn_id="e#0", action="open", action_text="open", observation="B", outcome="success")]

    def rules(support_a: int, support_b: int) -> list[Rule]:
        return [Rule(id="a", action="open", template="A", status=RuleStatus.SUPPORTED, support=support_a,
                     conditions=[Condition(path="world.door", op="eq", value="shut")]),
                Rule(id="b", action="open", template="B", status=RuleStatus.SUPPORTED, support=support_b)]

    cache = ReplayCache()
    first = _turns(rules(5, 3), evidence, cache=cache)
    swapped = _turns(rules(3, 5), evidence, cache=cache)
    assert first[0]["rule"] == "a" and first[0]["route"] == "assumed"
    assert swapped == _turns(rules(3, 5), evidence) and swapped[0]["rule"] == "b" and cache.misses == 2
    assert _turns(rules(7, 2), evidence, cache=cache) == first and cache.hits == 1  # the same choice as (5, 3)
