"""Suffix conditions: a trailing line learned apart from its body, with the condition the evidence supports."""

from __future__ import annotations

from worldsmith.envs.base import as_action
from worldsmith.sim.harness import Harness
from worldsmith.sim.sources.suffixes import SuffixConditions, split_suffix
from worldsmith.traces import Episode, Observation, Turn
from worldsmith.worldbook import Evidence, Worldbook
from worldsmith.worldbook.route_table import RouteTable

POINT = "Your score has just gone up by one point."
GAP = "\n\n\n\n"


def _game(episode: str, recipe: list[str], takes: list[str]) -> list[Evidence]:
    """Read the recipe, then take things from the counter: those in the recipe earn a point (once)."""
    turns = [("examine cookbook", {"object": "cookbook"}, "Ingredients:\n" + "\n".join(recipe))]
    earned: set[str] = set()
    for thing in takes:
        answer = f"You take the {thing} from the counter."
        if thing in recipe and thing not in earned:
            answer += GAP + POINT
            earned.add(thing)
        turns.append((f"take {thing} from counter", {"object": thing, "source": "counter"}, answer))
    turns.append(("eat meal", {"object": "meal"}, "You eat the meal." + GAP + POINT))
    return [Evidence(turn_id=f"{episode}#{i}", action=line.split()[0], arguments=arguments, action_text=line,
                     observation=observation) for i, (line, arguments, observation) in enumerate(turns)]


EVIDENCE = [*_game("a", ["carrot", "leek"], ["knife", "carrot", "leek", "carrot"]),
            *_game("b", ["plum"], ["plum", "knife", "fork"]),
            *_game("c", ["fig", "yam"], ["yam", "fig", "spoon"])]


def test_split_suffix_cuts_at_the_last_blank_line() -> None:
    assert split_suffix("You take it." + GAP + POINT) == ("You take it.", GAP, POINT)
    assert split_suffix("You take it.") == ("You take it.", "", "")


def test_the_condition_is_learned_from_what_an_earlier_answer_named() -> None:
    rules = SuffixConditions(EVIDENCE).rules
    assert list(rules) == ["take"]  # eating always earns the point: no condition needed
    rule = rules["take"][0]
    assert (rule.suffix, rule.reference, rule.once) == (POINT, "examine cookbook", True)
    assert rule.correct == rule.labelled == 10
    assert SuffixConditions(EVIDENCE).snapshot() == {"take": [rule.describe()]}


def test_adjust_adds_the_point_for_a_recipe_thing_once_and_removes_it_otherwise() -> None:
    suffixes = SuffixConditions(EVIDENCE)
    suffixes.observe("examine cookbook", "Ingredients:\nbanana")
    take = {"object": "banana", "source": "counter"}
    plain = "You take the banana from the counter."
    assert suffixes.adjust("take", take, "take banana from counter", plain) == (
        plain + GAP + POINT, f"added {suffixes.rules['take'][0].describe()}")
    assert suffixes.adjust("take", take, "take banana from counter", plain + GAP + POINT) is None
    knife = "You take the knife from the counter."
    assert suffixes.adjust("take", {"object": "knife", "source": "counter"}, "take knife from counter",
                           knife + GAP + POINT)[0] == knife
    suffixes.observe("take banana from counter", plain + GAP + POINT)
    assert suffixes.adjust("take", take, "take banana from counter", plain + GAP + POINT)[0] == plain  # once
    assert suffixes.adjust("take", take, "take banana from counter", "You can't see any such thing.") is None
    suffixes.reset()
    assert suffixes.adjust("take", take, "take banana from counter", plain) is None  # no recipe read yet


def test_no_rule_without_a_contrast_or_enough_support() -> None:
    always = [item for item in EVIDENCE if item.action != "take" or POINT in item.observation]
    assert SuffixConditions(always).rules == {}
    assert SuffixConditions(_game("a", ["carrot"], ["carrot", "knife"])).rules == {}


def _episode() -> Episode:
    turns = [("examine cookbook", "Ingredients:\nbanana"),
             ("take banana from counter", "You take the banana from the counter." + GAP + POINT)]
    return Episode(id="e", task="cook", initial_observation=Observation(text="Kitchen."), turns=[
        Turn(index=i, action=as_action(line), observation=Observation(text=text))
        for i, (line, text) in enumerate(turns)])


def test_the_harness_adjusts_only_where_the_route_table_says_it_helps() -> None:
    def answer(table: RouteTable | None) -> str:
        harness = Harness(Worldbook(name="b", evidence=EVIDENCE, routes=table))
        episode = _episode()
        harness.start(episode.model_copy(update={"turns": []}))
        harness.observe(episode.turns[0].action, episode.turns[0].observation.text)
        return harness.predict(episode.turns[1].action).observation

    helped = RouteTable(folds=2)
    for _ in range(3):
        helped.record("take", "suffix", True, False)
    hurt = RouteTable(folds=2)
    for right, base in ((False, True), (False, True), (True, False)):
        hurt.record("take", "suffix", right, base)
    assert answer(helped).endswith(POINT)
    assert not answer(hurt).endswith(POINT) and not answer(None).endswith(POINT)
