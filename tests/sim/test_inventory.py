"""Carried things: inventories, takes and releases learned from evidence; the inventory's answer kept."""

from __future__ import annotations

from worldsmith.sim.sources.inventory import InventoryTracker, full_name
from worldsmith.sim.trackers import PlaceTracker
from worldsmith.worldbook import Evidence

NOTHING = "You are carrying nothing."


def _room(name: str) -> str:
    return f"-= {name} =-\nA {name.lower()}. On the table is a ripe {name.lower()} apple and a key."


def _game(episode: str, room: str) -> list[Evidence]:
    turns = [
        ("inventory", {}, NOTHING),
        ("look", {}, _room(room)),
        ("inventory", {}, NOTHING),
        ("go north", {"object": "north"}, _room(room + "hall")),
        ("inventory", {}, NOTHING),
        ("go south", {"object": "south"}, _room(room)),
        ("take key from table", {"object": "key", "source": "table"}, "You take the key from the table."),
        ("inventory", {}, "You are carrying: a key."),
        (f"take {room.lower()} apple from table", {"object": f"{room.lower()} apple", "source": "table"},
         f"You take the {room.lower()} apple from the table."),
        ("inventory", {}, f"You are carrying: a ripe {room.lower()} apple and a key."),
        ("examine key", {"object": "key"}, "A small key."),
        ("inventory", {}, f"You are carrying: a ripe {room.lower()} apple and a key."),
        ("drop key", {"object": "key"}, "You drop the key on the ground."),
        ("inventory", {}, f"You are carrying: a ripe {room.lower()} apple."),
    ]
    return [Evidence(turn_id=f"{episode}#{i}", action=line.split()[0], arguments=arguments, action_text=line,
                     observation=observation) for i, (line, arguments, observation) in enumerate(turns)]


def _tracker() -> InventoryTracker:
    evidence = [*_game("g1", "Den"), *_game("g2", "Loft"), *_game("g3", "Barn")]
    return InventoryTracker(evidence, place_of=PlaceTracker(evidence).place_of)


def test_inventories_carriers_and_the_way_inventories_are_written_are_learned() -> None:
    tracker = _tracker()
    carriers = tracker.carriers
    assert carriers.inventories == {"inventory"}  # `look` changes with the place: no inventory
    assert carriers.takes == {("take", "object")} and carriers.releases == {("drop", "object")}
    assert tracker.forms["inventory"] == "You are carrying: \x00items\x00."
    assert tracker.empty["inventory"] == NOTHING
    assert tracker.front["inventory"] is True and tracker.starts_empty["inventory"] is True


def test_the_inventory_answer_follows_takes_and_releases_with_full_names() -> None:
    tracker = _tracker()
    tracker.reset("-= Shed =-\nA shed. On the bench is a rusty iron and a rope.")
    assert [p.observation for p in tracker.propose("inventory", {})] == [NOTHING]
    tracker.observe("take", {"object": "iron", "source": "bench"}, "You take the iron from the bench.")
    tracker.observe("take", {"object": "rope", "source": "bench"}, "You take the rope from the bench.")
    assert tracker.propose("inventory", {})[0].observation == "You are carrying: a rope and a rusty iron."
    tracker.observe("drop", {"object": "iron"}, "You drop the iron on the ground.")
    assert tracker.propose("inventory", {})[0].observation == "You are carrying: a rope."
    tracker.observe("take", {"object": "zorkmid"}, "You can't see any such thing.")  # refused: nothing taken
    assert tracker.snapshot() == {"inventory": ["rope"]}


def test_an_inventory_shown_replaces_what_was_believed() -> None:
    tracker = _tracker()
    tracker.reset()
    tracker.observe("inventory", {}, "You are carrying: a lamp and a map.")
    assert tracker.snapshot() == {"inventory": ["lamp", "map"]}
    assert tracker.known


def test_full_names_come_from_the_latest_text_that_writes_the_thing_after_an_article() -> None:
    texts = ["There is a cookbook and a knife here.", "On the sofa is a fried purple potato."]
    assert full_name("purple potato", texts) == "fried purple potato"
    assert full_name("knife", texts) == "knife"  # not "cookbook and a knife"
    assert full_name("spoon", texts) == "spoon"
