"""The episode replay of induction: votes on conditions, proposals of effects, and their settling by later turns."""

from __future__ import annotations

from collections import Counter
from typing import Any

from worldsmith.worldbook import Effect, Evidence
from worldsmith.worldbook.induce import (
    CandidateKey,
    EffectKey,
    EpisodeReplay,
    Form,
    FormKey,
    FormTag,
    ReplayContext,
    Vote,
    induce_forms,
)

Step = tuple[str, dict[str, Any], str]


def _turns(episode: str, steps: list[Step]) -> list[Evidence]:
    return [Evidence(turn_id=f"{episode}#{i}", action=action, arguments=args, action_text=action,
                     observation=observation, outcome="success") for i, (action, args, observation) in enumerate(steps)]


def _look(items: str) -> Step:
    return "go", {"target": "table 1"}, f"You arrive at loc 1. On the table 1, you see {items}."


def _replay(evidence: list[Evidence]) -> EpisodeReplay:
    return EpisodeReplay(ReplayContext.of(evidence, induce_forms(evidence))).run(evidence)


TAKE: Step = ("take", {"object": "cup 1", "source": "table 1"}, "You pick up the cup 1 from the table 1.")
PUT_BACK: Step = ("put", {"object": "cup 1", "target": "table 1"}, "You put the cup 1 in/on the table 1.")
TAKEN = CandidateKey(FormTag("take", "You pick up the {arg.object} from the {arg.source}."),
                     EffectKey("remove", "world.contents.{arg.source}", "{arg.object}"))


def test_a_proposal_is_confirmed_or_contradicted_by_the_next_turn_that_shows_its_path() -> None:
    evidence = (_turns("gone", [_look("a cup 1, and a pen 1"), TAKE, _look("a pen 1")])
                + _turns("still", [_look("a cup 1, and a pen 1"), TAKE, _look("a cup 1, and a pen 1")])
                # `put` names the cup and the table: it may have moved the cup back, so the last look proves nothing
                + _turns("back", [_look("a cup 1, and a pen 1"), TAKE, PUT_BACK, _look("a cup 1, and a pen 1")]))
    record = _replay(evidence).candidates["take"][TAKEN]
    assert (record.confirmations, record.contradictions) == (["gone#1"], ["still#1"])


def test_nothing_is_proposed_where_the_state_before_the_turn_is_unknown() -> None:
    replay = _replay(_turns("blind", [TAKE, _look("a pen 1")]))
    assert replay.candidates == {}


def test_a_stated_property_votes_against_the_state_before_the_turn() -> None:
    opened = ("open", {"object": "fridge 1"}, "You open the fridge 1. The fridge 1 is open.")
    evidence = (_turns("seen", [("examine", {"object": "fridge 1"}, "The fridge 1 is closed."), opened])
                + _turns("unseen", [opened]))
    path = "world.status.{arg.object}"
    assert _replay(evidence).votes[FormKey("open", 1)] == Counter({Vote(path, "open", "changed"): 1,
                                                                   Vote(path, "open", "unknown"): 1})


def test_forms_that_read_alike_keep_their_votes_apart_and_share_their_effects() -> None:
    first = _turns("a", [_look("a cup 1"), TAKE, _look("nothing")])
    second = _turns("b", [_look("a cup 1"), TAKE, _look("nothing")])
    template = "You pick up the {arg.object} from the {arg.source}."
    forms = {"go": induce_forms(first + second)["go"],
             "take": [Form("take", template, turns=["a#1"]), Form("take", template, turns=["b#1"])]}
    context = ReplayContext.of(first + second, forms)
    assert (context.form_of["a#1"].key, context.form_of["b#1"].key) == (FormKey("take", 1), FormKey("take", 2))
    replay = EpisodeReplay(context).run(first + second)
    assert replay.votes[FormKey("take", 1)] == replay.votes[FormKey("take", 2)]  # one vote each, kept apart
    assert sum(replay.votes[FormKey("take", 1)].values()) == 1
    assert replay.candidates["take"][TAKEN].confirmations == ["a#1", "b#1"]


def test_predicted_effects_carry_into_the_state_later_turns_are_checked_against() -> None:
    """`put` can only be seen to return the cup to a table that `take` is known to have emptied of it."""
    evidence = _turns("round", [_look("a cup 1, and a pen 1"), TAKE, PUT_BACK, _look("a cup 1, and a pen 1")])
    context = ReplayContext.of(evidence, induce_forms(evidence))
    returned = CandidateKey(FormTag("put", "You put the {arg.object} in/on the {arg.target}."),
                            EffectKey("append", "world.contents.{arg.target}", "{arg.object}"))
    assert returned not in EpisodeReplay(context).run(evidence).candidates["put"]
    removed = Effect(op="remove", path="world.contents.{arg.source}", value="{arg.object}")
    replay = EpisodeReplay(context, {TAKEN.form: [removed]}).run(evidence)
    assert replay.candidates["put"][returned].confirmations == ["round#2"]
    assert EffectKey.of(removed) == TAKEN.effect
