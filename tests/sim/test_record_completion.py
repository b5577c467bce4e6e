"""A record an episode showed only in part (a search lists a product's id, name and price) is read back whole:
the store keeps a later sighting's other fields, and the harness completes the episode's version from it."""

from __future__ import annotations

import json

from worldsmith.envs import make, make_policy, record_episode
from worldsmith.sim import build_simulator_book
from worldsmith.sim.harness import Harness
from worldsmith.traces.model import Episode
from worldsmith.worldbook import Evidence
from worldsmith.worldbook.record_store import RecordStore


def _evidence(turn: str, action: str, arguments: dict[str, object], answer: object) -> Evidence:
    return Evidence(turn_id=turn, action=action, arguments=arguments, action_text=action,
                    observation=json.dumps(answer))


def test_a_later_sighting_in_the_same_episode_adds_the_fields_the_first_lacked() -> None:
    product = {"product_id": "P-1", "name": "Lamp", "variants": {"v1": {"price": 3.0}}}
    store = RecordStore.from_evidence([
        _evidence("e1#0", "search", {"query": "lamp"}, [{"product_id": "P-1", "name": "Lamp", "from_price": 3.0}]),
        _evidence("e1#1", "get_product", {"product_id": "P-1"}, product),
        _evidence("e2#0", "search", {"query": "la"}, [{"product_id": "P-1", "name": "Lamp", "from_price": 2.5}])],
        readers={"search", "get_product"})
    stored = store.records[("product_id", "P-1")]
    assert stored.unstable == {"from_price"}  # it differs across episodes: a search's, not the product's
    assert store.get("product_id", "P-1") is None  # not every field is stable ...
    assert store.get("product_id", "P-1", stable_only=False) == product  # ... but the product's own fields are


def _collected(tasks: range, seed: int) -> list[Episode]:
    env = make("toolshop")
    return [record_episode(env, make_policy("expert", seed=seed), f"db=0:task={index}", max_steps=30)
            for index in tasks]


def test_collected_toolshop_reads_after_a_search_answer_as_the_real_api() -> None:
    """Expert runs of the real toolshop on 60 tasks to build from, the same tasks played again with another seed to
    answer (the store knows their products from the first runs): every product read the record sources propose is
    the real answer, and most complete a record the episode's search showed in part. (Their proposals, whichever
    answer the route table then prefers: the evidence of the same call may answer these replays as well.)"""
    book = build_simulator_book(_collected(range(60), seed=0), name="shop").book
    harness = Harness(book)
    answered, completed = 0, 0
    for episode in _collected(range(60), seed=1):
        for index, turn in enumerate(episode.turns):
            if turn.action.name != "get_product":
                continue
            harness.start(episode.model_copy(update={"turns": episode.turns[:index]}))
            name, arguments, _ = harness.canonical(turn.action)
            for proposal in harness.proposals(turn.action, name, arguments)[0]:
                if proposal.source in {"record_read", "record_store"}:
                    answered += 1
                    assert proposal.observation == turn.observation.text, turn.action
                    completed += any("did not show" in note for note in proposal.notes)
    assert answered >= 5 and completed >= 5, (answered, completed)
