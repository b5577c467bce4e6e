"""Episode-state trackers and the route table: the map, place views, entity records, choosing a source."""

from __future__ import annotations

import json

from worldsmith.sim.harness import Harness
from worldsmith.sim.routing import choose_route
from worldsmith.sim.trackers import AlignedEvidence, CandidateAnswer, EntityTracker, PlaceTracker, structured_layout
from worldsmith.traces import Action, Episode, Observation, Turn
from worldsmith.worldbook import Evidence, Worldbook
from worldsmith.worldbook.route_table import RouteTable

KITCHEN = "-= Kitchen =-\nYou are in a kitchen.\n\nThere is an exit to the north."
PANTRY = "-= Pantry =-\nYou are in a pantry.\n\nThere is an exit to the south."


def _evidence(episode: str, turns: list[tuple[str, str]]) -> list[Evidence]:
    return [Evidence(turn_id=f"{episode}#{i}", action=text.split()[0], action_text=text, observation=obs)
            for i, (text, obs) in enumerate(turns)]


def test_the_way_back_is_learned_from_evidence_and_leads_to_the_room_already_described() -> None:
    # another game: north and south undo each other there
    tracker = PlaceTracker(_evidence("g1", [("go north", "-= Hall =-\nA hall."), ("go south", "-= Den =-\nA den.")])
                           + _evidence("g0", [("look", "-= Den =-\nA den."), ("go north", "-= Hall =-\nA hall."),
                                              ("go south", "-= Den =-\nA den.")]))
    assert tracker.inverse["go north"] == "go south"
    tracker.reset("Welcome! Your task is to find the key.\n\n" + KITCHEN)
    assert tracker.place == "kitchen"
    tracker.observe("go", "go north", PANTRY)
    proposals = {p.source: p.observation for p in tracker.propose("go", "go south")}
    assert proposals["map"] == KITCHEN  # the greeting before the room header is not part of the room
    assert "place_memory" not in proposals  # never went south from the pantry
    assert {p.source: p.observation for p in tracker.propose("look", "look")}["place_view"] == PANTRY


def test_a_move_from_another_room_is_not_remembered_as_this_rooms_answer() -> None:
    tracker = PlaceTracker()
    tracker.reset(KITCHEN)
    tracker.observe("go", "go north", PANTRY)
    tracker.observe("go", "go south", KITCHEN)
    tracker.observe("go", "go north", PANTRY)
    here = {p.source: p.observation for p in tracker.propose("go", "go north")}
    assert "place_memory" not in here and "map" not in here  # north from the pantry: never tried


def test_entity_reads_answer_with_the_record_as_last_shown_in_the_tools_layout() -> None:
    record = {"reservation_id": "R1", "status": "active", "flights": [{"flight_number": "HAT1"}]}
    evidence = [Evidence(turn_id=f"e{i}#0", action="get_reservation_details",
                         arguments={"reservation_id": rid}, action_text=f"get_reservation_details({rid})",
                         observation=json.dumps({**record, "reservation_id": rid}))
                for i, rid in enumerate(["R7", "R8", "R9"])]
    tracker = EntityTracker(evidence)
    assert tracker.selector["get_reservation_details"] == ("reservation_id", "reservation_id")
    cancelled = json.dumps({**record, "status": "cancelled"})
    tracker.observe("cancel_reservation", {"reservation_id": "R1"}, cancelled)  # a write that returns the record
    [proposal] = tracker.propose("get_reservation_details", {"reservation_id": "R1"})
    assert proposal.observation == cancelled
    assert tracker.propose("get_reservation_details", {"reservation_id": "R2"}) == []
    assert structured_layout('{"a":1,"b":[1,2]}') == (",", ":", False)


def test_the_route_table_keeps_nearest_evidence_where_a_source_lost_held_out() -> None:
    table = RouteTable(folds=2)
    for _ in range(4):
        table.record("get_user", "rule", exact=False, nearest_exact=True)  # a constant record: loses
        table.record("look", "place_view", exact=True, nearest_exact=False)
    rule = CandidateAnswer("rule", "someone else's profile", rule="r1")
    chosen, notes = choose_route(table, "get_user", [rule])
    assert chosen is None and "lost 4" in notes[0]
    view = CandidateAnswer("place_view", PANTRY)
    assert choose_route(table, "look", [view])[0] is view
    assert choose_route(None, "get_user", [rule])[0] is rule  # no table (an older book): rules first


def test_harness_observe_is_teacher_forcing_and_its_map_answers_a_move_back() -> None:
    book = Worldbook(name="tw", evidence=_evidence("g0", [("look", "-= Den =-\nA den."),
                                                          ("go north", "-= Hall =-\nA hall."),
                                                          ("go south", "-= Den =-\nA den.")]))
    harness = Harness(book)
    harness.start(Episode(id="x", initial_observation=Observation(text=KITCHEN), turns=[]))
    harness.observe("go north", PANTRY)
    assert len(harness.history) == 1 and harness.tracked()["places"]["place"] == "pantry"
    prediction = harness.predict("go south")
    assert prediction.observation == KITCHEN and prediction.audit.route == "state:map"
    harness.start(Episode(id="y", initial_observation=Observation(text=KITCHEN), turns=[
        Turn(index=0, action=Action(name="go", arguments={"text": "north"}, raw="go north"),
             observation=Observation(text=PANTRY))]))
    assert harness.predict("go south").observation == KITCHEN  # the same from an observed prefix


def test_a_trajectory_that_shared_this_episodes_past_answers_as_it_did_after_the_same_calls() -> None:
    recorded = _evidence("base_1", [("ls()", '{"content": ["a.txt"]}'), ("cd(folder='docs')", '{"cwd": "docs"}'),
                                    ("ls()", '{"content": ["b.txt"]}')])
    other = _evidence("base_2", [("ls()", '{"content": ["z.txt"]}'), ("cd(folder='docs')", '{"cwd": "docs"}'),
                                 ("ls()", '{"content": ["y.txt"]}')])
    aligned = AlignedEvidence(recorded + other)
    assert aligned.propose("ls()") == []  # nothing shared yet: which store this is, is unknown
    aligned.observe("ls()", '{"content": ["a.txt"]}')
    aligned.observe("cd(folder='docs')", '{"cwd": "docs"}')
    [proposal] = aligned.propose("ls()")
    assert proposal.observation == '{"content": ["b.txt"]}'  # base_1's answer after the same cd, not its first ls


def test_a_source_never_right_or_only_pooled_for_an_action_specific_source_is_not_trusted() -> None:
    table = RouteTable(folds=2)
    for _ in range(3):
        table.record("unlock", "aligned_evidence", exact=False, nearest_exact=False)  # tied, never right
        table.record("look", "place_view", exact=True, nearest_exact=False)
    assert choose_route(table, "unlock", [CandidateAnswer("aligned_evidence", "x")])[0] is None
    # a place's view answers `look`; its pooled record says nothing about `unlock`
    assert choose_route(table, "examine", [CandidateAnswer("place_view", PANTRY)])[0] is None
    assert choose_route(table, "look", [CandidateAnswer("place_view", PANTRY)])[0] is not None


def test_schema_checks_compare_segments_so_any_key_fits_its_schema_path() -> None:
    from worldsmith.sim.harness import schema_problems
    from worldsmith.worldbook import Effect, StatePath, StateSchema

    book = Worldbook(name="t", state_schema=StateSchema(paths=[StatePath(path="world.indicators[MA(20)]"),
                                                               StatePath(path="world.contents.{key}")]))
    fits = [Effect(op="set", path="world.indicators[MA(20)]", value=1),
            Effect(op="append", path="world.contents[arg.target]", value="x")]
    assert schema_problems(book, fits, {"target": "bed 1"}) == []
    [problem] = schema_problems(book, [Effect(op="set", path="world.indicators[MA(50)]", value=1)], {})
    assert "MA(50)" in problem


def test_a_write_that_sets_the_same_fields_answers_with_the_record_as_fetched_those_fields_set() -> None:
    def record(rid: str, status: str) -> str:
        return json.dumps({"reservation_id": rid, "user_id": "mia", "status": status, "cabin": "economy"})

    evidence = []
    for episode, rid in enumerate(["R1", "R2", "R3"]):
        for index, (action, observation) in enumerate([("get_reservation_details", record(rid, "active")),
                                                       ("cancel_reservation", record(rid, "cancelled"))]):
            evidence.append(Evidence(turn_id=f"e{episode}#{index}", action=action, arguments={"reservation_id": rid},
                                     action_text=f"{action}({rid})", observation=observation))
    tracker = EntityTracker(evidence)
    assert tracker.sets == {"cancel_reservation": {"status": "cancelled"}}
    tracker.reset()
    assert tracker.propose("cancel_reservation", {"reservation_id": "R9"}) == []  # never shown: unknown
    tracker.observe("get_reservation_details", {"reservation_id": "R9"}, record("R9", "active"))
    [proposal] = tracker.propose("cancel_reservation", {"reservation_id": "R9"})
    assert proposal.observation == record("R9", "cancelled")


def test_a_turn_counter_learned_from_evidence_prints_this_episodes_count() -> None:
    from worldsmith.sim.trackers import TurnCounter

    evidence = [item for episode, length in (("a", 3), ("b", 5)) for item in _evidence(episode, [
        *[("wait", "Time passes.")] * (length - 1), ("eat meal", f"You eat.\nYou scored 1 of 1, in {length + 1} turns.")])]
    counter = TurnCounter(evidence)
    assert counter.counters == {"You scored # of #, in # turns.": (2, 1)}
    assert counter.fix("You eat.\nYou scored 1 of 1, in 4 turns.", 9) == "You eat.\nYou scored 1 of 1, in 10 turns."
    assert counter.fix("Time passes.", 9) == "Time passes."


def test_a_number_seen_only_at_one_position_is_no_turn_counter() -> None:
    from worldsmith.sim.trackers import TurnCounter

    record = '{"user_id": "u1", "address": {"line1": "1 Elm St", "line2": ""}}'  # two recordings of one task
    evidence = [item for episode in ("a-expert", "a-probing") for item in _evidence(
        episode, [("find user", "u1"), ("get user", record)])]
    counter = TurnCounter(evidence)
    assert counter.counters == {}
    assert counter.fix(record, 3) == record


def test_a_form_naming_the_current_place_is_learned_and_filled_with_where_the_agent_is() -> None:
    def arrive(place: str) -> str:
        return f"You arrive at loc 3. On the {place}, you see nothing."

    evidence = [item for episode, place in (("a", "desk 1"), ("b", "bed 2"), ("c", "shelf 4")) for item in _evidence(
        episode, [(f"go to {place}", arrive(place)), ("look", f"You are facing the {place}. Next to it, you see nothing.")])]
    tracker = PlaceTracker(evidence)
    tracker.reset("You are in the middle of a room.")
    tracker.observe("go", "go to sofa 1", arrive("sofa 1"))
    forms = {p.source: p.observation for p in tracker.propose("look", "look")}
    assert forms["place_form"] == "You are facing the sofa 1. Next to it, you see nothing."


def test_without_evidence_of_going_back_the_compass_opposite_is_the_way_back() -> None:
    tracker = PlaceTracker()  # expert recordings rarely go back: nothing to learn the inverse from
    tracker.reset(KITCHEN)
    tracker.observe("go", "go north", PANTRY)
    assert {p.source: p.observation for p in tracker.propose("go", "go south")}["map"] == KITCHEN


def _counters_by_sets(evidence: list[Evidence]) -> dict[str, tuple[int, int]]:
    """The turn counter as it was learned before its odd numbers were skipped: every (form, number)'s offsets and
    positions as sets, then the forms with one offset in 0..2 at two positions at least."""
    import re
    from collections import defaultdict

    from worldsmith.worldbook.induce import group_by_episode

    number = re.compile(r"\d+")
    offsets: dict[tuple[str, int], set[int]] = defaultdict(set)
    positions: dict[tuple[str, int], set[int]] = defaultdict(set)
    for items in group_by_episode(evidence).values():
        for position, item in enumerate(items, 1):
            for line in item.observation.split("\n"):
                numbers = number.findall(line)
                if numbers:
                    form = number.sub("#", line.strip())
                    for index, found in enumerate(numbers):
                        positions[(form, index)].add(position)
                        offsets[(form, index)].add(int(found) - position)
    counters: dict[str, tuple[int, int]] = {}
    for (form, index), found in offsets.items():
        if len(found) == 1 and len(positions[(form, index)]) >= 2:
            offset = found.pop()
            if 0 <= offset <= 2 and form not in counters:
                counters[form] = (index, offset)
    return counters


def test_turn_counter_skipping_odd_numbers_learns_what_the_sets_learned() -> None:
    from helpers import sample_episodes
    from worldsmith.sim.turn_counter import TurnCounter
    from worldsmith.worldbook.templates import evidence_from_episodes

    learned = 0
    for name in ("textworld", "textworld_curious", "bfcl_curious", "alfworld_curious", "scienceworld", "shell"):
        evidence = evidence_from_episodes(sample_episodes(name))
        counters = TurnCounter(evidence).counters
        assert list(counters.items()) == list(_counters_by_sets(evidence).items()), name
        learned += len(counters)
    assert learned  # some sample prints its turn count
    made = [Evidence(turn_id=f"e{e}#{i}", action="look", action_text="look", observation=text)
            for e in range(2) for i, text in enumerate(["Score 0 in 1 turns.\nid 77", "Score 3 in 2 turns.\nid 78",
                                                        "Score 3 in 3 turns.\nid 5"])]
    assert TurnCounter(made).counters == _counters_by_sets(made) == {"Score # in # turns.": (1, 0)}
