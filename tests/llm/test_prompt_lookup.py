"""Prompt lookup's parts: the n-gram matcher, greedy and sampled acceptance (the sampled one keeps the target
distribution), the settings' validation."""

from __future__ import annotations

import pytest

from worldsmith.llm.prompt_lookup import (
    LookupStats,
    NgramIndex,
    PromptLookup,
    accept_greedy,
    accept_rows,
    accept_sampled,
    target_probs,
)


def test_the_latest_occurrence_of_the_longest_matching_ngram_is_copied() -> None:
    index = NgramIndex(3)
    #          0  1  2  3  4  5  6  7  8  9 10
    tokens = [5, 6, 7, 1, 9, 6, 7, 2, 3, 6, 7]
    # suffix (6, 7): after positions 1 and 5 -> the latest (5) continues 2, 3, 6, 7
    assert index.draft(tokens, 4) == [2, 3, 6, 7]
    assert index.draft(tokens, 2) == [2, 3]
    # a copy that reaches the end of the context goes on from its own start: the repeat repeats
    assert index.draft(tokens, 6) == [2, 3, 6, 7, 2, 3]
    assert NgramIndex(2).draft([1, 2, 1, 2, 1], 5) == [2, 1, 2, 1, 2]
    assert NgramIndex(3).draft([8, 8, 8], 4) == [8, 8, 8, 8]
    # a longer match wins over a later shorter one: (5, 6, 7) matched at 0 -> 1, 9
    tokens = [5, 6, 7, 1, 9, 8, 6, 7, 4, 5, 6, 7]
    assert NgramIndex(3).draft(tokens, 2) == [1, 9]
    assert NgramIndex(2).draft(tokens, 2) == [4, 5]  # only bigrams: the latest (6, 7) is at 6
    # no match at all
    assert NgramIndex(3).draft([1, 2, 3, 4], 3) == []
    assert NgramIndex(3).draft([1], 3) == [] and NgramIndex(3).draft([1, 2, 1], 0) == []


def test_drafts_stop_before_an_end_token_and_the_index_grows_incrementally() -> None:
    index = NgramIndex(2)
    tokens = [4, 8, 9, 0, 3, 4]
    assert index.draft(tokens, 5, stop={0}) == [8, 9]
    assert index.draft(tokens, 5, stop={8}) == []
    tokens += [8, 9]  # the sequence grows: (8, 9) now continues with 0 ... and with nothing after the end
    assert index.seen == 6
    assert index.draft(tokens, 3) == [0, 3, 4]
    assert index.seen == len(tokens)
    with pytest.raises(ValueError, match="shrank"):
        index.draft(tokens[:3], 2)


def test_greedy_acceptance_keeps_the_agreeing_prefix_and_adds_the_models_token() -> None:
    import torch

    logits = torch.full((4, 6), -5.0)
    for row, best in enumerate([3, 1, 4, 2]):
        logits[row, best] = 5.0
    assert accept_greedy([3, 1, 4], logits) == [3, 1, 4, 2]  # all agree: one token more
    assert accept_greedy([3, 0, 4], logits[:4]) == [3, 1]  # first disagreement: the model's token there
    assert accept_greedy([0, 1, 4], logits) == [3]
    assert accept_greedy([], logits[:1]) == [3]


def _total_variation(counts: dict[int, int], probs: list[float]) -> float:
    total = sum(counts.values())
    return 0.5 * sum(abs(counts.get(token, 0) / total - p) for token, p in enumerate(probs))


def test_sampled_acceptance_keeps_the_target_distribution() -> None:
    """Each emitted token is distributed as the target says, whatever the draft proposes (fixed seed)."""
    import torch

    first = [0.05, 0.4, 0.3, 0.2, 0.05]  # the draft's first token (1) is likely, its second (4) is not
    second = [0.1, 0.1, 0.2, 0.1, 0.5]
    third = [0.25, 0.25, 0.25, 0.25, 0.0]
    probs = torch.tensor([first, second, third])
    generator = torch.Generator().manual_seed(1234)
    samples = 20_000
    heads: dict[int, int] = {}
    after: dict[int, int] = {}  # the second token, when the first was the draft's
    lengths: dict[int, int] = {}
    for _ in range(samples):
        out = accept_sampled([1, 4], probs, generator)
        heads[out[0]] = heads.get(out[0], 0) + 1
        lengths[len(out)] = lengths.get(len(out), 0) + 1
        if out[0] == 1:
            after[out[1]] = after.get(out[1], 0) + 1
        if len(out) == 3:
            assert out[:2] == [1, 4] and out[2] != 4  # the bonus token comes from the last row
    assert _total_variation(heads, first) < 0.015
    assert _total_variation(after, second) < 0.02
    assert abs(lengths[3] / samples - 0.4 * 0.5) < 0.015  # both accepted: p(1) * p(4)
    # a draft token the target gives no mass is never emitted
    never = torch.tensor([[0.5, 0.0, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    assert all(accept_sampled([1], never, generator)[0] != 1 for _ in range(500))
    # ... and one it gives all of it always is
    certain = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert all(accept_sampled([1], certain, generator) == [1, 2] for _ in range(50))


def test_rows_without_drafts_are_drawn_together_as_plain_decoding_draws_them() -> None:
    import torch

    torch.manual_seed(0)
    logits = torch.randn(3, 3, 7)
    probs = torch.softmax(logits, dim=-1)
    rows = accept_rows([[], [], []], probs, sample=True, generators=torch.Generator().manual_seed(5))
    plain = torch.multinomial(probs[:, 0], 1, generator=torch.Generator().manual_seed(5)).squeeze(1).tolist()
    assert [row[0] for row in rows] == plain and all(len(row) == 1 for row in rows)
    greedy = accept_rows([[], [int(logits[1, 0].argmax()), 0], []], logits, sample=False)
    assert greedy[0] == [int(logits[0, 0].argmax())] and greedy[1][0] == int(logits[1, 0].argmax())
    assert len(greedy[1]) >= 2
    seeded = [torch.Generator().manual_seed(seed) for seed in (1, 2, 3)]
    per_row = accept_rows([[], [2], []], probs, sample=True, generators=seeded)
    again = accept_rows([[], [2], []], probs, sample=True,
                        generators=[torch.Generator().manual_seed(seed) for seed in (1, 2, 3)])
    assert per_row == again


def test_target_probs_apply_temperature_and_a_renormalised_nucleus() -> None:
    import torch

    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    plain = target_probs(logits, 1.0)
    assert torch.allclose(plain, torch.softmax(logits, dim=-1))
    nucleus = target_probs(logits, 1.0, top_p=0.8)
    assert float(nucleus.sum()) == pytest.approx(1.0) and float(nucleus[0, -1]) == 0.0
    assert float(target_probs(logits, 1.0, top_p=1e-6)[0, 0]) == pytest.approx(1.0)  # the top token always stays


def test_settings_are_validated_with_clear_errors() -> None:
    assert PromptLookup() == PromptLookup(True, 8, 3)
    with pytest.raises(ValueError, match="draft length must be an integer of at least 1"):
        PromptLookup(draft=0)
    with pytest.raises(ValueError, match="n-gram size must be an integer of at least 1"):
        PromptLookup(ngram=0)
    with pytest.raises(ValueError, match="n-gram size"):
        PromptLookup(ngram=2.5)  # type: ignore[arg-type]
    assert PromptLookup.from_options({"lookup_draft": 2}) == PromptLookup(True, 2, 3)
    assert PromptLookup.from_options({}, PromptLookup(False, 5, 2)) == PromptLookup(False, 5, 2)
    with pytest.raises(ValueError, match="prompt_lookup must be true or false"):
        PromptLookup.from_options({"prompt_lookup": "maybe"})
    stats = LookupStats()
    stats.record(4, 2, 3)
    stats.add(LookupStats(1, 1, 0, 0))
    assert (stats.passes, stats.tokens, stats.drafted, stats.accepted) == (2, 4, 4, 2)
    assert stats.tokens_per_pass == 2.0 and LookupStats().tokens_per_pass == 0.0
