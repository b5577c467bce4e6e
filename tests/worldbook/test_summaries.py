"""Per-episode summaries combined over subsets (`worldbook.summaries`): what a learner combines from its episodes'
pieces equals what it learns from those episodes afresh, whichever other episodes' pieces the summaries hold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from worldsmith.traces import Episode
from worldsmith.worldbook import build_worldbook
from worldsmith.worldbook.induce import episode_of
from worldsmith.worldbook.model import Evidence
from worldsmith.worldbook.record_store import learn_selectors
from worldsmith.worldbook.summaries import EpisodeSummaries, summarized
from worldsmith.worldbook.writes import learn_tool_rules

SAMPLES = Path(__file__).resolve().parents[2] / "data_samples" / "toolshop"


def _toolshop_evidence() -> list[Evidence]:
    episodes = [Episode.model_validate({k: v for k, v in json.loads(line).items() if k != "format"})
                for name in ("expert.jsonl", "probing.jsonl") for line in (SAMPLES / name).read_text().splitlines()
                if line.strip()]
    artifacts = build_worldbook(episodes, name="toolshop").artifacts
    assert artifacts is not None
    return artifacts["evidence"]


def _subsets(evidence: list[Evidence]) -> list[list[Evidence]]:
    """Three folds' kept evidence (every third episode held out), as the route stage takes them."""
    episodes = sorted({episode_of(item.turn_id) for item in evidence})
    return [[item for item in evidence if episodes.index(episode_of(item.turn_id)) % 3 != fold] for fold in range(3)]


def _dumped(rules: list[Any]) -> list[dict[str, Any]]:
    return [rule.model_dump(mode="json") for rule in rules]


def test_an_episode_is_summarized_once_and_known_by_identity() -> None:
    items = [Evidence(turn_id=f"e#{i}", action="look", action_text="look", observation=f"{i}") for i in range(3)]
    calls: list[int] = []

    def count(episode: Any) -> int:
        calls.append(len(episode))
        return len(episode)

    summaries = EpisodeSummaries()
    assert summaries.of("n", items, count) == 3 and summaries.of("n", items, count) == 3 and calls == [3]
    assert summaries.of("other", items, count) == 3 and calls == [3, 3]  # each kind its own
    copies = [item.model_copy() for item in items]  # equal turns of another evidence list: not the same episode
    assert summaries.of("n", copies, count) == 3 and calls == [3, 3, 3] and summaries.computed == 3
    assert summarized("n", [items, []], count, None) == [3] and summarized("n", [items], count, summaries) == [3]


def _one_pass_selectors(evidence: list[Evidence]) -> dict[str, tuple[str, str]]:
    """`learn_selectors` as one pass over the evidence counted it before it was split into episode pieces."""
    from collections import Counter, defaultdict

    from worldsmith.worldbook.induce import group_by_episode
    from worldsmith.worldbook.record_store import (
        MIN_SELECTOR_SHARE,
        _answer_votes,
        _scalar,
        arguments_of,
        own_records,
        parse_structured,
    )

    votes: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)
    turns: Counter[str] = Counter()
    earlier: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)
    for items in group_by_episode(evidence).values():
        shown: dict[str, set[str]] = defaultdict(set)
        for item in items:
            arguments = arguments_of(item)
            for name, argument in arguments.items():
                if _scalar(argument):
                    for key in shown.get(str(argument), ()):
                        earlier[item.action][(name, key)] += 1
            value = parse_structured(item.observation)
            if value is None:
                continue
            for key, ident, _ in own_records(value):
                shown[str(ident)].add(key)
            if arguments:
                turns[item.action] += 1
                votes[item.action].update(_answer_votes(value, arguments))
    out: dict[str, tuple[str, str]] = {}
    for tool, counts in votes.items():
        if counts:
            pair, count = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
            if count >= max(1, MIN_SELECTOR_SHARE * turns[tool]):
                out[tool] = pair
    for tool, counts in earlier.items():
        if tool not in out and tool not in turns and counts:
            out[tool] = max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0]
    return out


def test_selectors_combined_from_pieces_equal_one_pass_over_the_kept_episodes() -> None:
    evidence = _toolshop_evidence()
    summaries = EpisodeSummaries()
    assert list(learn_selectors(evidence, summaries=summaries).items()) == list(_one_pass_selectors(evidence).items())
    for kept in _subsets(evidence):  # the summaries hold every episode's piece, the held-out ones' included
        combined = learn_selectors(kept, summaries=summaries)
        assert list(combined.items()) == list(_one_pass_selectors(kept).items()) == list(learn_selectors(kept).items())
    assert summaries.computed == len({episode_of(item.turn_id) for item in evidence})


def test_tool_rules_with_shared_summaries_equal_tool_rules_learned_afresh() -> None:
    evidence = _toolshop_evidence()
    summaries = EpisodeSummaries()
    for kept in _subsets(evidence):
        assert _dumped(learn_tool_rules(kept, summaries=summaries)) == _dumped(learn_tool_rules(kept))


def test_list_formats_from_shared_per_text_pieces_equal_formats_read_afresh() -> None:
    """`learn_list_format` reading each observation's lists once (`written_lists`, kept in the summaries) learns what
    reading them in place learned, for every subset, whichever other observations the summaries hold."""
    from helpers import sample_episodes
    from worldsmith.worldbook.facts import find_lists, learn_list_format, parse_list_items
    from worldsmith.worldbook.templates import evidence_from_episodes

    def read_in_place(observations: list[str]) -> list[tuple[list[str], dict[str, str]]]:
        return [parsed for text in observations for found in find_lists(text)
                if (parsed := parse_list_items(found.text)) is not None]

    summaries = EpisodeSummaries()
    for name in ("alfworld_curious", "textworld_curious", "scienceworld"):
        observations = [item.observation for item in evidence_from_episodes(sample_episodes(name))]
        for subset in (observations, observations[::2], observations[1::3]):
            shared = learn_list_format(subset, summaries=summaries)
            assert shared == learn_list_format(subset)
        from worldsmith.worldbook.facts import written_lists

        assert [(list(items), dict(seps)) for text in observations for items, seps in written_lists(text)] == \
            read_in_place(observations)
    assert summaries.computed > 0


def test_a_layout_is_read_once_per_text_and_is_the_layout() -> None:
    from worldsmith.worldbook.record_store import layout_of, structured_layout

    summaries = EpisodeSummaries()
    texts = ['{"a": 1, "b": [1, 2]}', '{"a":1}', "plain text", '{\n  "a": 1\n}', '{"a": 1, "b": [1, 2]}']
    assert [layout_of(text, summaries) for text in texts] == [structured_layout(text) for text in texts] == \
        [layout_of(text) for text in texts]
    assert summaries.computed == 4  # the repeated text read once
