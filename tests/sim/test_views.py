"""Place views edited by what was done there: learned edits, their inverses, closing lists, refreshed answers."""

from __future__ import annotations

from worldsmith.sim.sources.inventory import Carriers
from worldsmith.sim.sources.views import ViewEdits
from worldsmith.sim.trackers import PlaceTracker
from worldsmith.worldbook import Evidence


def _room(name: str, floor: str = "") -> str:
    return f"-= {name} =-\nYou are in the {name.lower()}. There is an exit to the north." + floor


def _game(episode: str, room: str, thing: str) -> list[Evidence]:
    turns = [
        ("look", {}, _room(room)),
        (f"drop {thing}", {"object": thing}, f"You drop the {thing} on the ground."),
        ("look", {}, _room(room, f"\n\nThere is a {thing} on the floor.")),
        (f"examine {thing}", {"object": thing}, f"The {thing} is plain. Under it you see an owl and a bat."),
        ("look", {}, _room(room, f"\n\nThere is a {thing} on the floor.")),
    ]
    return [Evidence(turn_id=f"{episode}#{i}", action=line.split()[0], arguments=arguments, action_text=line,
                     observation=observation) for i, (line, arguments, observation) in enumerate(turns)]


def _edits(joins_front: bool | None = True) -> ViewEdits:
    evidence = [*_game("g1", "Den", "key"), *_game("g2", "Loft", "coin"), *_game("g3", "Barn", "rope")]
    carriers = Carriers(frozenset({"inventory"}), frozenset({("take", "object")}), frozenset({("drop", "object")}))
    return ViewEdits(evidence, view_of=PlaceTracker(evidence).view_of, carriers=carriers, joins_front=joins_front)


def test_an_edit_is_learned_with_its_slots_and_a_take_undoes_a_drop() -> None:
    edits = _edits()
    assert edits.edits["drop(object)"] == ("end", "", "\n\nThere is \x00a\x00{object} on the floor.")
    assert edits.edits["take(object)"] == ("end", "\n\nThere is \x00a\x00{object} on the floor.", "")
    assert "examine(object)" not in edits.edits  # it changed nothing


def test_a_remembered_view_is_refreshed_with_what_was_done_there_since() -> None:
    edits = _edits()
    hall = _room("Hall")
    edits.reset(hall)
    edits.observe("drop", {"object": "apple"}, "You drop the apple on the ground.")
    assert edits.refresh(hall) == hall + "\n\nThere is an apple on the floor."
    edits.observe("drop", {"object": "lamp"}, "You drop the lamp on the ground.")  # joins the closing list
    assert edits.refresh(hall) == hall + "\n\nThere is a lamp and an apple on the floor."
    edits.observe("take", {"object": "apple"}, "You pick up the apple from the ground.")
    assert edits.refresh(hall) == hall + "\n\nThere is a lamp on the floor."
    assert edits.refresh(_room("Attic")) is None  # not a view this episode has shown


def test_a_view_the_edit_does_not_fit_or_a_refused_act_leaves_the_answer_alone() -> None:
    edits = _edits(joins_front=None)
    hall = _room("Hall", "\n\nThere is a rope on the floor.")
    edits.reset(hall)
    edits.observe("drop", {"object": "zorkmid"}, "You can't see any such thing.")  # refused: names nothing
    assert edits.refresh(hall) is None
    edits.observe("take", {"object": "key"}, "You pick up the key from the ground.")  # no key on this floor
    assert edits.refresh(hall) is None
