"""Evidence and templates on the collected sample traces (real ALFWorld, BFCL and shell episodes)."""

from __future__ import annotations

from helpers import sample_episodes
from worldsmith.worldbook import RuleStatus, build_worldbook
from worldsmith.worldbook.templates import (
    evidence_from_episodes,
    make_template,
    render_template,
    text_arguments,
)

episodes = sample_episodes


def test_text_arguments_name_the_phrases() -> None:
    assert text_arguments("apple 1 from countertop 1") == {"object": "apple 1", "source": "countertop 1"}
    assert text_arguments("apple 1 in/on countertop 1") == {"object": "apple 1", "target": "countertop 1"}
    assert text_arguments("to desk 1") == {"target": "desk 1"}
    assert text_arguments("potato 1 with microwave 1") == {"object": "potato 1", "tool": "microwave 1"}
    assert text_arguments("") == {}


def test_templates_round_trip_and_escape_braces() -> None:
    arguments = {"object": "apple 1", "source": "countertop 1"}
    observation = "You pick up the apple 1 from the countertop 1. {sic}"
    template = make_template(arguments, observation)
    assert template == "You pick up the {arg.object} from the {arg.source}. {{sic}}"
    assert render_template(template, arguments) == observation
    assert render_template(template, {"object": "pear 2"}) is None  # a slot without a value


def test_alfworld_pick_up_gets_an_argument_template_with_provenance() -> None:
    sample = episodes("alfworld")
    evidence = evidence_from_episodes(sample)
    assert len(evidence) == sum(len(e.turns) for e in sample)
    book = build_worldbook(sample, name="alfworld-sample").book  # the product's rules from these templates
    take = [r for r in book.rules if r.action == "take"]
    assert take and take[0].template == "You pick up the {arg.object} from the {arg.source}."
    assert take[0].status == RuleStatus.SUPPORTED and take[0].support >= 2
    turn_ids = {turn.id for e in sample for turn in e.turns}
    for rule in book.rules:  # every provenance link is a real turn of the sample
        assert set(rule.provenance.supporting) <= turn_ids and set(rule.provenance.contradicting) <= turn_ids
    assert book.supported_rules("take")


def test_json_tool_calls_use_their_named_arguments() -> None:
    rules = build_worldbook(episodes("bfcl"), name="bfcl-sample").book.rules
    assert any("{arg." in rule.template for rule in rules)
    assert all(rule.outcome.split(":")[0] in ("success", "failure") for rule in rules)


def test_observed_braces_and_literal_slots_round_trip_exactly() -> None:
    from worldsmith.worldbook.engine import match_template, render

    arguments = {"amount": "12", "account": "savings"}
    observation = '{"amount": 12, "account": "savings", "memo": "{arg.amount} of {world.balance}", "n": {"m": {}}}'
    template = make_template(arguments, observation)
    assert template == ('{{"amount": {arg.amount}, "account": "{arg.account}", "memo": "{{arg.amount}} of '
                        '{{world.balance}}", "n": {{"m": {{}}}}}}')
    assert render_template(template, arguments) == observation
    assert render(template, arguments, {}) == observation
    assert match_template(template, observation, arguments) == {}


def test_random_brace_heavy_observations_round_trip() -> None:
    import random

    rng = random.Random(3)
    words = ["{", "}", "{{", "}}", "{arg.x}", "{world.y}", "ab", "arg", "x", " ", '"', ":", "\\"]
    for _ in range(500):
        arguments = {"x": "".join(rng.choice(words) for _ in range(rng.randint(1, 3))), "y": rng.choice(words + ["cd"])}
        observation = "".join(rng.choice(words + [arguments["x"]]) for _ in range(rng.randint(0, 12)))
        assert render_template(make_template(arguments, observation), arguments) == observation, (arguments, observation)


def test_a_slot_that_cannot_be_filled_is_never_rendered() -> None:
    from worldsmith.worldbook.engine import render

    template = make_template({"amount": "12"}, '{"amount": 12}')
    assert template == '{{"amount": {arg.amount}}}'
    assert render_template(template, {}) is None  # not '{"amount": {arg.amount}}'
    assert render_template(template, {"amount": None}) is None
    assert render_template("Balance: {world.balance}", {"amount": "12"}) is None  # a state slot without state
    assert render("{world.balance} left", {}, {"world": {}}) is None
    assert render("{world.x[MA(20)]} and {arg.}", {}, {"world": {"x": {"MA(20)": 1}}}) is None  # malformed slots
    assert render("{{world.balance}} is a word, {so is this}", {}, {}) == "{world.balance} is a word, {so is this}"


def test_evidence_of_a_structured_call_keeps_its_arguments_as_the_harness_line() -> None:
    """A tool call recorded without raw text reads as the line the harness keys a pending step by, so the same
    call in the evidence and in a live episode has one key; a recorded text stays as it was."""
    from worldsmith.traces.actions import action_line
    from worldsmith.traces.model import Action, Episode, Observation, Turn

    calls = [Action(name="get_item", arguments={"item_id": "it_1"}),
             Action(name="get_item", arguments={"item_id": "it_2"}),
             Action(name="go", arguments={"text": "north"}, raw="go north")]
    episode = Episode(id="e", initial_observation=Observation(text=""), turns=[
        Turn(index=i, action=a, observation=Observation(text=f"answer {i}")) for i, a in enumerate(calls)])
    texts = [item.action_text for item in evidence_from_episodes([episode])]
    assert texts == [action_line(a) for a in calls]
    assert texts[0] != texts[1] and "it_1" in texts[0] and texts[2] == "go north"
