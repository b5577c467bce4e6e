"""The local transformers backend on the shipped tiny model: usage, sampling, stops, prefix reuse, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from worldsmith.llm import BackendUnavailableError, ContextOverflowError, LLMBase, ModelSpec, make_llm
from worldsmith.llm.hf import HFLLM, from_spec

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "data_samples" / "models" / "tiny"
JOINT = REPO / "data_samples" / "models" / "tiny-envace-joint"  # the EnvACE-trained checkpoint

SYSTEM = (
    "You are an agent in the text environment alfworld/pick_cool_then_place_in_recep.\n"
    "Task: put a cool bowl in cabinet.\nReply with your next action only."
)
ROOM = (
    "You are in the middle of a room. Looking quickly around you, you see a cabinet 3, a cabinet 2, "
    "a cabinet 1, a countertop 1, a diningtable 1, a fridge 1, a sinkbasin 1, and a stoveburner 1."
)
CONV = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ROOM}]


def extend(conversation: list[dict], answer: str, observation: str) -> list[dict]:
    return [*conversation, {"role": "assistant", "content": answer}, {"role": "user", "content": observation}]


@pytest.fixture(scope="module")
def llm() -> HFLLM:
    backend = make_llm(f"tiny:{TINY}")
    assert isinstance(backend, HFLLM)
    return backend


@pytest.fixture(scope="module")
def cold() -> HFLLM:
    """The same model without prefix reuse: the reference every cached answer must match."""
    return make_llm(f"tiny:{TINY}?prefix_cache=0")  # type: ignore[return-value]


def test_chat_returns_completions_with_usage(llm: HFLLM) -> None:
    [completion] = llm.chat(CONV, max_tokens=12)
    assert completion.text.strip() and completion.finish_reason in ("stop", "length")
    assert completion.prompt_tokens == len(llm.encode(CONV)) > 50
    assert 1 <= completion.completion_tokens <= 12
    assert completion.latency_s > 0 and completion.cost_usd == 0.0
    assert completion.backend == "tiny" and completion.model == str(TINY) and not completion.cached
    assert isinstance(llm, LLMBase) and llm.spec.startswith("tiny:")


def test_chat_many_keeps_order_and_n(llm: HFLLM, cold: HFLLM) -> None:
    conversations = [CONV, [{"role": "user", "content": "look"}], extend(CONV, "go to fridge 1", "The fridge 1 is closed.")]
    many = llm.chat_many(conversations, max_tokens=8, n=2, temperature=0.9, seed=5)
    assert [len(group) for group in many] == [2, 2, 2]
    # the prompt is counted once, on the first choice
    assert [[c.prompt_tokens for c in group] for group in many] == [[len(llm.encode(conv)), 0] for conv in conversations]
    assert all(c.completion_tokens >= 1 and c.cached_tokens == 0 for c in many[0][1:])
    # greedy answers in a batch are those of one-by-one calls on a cold backend
    batched = [group[0].text for group in llm.chat_many(conversations, max_tokens=10)]
    single = [cold.chat(conversation, max_tokens=10)[0].text for conversation in conversations]
    assert batched == single
    assert llm.chat_many([], max_tokens=4) == []


def test_seeded_sampling_is_reproducible(llm: HFLLM, cold: HFLLM) -> None:
    first = [c.text for c in llm.chat(CONV, max_tokens=16, temperature=1.0, seed=11, n=3)]
    again = [c.text for c in cold.chat(CONV, max_tokens=16, temperature=1.0, seed=11, n=3)]
    assert first == again
    inside = llm.chat_many([[{"role": "user", "content": "look"}], CONV], max_tokens=16, temperature=1.0, seed=11, n=3)[1]
    assert [c.text for c in inside] == first  # independent of what else is in the batch
    assert len(set(first)) > 1  # the n completions are different draws
    others = {c.text for seed in (1, 2, 3) for c in llm.chat(CONV, max_tokens=16, temperature=1.0, seed=seed)}
    assert len(others) > 1
    top = llm.chat(CONV, max_tokens=16, temperature=1.0, top_p=1e-6, seed=3)[0].text
    assert top == llm.chat(CONV, max_tokens=16)[0].text  # a vanishing nucleus is greedy


def test_stop_strings_and_length(llm: HFLLM) -> None:
    [full] = llm.chat(CONV, max_tokens=24)
    assert full.finish_reason == "length" or full.completion_tokens < 24
    words = full.text.split()
    assert len(words) >= 2, full.text
    stop = " " + words[1]
    [stopped] = llm.chat(CONV, max_tokens=24, stop=[stop, "never-appears"])
    assert stopped.finish_reason == "stop" and stopped.text == full.text[: full.text.index(stop)]
    assert stopped.completion_tokens < full.completion_tokens or full.finish_reason == "stop"
    [short] = llm.chat(CONV, max_tokens=3)
    assert short.finish_reason == "length" and short.completion_tokens == 3


def test_prefix_reuse_matches_a_cold_backend(cold: HFLLM) -> None:
    llm = make_llm(f"tiny:{TINY}")
    [act] = llm.chat(CONV, max_tokens=12)
    assert act.cached_tokens == 0 and act.extra["prefill_tokens"] == act.prompt_tokens
    rehearse = extend(CONV, act.text, "What does the environment show after this action?")
    [again] = llm.chat(rehearse, max_tokens=12)
    assert again.cached_tokens >= act.prompt_tokens  # the prompt, and the answer when it re-tokenizes the same
    assert again.extra["prefill_tokens"] == again.prompt_tokens - again.cached_tokens
    [reference] = cold.chat(rehearse, max_tokens=12)
    assert reference.cached_tokens == 0 and again.text == reference.text
    # the same prompt again: all but its last token come from the cache
    [repeat] = llm.chat(rehearse, max_tokens=12)
    assert repeat.cached_tokens == repeat.prompt_tokens - 1 and repeat.text == again.text
    # a batch mixing a cached prefix and a new prompt still answers each like a cold backend
    branch = extend(CONV, act.text, "Nothing happens.")
    mixed = llm.chat_many([branch, [{"role": "user", "content": "inventory"}]], max_tokens=12)
    assert mixed[0][0].cached_tokens > 0 and mixed[1][0].cached_tokens == 0
    assert [m[0].text for m in mixed] == [cold.chat(c, max_tokens=12)[0].text for c in (branch, [{"role": "user", "content": "inventory"}])]
    stats = llm.prefix_cache_stats
    assert stats.hits >= 3 and stats.reused_tokens > 0 and 0 < stats.entries <= 8
    llm.clear_prefix_cache()
    assert llm.prefix_cache_stats.entries == 0
    assert llm.chat(rehearse, max_tokens=12)[0].cached_tokens == 0


def test_options_from_the_spec() -> None:
    llm = make_llm(f"hf:{TINY}?max_batch=2&prefix_cache=0&dtype=float32&device=cpu&api_key_env=IGNORED")
    assert isinstance(llm, HFLLM) and llm.backend == "hf" and llm.max_batch == 2
    conversations = [[{"role": "user", "content": f"go to cabinet {i}"}] for i in range(5)]
    results = llm.chat_many(conversations, max_tokens=4)
    assert len(results) == 5 and all(group[0].backend == "hf" and group[0].cached_tokens == 0 for group in results)
    with pytest.raises(ValueError, match="dtype"):
        make_llm(f"hf:{TINY}?dtype=int3")


def test_errors(llm: HFLLM, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(BackendUnavailableError, match="nowhere"):
        from_spec(ModelSpec(kind="hf", model=str(missing)))
    with pytest.raises(ValueError, match="no model folder"):
        make_llm(f"hf:{missing}")
    empty = tmp_path / "not_a_model"
    empty.mkdir()
    (empty / "notes.txt").write_text("hello")
    with pytest.raises(BackendUnavailableError, match="not_a_model"):
        make_llm(f"hf:{empty}")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{\"model_type\": \"no-such-architecture\"}")
    with pytest.raises(BackendUnavailableError, match="broken"):
        make_llm(f"hf:{broken}")
    long = [{"role": "user", "content": "go to cabinet 1. " * 2000}]
    with pytest.raises(ContextOverflowError, match="context window"):
        llm.chat(long, max_tokens=4)
    with pytest.raises(ValueError):
        llm.chat([{"role": "robot", "content": "x"}])
    # a prompt near the window: generation stops at the window, reported as "length"
    near = [{"role": "user", "content": "a " * (llm.context_window - 20)}]
    prompt = len(llm.encode(near))
    if prompt < llm.context_window:
        [capped] = llm.chat(near, max_tokens=64)
        assert capped.completion_tokens <= llm.context_window - prompt


# -- prompt lookup ----------------------------------------------------------------------------------

LISTING = ("ls -a returned: {\"current_directory_content\": [\"report_2024.txt\", \"notes.md\", \"archive\", "
           "\"budget_final.xlsx\"]}. Then cat report_2024.txt returned: {\"file_content\": \"quarterly numbers\"}")
COPYING = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": LISTING},
    {"role": "assistant", "content": "cat(file_name='report_2024.txt')"},
    {"role": "user", "content": LISTING + " Repeat the listing."},
]


@pytest.fixture(scope="module")
def random_model(random_chat_model: Path) -> Path:
    return random_chat_model


def _pair(path: Path, extra: str = "") -> tuple[HFLLM, HFLLM]:
    on = make_llm(f"hf:{path}?lookup_draft=5{extra}")
    off = make_llm(f"hf:{path}?prompt_lookup=false{extra}")
    assert isinstance(on, HFLLM) and isinstance(off, HFLLM) and on.lookup.enabled and not off.lookup.enabled
    return on, off


@pytest.mark.parametrize("model", ["tiny", "joint", "random"])
def test_lookup_gives_the_greedy_text_of_plain_decoding(model: str, random_model: Path) -> None:
    on, off = _pair({"tiny": TINY, "joint": JOINT}.get(model, random_model))
    conversations = [COPYING, CONV, extend(CONV, "go to fridge 1", "The fridge 1 is closed."),
                     [{"role": "user", "content": "look look look look look"}]]
    for max_tokens in (1, 2, 7, 40):
        for conversation in conversations:
            assert on.chat(conversation, max_tokens=max_tokens)[0].text == off.chat(conversation, max_tokens=max_tokens)[0].text
    # a batch: rows of different lengths draft and accept on their own
    batched = [group[0] for group in on.chat_many(conversations, max_tokens=30)]
    plain = [group[0] for group in off.chat_many(conversations, max_tokens=30)]
    assert [c.text for c in batched] == [c.text for c in plain]
    assert [c.completion_tokens for c in batched] == [c.completion_tokens for c in plain]
    assert [c.finish_reason for c in batched] == [c.finish_reason for c in plain]
    stats = on.lookup_stats
    assert stats.passes > 0 and stats.tokens >= stats.passes and stats.drafted > 0
    assert off.lookup_stats.tokens == off.lookup_stats.passes and off.lookup_stats.drafted == 0
    if model == "random":
        assert stats.accepted > 10 and stats.tokens_per_pass > 1.2  # the verify path really ran
    # stop strings end a completion inside an accepted draft as they end it token by token
    [full] = off.chat(COPYING, max_tokens=40)
    for word in full.text.split()[1:4]:
        [a], [b] = on.chat(COPYING, max_tokens=40, stop=[word]), off.chat(COPYING, max_tokens=40, stop=[word])
        assert (a.text, a.finish_reason, a.completion_tokens) == (b.text, b.finish_reason, b.completion_tokens)


def test_lookup_with_prefix_reuse_matches_a_cold_plain_backend(random_model: Path) -> None:
    on = make_llm(f"hf:{random_model}?lookup_draft=6")
    cold = make_llm(f"hf:{random_model}?prompt_lookup=false&prefix_cache=0")
    [act] = on.chat(COPYING, max_tokens=24)
    rehearse = extend(COPYING, act.text, "What does the environment show after this action?")
    [again] = on.chat(rehearse, max_tokens=24)
    assert again.cached_tokens >= act.prompt_tokens
    assert again.text == cold.chat(rehearse, max_tokens=24)[0].text
    # the answer stored with its prompt (the rejected draft columns were dropped) serves the next turn exactly
    following = extend(rehearse, again.text, "And then?")
    [third] = on.chat(following, max_tokens=24)
    assert third.cached_tokens > again.prompt_tokens and third.text == cold.chat(following, max_tokens=24)[0].text


def test_seeded_sampling_with_lookup_is_reproducible_and_batch_independent(random_model: Path) -> None:
    on, _ = _pair(random_model)
    for temperature in (0.1, 1.0):  # a random model's argmax is sharp only when cooled: drafts are accepted then
        first = [c.text for c in on.chat(COPYING, max_tokens=24, temperature=temperature, seed=4, n=3)]
        assert first == [c.text for c in on.chat(COPYING, max_tokens=24, temperature=temperature, seed=4, n=3)]
        inside = on.chat_many([CONV, COPYING], max_tokens=24, temperature=temperature, seed=4, n=3)[1]
        assert [c.text for c in inside] == first
        if temperature == 0.1:
            assert on.lookup_stats.accepted > 0


def test_lookup_options_from_the_spec() -> None:
    llm = make_llm(f"hf:{TINY}?lookup_draft=3&lookup_ngram=2&prefix_cache=0")
    assert isinstance(llm, HFLLM) and (llm.lookup.enabled, llm.lookup.draft, llm.lookup.ngram) == (True, 3, 2)
    assert not make_llm(f"hf:{TINY}?prompt_lookup=false").lookup.enabled  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="draft length"):
        make_llm(f"hf:{TINY}?lookup_draft=0")
    with pytest.raises(ValueError, match="n-gram size"):
        make_llm(f"hf:{TINY}?lookup_ngram=-1")
    with pytest.raises(ValueError, match="prompt_lookup must be true or false"):
        make_llm(f"hf:{TINY}?prompt_lookup=sometimes")


def test_text_is_cut_at_the_earliest_stop_string() -> None:
    from worldsmith.llm.hf import _cut_at_stop

    assert _cut_at_stop("go north. then south", (" then", ".")) == ("go north", True)
    assert _cut_at_stop("go north", ("", "west")) == ("go north", False)  # an empty stop string never cuts
    assert _cut_at_stop("go north", ()) == ("go north", False)
