"""Per-turn novelty: the value tokenizer, the book's index, an episode's growing prefix, and runs made before it."""

from __future__ import annotations

import orjson
import pytest

from worldsmith.evals.eval_records import records_frame
from worldsmith.evals.novelty import NoveltyIndex, call_key, text_values, vocabulary
from worldsmith.evals.report import build_report
from worldsmith.traces import Action, ContextEvent, Episode, Observation, Turn


@pytest.mark.parametrize(("text", "values"), [
    ("You arrive at loc 22.", ["arrive", "loc 22", "22"]),
    ("On the bed 1, you see a book 1, and a pen 2.", ["bed 1", "1", "see", "book 1", "pen 2", "2"]),
    ('Saved to "Quarterly Report.pdf" at 10:30', ["quarterly report.pdf", "saved", "10:30"]),
    ("Don't open Mia's box", ["don't open mia's box"]),  # an apostrophe in a word opens no quote
    ("$ ls\nnotes.txt\nagent@sandbox:~$", ["ls", "notes.txt", "agent@sandbox"]),
    ("one two three four five 6 and seven", ["6", "seven"]),  # a run longer than four words is prose
])
def test_text_values(text: str, values: list[str]) -> None:
    assert text_values(text) == values


def test_json_values_are_the_leaves_not_the_keys() -> None:
    record = {"user_id": "mia_li_3668", "name": {"first": "Mia"}, "gold": True, "miles": 1200,
              "note": "the flight was changed by the airline after the storm"}
    assert text_values(orjson.dumps(record).decode()) == ["mia_li_3668", "mia", "1200", "flight", "changed",
                                                          "airline", "storm"]


def test_vocabulary_keeps_ngrams_that_can_be_values() -> None:
    words = vocabulary("Take the mug 1 from the Bank of America.")
    assert {"take", "mug 1", "mug", "1", "bank of america", "bank", "america"} <= words
    assert not {"the", "the mug", "mug 1 from"} & words


def test_an_unseen_location_is_novel_and_a_seen_one_is_not() -> None:
    go = call_key("go", {"target": "desk 1"})
    index = NoveltyIndex(["You arrive at loc 7. On the desk 1, you see a pen 2.", "go to desk 1"],
                         {go: [["You arrive at loc 7. On the desk 1, you see a pen 2."]]})
    assert index.novel_values("You arrive at loc 22.", [], go) == ["loc 22", "22"]
    assert index.novel_values("You arrive at loc 22.", ["go to loc 22"], go) == []
    assert index.novel_values("You arrive at loc 7.", [], go) == []  # this call got loc 7 in the evidence
    # another call's numbers belong to another trial: ALFWorld's per-trial `loc N` is novel there
    assert index.novel_values("You arrive at loc 7.", [], call_key("go", {"target": "bed 1"})) == ["loc 7", "7"]
    assert index.novel_values("You arrive at desk.", []) == []  # a value without a digit: known anywhere


def test_a_value_in_the_book_evidence_for_the_same_call_is_not_novel() -> None:
    observation = '{"flight": "HAT136", "seats": 3}'
    call = call_key("get_flight", {"flight_number": "HAT136"})
    assert NoveltyIndex([]).novel_values(observation, [], call) == ["hat136", "3"]
    index = NoveltyIndex(["Flight HAT136 has 3 seats left."], {call: [["Flight HAT136 has 3 seats left."]]})
    assert index.novel_values(observation, [], call) == []


def test_an_entity_is_known_from_the_evidence_only_where_every_episode_of_the_call_showed_it() -> None:
    """Another game's things are another initial state's: a recipe or first inventory shows novel names."""
    inventory = call_key("inventory", {})
    answers = {inventory: [["You are carrying: a red apple and a knife."],
                           ["You are carrying nothing.", "You are carrying: a knife."]]}
    texts = [text for episode in answers[inventory] for text in episode] + ["take red apple", "take knife"]
    index = NoveltyIndex(texts,
                         answers, entities=["red apple", "knife"])
    # every word is in the evidence, but the red apple only in one episode's inventory: novel
    assert index.novel_values("You are carrying: a red apple and a knife.", [], inventory) == ["red apple"]
    assert index.novel_values("You are carrying: a red apple.", ["take red apple"], inventory) == []
    # not an entity: the environment's own words are known from anywhere in the evidence
    assert index.novel_values("You are carrying nothing.", [], call_key("look", {})) == []
    # without entities (a call answered once, or the same way by every episode), the old rule holds
    assert NoveltyIndex(["You are carrying: a red apple."]).novel_values("You are carrying: a red apple.") == []


def test_for_book_reads_entities_from_arguments_and_answers_per_episode() -> None:
    from worldsmith.worldbook.model import Evidence, Worldbook

    def item(episode: str, index: int, action: str, arguments: dict, text: str, observation: str) -> Evidence:
        return Evidence(turn_id=f"{episode}#{index}", action=action, arguments=arguments, action_text=text,
                        observation=observation)

    get = {"user_id": "mia_li_3668"}
    book = Worldbook(name="b", evidence=[
        item("a", 0, "open", {"object": "fridge"}, "open fridge", "You open the fridge, revealing a carrot."),
        item("b", 0, "open", {"object": "fridge"}, "open fridge", "You open the fridge, revealing a plum."),
        item("a", 1, "get_user", get, "get_user", '{"name": "Mia", "city": "Seattle"}'),
        item("b", 1, "get_user", get, "get_user", '{"name": "Mia", "city": "Seattle"}'),
        item("b", 2, "take", {"object": "plum"}, "take plum", "Taken."),
    ])
    index = NoveltyIndex.for_book(book)
    assert {"plum", "fridge", "mia_li_3668"} <= index.entities and "carrot" not in index.entities
    fridge = call_key("open", {"object": "fridge"})
    assert index.novel_values("You open the fridge, revealing a plum.", ["open fridge"], fridge) == ["plum"]
    assert index.novel_values("You open the fridge, revealing a carrot.", ["open fridge"], fridge) == []
    # a shared store: both episodes were answered the same record, so a new episode's read is knowable
    assert index.novel_values('{"name": "Mia", "city": "Seattle"}', [], call_key("get_user", get)) == []


def _episode(observations: list[str], *, task: str = "book a flight", opening: str = "Welcome.") -> Episode:
    return Episode(id="e", task=task, initial_observation=Observation(text=opening), turns=[
        Turn(index=i, action=Action(name="call", raw=f"get_record {i}"), observation=Observation(text=text),
             context=[ContextEvent(role="user", content="my id is mia_li_3668")] if i == 0 else [])
        for i, text in enumerate(observations)])


def test_a_json_record_shown_earlier_in_the_episode_is_not_novel() -> None:
    record = orjson.dumps({"user_id": "mia_li_3668", "membership": "gold", "city": "Seattle"}).decode()
    flags = NoveltyIndex([]).episode(_episode([record, "Your city is Seattle, membership gold.", record]))
    assert flags[0] == ["gold", "seattle"]  # the id was in the user's message, the rest is new
    assert flags[1] == [] and flags[2] == []  # shown at turn 0 (keys included): known from then on
    assert NoveltyIndex([]).episode(_episode([record] * 3), turns=2) == [["gold", "seattle"], []]


def test_the_task_opening_and_the_turns_own_action_are_known() -> None:
    episode = _episode(["Tacoma; records; get_record 0; empty."], task="find Tacoma", opening="Records ready.")
    assert NoveltyIndex([]).episode(episode) == [["empty"]]


def test_runs_made_before_the_flag_report_no_knowable_numbers() -> None:
    rows = [{"method": m, "episode_id": "e", "turn": t, "env_id": "x", "exact_match": 1.0, "error": None}
            for m in ("a", "b") for t in range(3)]
    report = build_report(records_frame(rows), run="old", protocol="next-obs", fingerprint="f", config={},
                          methods=["a", "b"], resamples=100)
    assert report["metrics"] == ["exact_match"] and "novel_share" not in report["methods"]["a"]
    flagged = [{**row, "novel": row["turn"] == 0} for row in rows]
    report = build_report(records_frame(flagged), run="new", protocol="next-obs", fingerprint="f", config={},
                          methods=["a", "b"], resamples=100)
    assert report["methods"]["a"]["novel_share"]["mean"] == pytest.approx(1 / 3)
    assert report["methods"]["a"]["exact_match_knowable"]["n"] == 2
    assert set(report["pairs"]["a vs b"]) == {"exact_match", "exact_match_knowable"}


def test_a_room_the_episode_has_not_shown_before_is_novel_even_in_known_words() -> None:
    kitchen = "-= Kitchen =-\nYou are in a kitchen."
    index = NoveltyIndex([kitchen, "-= Pantry =-\nYou are in a pantry."])  # every word known from other games
    episode = _episode(["-= Pantry =-\nYou are in a pantry.", kitchen, "-= Pantry =-\nYou are in a pantry."],
                       opening=f"Welcome!\n{kitchen}")
    assert index.episode(episode) == [["room pantry"], [], []]  # the opening showed the kitchen


def test_open_loop_a_value_shown_only_by_an_earlier_real_observation_is_novel() -> None:
    """Teacher forced the simulator read turn 0's real answer; open loop it never saw it, so turn 1's repeat of it
    is knowable teacher forced but novel open loop. The task, the opening and the actions are known either way."""
    record = orjson.dumps({"order": "W4471", "status": "pending"}).decode()
    episode = _episode([record, "Order W4471 is pending; Tacoma.", "Tacoma: get_record 2"],
                       task="find Tacoma", opening="Records ready.")
    teacher_forced = NoveltyIndex([]).episode(episode)
    open_loop = NoveltyIndex([]).episode(episode, open_loop=True)
    assert teacher_forced == [["w4471", "pending"], [], []]
    assert open_loop == [["w4471", "pending"], ["order w4471", "w4471", "pending"], []]  # turn 2: task, own action
    assert NoveltyIndex(["pending"]).episode(episode, open_loop=True)[1] == ["order w4471", "w4471"]  # the book's words
    # the user's message (a context event) is not given open loop: its id is novel there
    user = _episode(["Profile of mia_li_3668."])
    assert NoveltyIndex([]).episode(user) == [["profile"]]
    assert NoveltyIndex([]).episode(user, open_loop=True) == [["profile", "mia_li_3668"]]


def test_open_loop_every_room_but_the_openings_is_novel() -> None:
    kitchen, pantry = "-= Kitchen =-\nYou are in a kitchen.", "-= Pantry =-\nYou are in a pantry."
    index = NoveltyIndex([kitchen, pantry])
    episode = _episode([pantry, kitchen, pantry], opening=f"Welcome!\n{kitchen}")
    assert index.episode(episode) == [["room pantry"], [], []]
    assert index.episode(episode, open_loop=True) == [["room pantry"], [], ["room pantry"]]


def test_an_open_loop_report_gives_both_knowable_definitions() -> None:
    rows = [{"method": m, "episode_id": "e", "turn": t, "env_id": "x", "exact_match": float(t == 0), "error": None,
             "protocol": "drift", "novel": t > 0, "novel_tf": t > 1} for m in ("a", "b") for t in range(3)]
    report = build_report(records_frame(rows), run="ol", protocol="drift", fingerprint="f", config={},
                          methods=["a", "b"], resamples=100)
    cells = report["methods"]["a"]
    assert cells["exact_match_knowable"]["n"] == 1 and cells["exact_match_knowable_tf"]["n"] == 2
    assert cells["novel_share"]["mean"] == pytest.approx(2 / 3) and cells["novel_share_tf"]["mean"] == pytest.approx(1 / 3)
    assert not {"novel_share", "novel_share_tf"} & set(report["pairs"]["a vs b"])
    teacher = build_report(records_frame([{**r, "protocol": "next-obs"} for r in rows]), run="tf",
                           protocol="next-obs", fingerprint="f", config={}, methods=["a", "b"], resamples=100)
    assert "exact_match_knowable_tf" not in teacher["methods"]["a"]  # the same as exact_match_knowable there
