"""Scope: learned refusals for things not in view, what the agent holds, and the in-scope form."""

from __future__ import annotations

from worldsmith.sim.baselines import NearestEvidence
from worldsmith.sim.sources.scope import Refusal, ScopeTracker, _Answer, _general_refusals, _refusals, _Row, _usual_form
from worldsmith.sim.trackers import PlaceTracker
from worldsmith.traces import Action
from worldsmith.worldbook import Evidence

UNSEEN = "You can't see any such thing."
BLOCKED = "You can't go that way."


def _room(name: str, body: str) -> str:
    return f"-= {name} =-\n{body}"


def _evidence(episode: str, turns: list[tuple[str, dict[str, str], str]]) -> list[Evidence]:
    return [Evidence(turn_id=f"{episode}#{i}", action=line.split()[0], arguments=arguments, action_text=line,
                     observation=observation) for i, (line, arguments, observation) in enumerate(turns)]


def _game(episode: str, thing: str, other: str) -> list[Evidence]:
    """One recorded game: a room with `thing` on a table and an exit north; junk, blocked moves and things left
    elsewhere refused."""
    kitchen = _room("Kitchen", f"You see a table. On the table is a {thing}.\n\nThere is an exit to the north.")
    return _evidence(episode, [
        ("look", {}, kitchen),
        ("take zorkmid", {"object": "zorkmid"}, UNSEEN),
        (f"take {other}", {"object": other}, UNSEEN),
        ("go west", {"object": "west"}, BLOCKED),
        ("inventory", {}, "You are carrying nothing."),
        (f"take {thing} from table", {"object": thing, "source": "table"}, f"You take the {thing} from the table."),
        ("inventory", {}, f"You are carrying: a {thing}."),
        ("go north", {"object": "north"}, _room(f"Hall {episode}", "A hall.\n\nThere is an exit to the south and west.")),
        ("inventory", {}, f"You are carrying: a {thing}."),
        (f"drop {thing}", {"object": thing}, f"You drop the {thing} on the ground."),
        ("inventory", {}, "You are carrying nothing."),
        ("go west", {"object": "west"}, _room(f"Den {episode}", "A den.\n\nThere is an exit to the east.")),
        (f"take {thing}", {"object": thing}, UNSEEN),  # known, but left in the hall
        (f"go {other}", {"object": other}, UNSEEN),
        ("go south", {"object": "south"}, BLOCKED),
    ])


def _tracker() -> ScopeTracker:
    evidence = [*_game("g1", "apple", "pear"), *_game("g2", "knife", "fork"), *_game("g3", "bowl", "cup")]
    return ScopeTracker(evidence, place_of=PlaceTracker(evidence).place_of)


def test_refusals_and_their_scope_levels_are_learned_per_action() -> None:
    tracker = _tracker()
    assert [(r.observation, r.level) for r in tracker.refusals["go"]] == [(UNSEEN, "episode"), (BLOCKED, "here")]
    assert [(r.observation, r.level) for r in tracker.refusals["take"]] == [(UNSEEN, "episode"), (UNSEEN, "here")]
    assert (tracker.carriers.takes, tracker.carriers.releases) == ({("take", "object")}, {("drop", "object")})
    assert tracker.forms["take(object,source)"] == "You take the {object} from the {source}."


def test_an_action_on_a_thing_out_of_view_gets_the_refusal_and_one_in_view_the_usual_form() -> None:
    tracker = _tracker()
    tracker.reset(_room("Pantry", "You see a shelf. On the shelf is a lemon.\n\nThere is an exit to the east."))
    [refused] = tracker.propose("take", {"object": "melon", "source": "shelf"})
    assert (refused.source, refused.observation) == ("scope", UNSEEN)
    [form] = tracker.propose("take", {"object": "lemon", "source": "shelf"})
    assert (form.source, form.observation) == ("scope_form", "You take the lemon from the shelf.")
    # a direction every game knows, but no way that way here; a word no game answered otherwise
    assert [p.observation for p in tracker.propose("go", {"object": "north"})] == [BLOCKED]
    assert [p.observation for p in tracker.propose("go", {"object": "rubber chicken"})] == [UNSEEN]
    assert tracker.propose("go", {"object": "east"}) == []  # a way out here: the map and memory answer


def test_a_held_thing_stays_in_scope_after_moving_until_it_is_dropped() -> None:
    tracker = _tracker()
    tracker.reset(_room("Pantry", "On the shelf is a lemon.\n\nThere is an exit to the east."))
    tracker.observe("take", {"object": "lemon", "source": "shelf"}, "You take the lemon from the shelf.")
    tracker.observe("go", {"object": "east"}, _room("Yard", "A yard."))
    assert tracker.snapshot()["held"] == ["lemon"]
    [form] = tracker.propose("drop", {"object": "lemon"})
    assert form.observation == "You drop the lemon on the ground."
    tracker.observe("drop", {"object": "lemon"}, "You drop the lemon on the ground.")
    tracker.observe("go", {"object": "west"}, _room("Pantry", "On the shelf is nothing."))
    assert tracker.snapshot()["held"] == []
    [refused] = tracker.propose("take", {"object": "lemon", "source": "shelf"})
    assert refused.observation == UNSEEN


def test_nothing_is_learned_or_proposed_without_evidence_or_a_place() -> None:
    tracker = ScopeTracker([], place_of=PlaceTracker().place_of)
    assert tracker.refusals == {} and tracker.forms == {}
    tracker.reset("A greeting with no room.")
    assert tracker.propose("take", {"object": "apple"}) == []


def test_a_tool_api_without_places_learns_a_refusal_that_echoes_the_thing() -> None:
    def call(episode: str, turn: int, folder: str, answer: str) -> Evidence:
        return Evidence(turn_id=f"{episode}#{turn}", action="cd", arguments={"folder": folder},
                        action_text=f"cd(folder={folder!r})", observation=answer)

    missing = '{{"error": "cd: \'{folder}\': No such file or directory"}}'
    evidence = []
    for n, (real, junk) in enumerate([("docs", "nope"), ("src", "ghost"), ("data", "void"), ("logs", "gone")]):
        evidence += [Evidence(turn_id=f"e{n}#0", action="ls", action_text="ls()",
                              observation=f'{{"current_directory_content": ["{real}"]}}'),
                     call(f"e{n}", 1, real, f'{{"current_working_directory": "{real}"}}'),
                     call(f"e{n}", 2, junk, missing.format(folder=junk))]
    tracker = ScopeTracker(evidence, place_of=PlaceTracker(evidence).place_of)
    assert tracker.placeless and [r.observation for r in tracker.refusals["cd"]] == [missing]
    tracker.reset()
    tracker.observe("ls", {}, '{"current_directory_content": ["shared"]}')
    [refused] = tracker.propose("cd", {"folder": "secret"})
    assert refused.observation == '{"error": "cd: \'secret\': No such file or directory"}'
    [moved] = tracker.propose("cd", {"folder": "shared"})  # listed: the usual answer with the folder
    assert (moved.source, moved.observation) == ("scope_form", '{"current_working_directory": "shared"}')


def _rows(flags: dict[str, bool], answer: str, things: str) -> list[_Row]:
    return [_Row(flags, answer, f"take {thing}") for thing in things]


def test_each_level_is_learned_on_the_turns_in_scope_at_the_broader_ones() -> None:
    """Things known but not here get their own refusal only once things unknown anywhere are set aside."""
    rows = (_rows({"episode": False, "here": False}, UNSEEN, "abc")
            + _rows({"episode": True, "here": False}, "It is not here.", "def")
            + _rows({"episode": True, "here": True}, "Taken.", "ghi"))
    refusals, measured = _refusals(rows)
    assert refusals == [Refusal(UNSEEN, "episode", round(6 / 9, 4), 9), Refusal("It is not here.", "here", 1.0, 6)]
    assert measured == {"episode", "here"}
    assert _refusals(rows[3:])[1] == {"here"}  # nothing unknown anywhere: that level is not judged


def test_a_general_refusal_is_one_that_every_action_learning_one_at_its_level_gives() -> None:
    general = _general_refusals({"take": [Refusal(UNSEEN, "episode", 0.9, 10)],
                                 "open": [Refusal(UNSEEN, "episode", 0.8, 5)],
                                 "go": [Refusal(BLOCKED, "here", 1.0, 4)]})
    assert general == {"episode": Refusal(UNSEEN, "episode", 0.8, 15)}  # one action alone makes no rule
    assert _general_refusals({"take": [Refusal(UNSEEN, "episode", 0.9, 10)],
                              "go": [Refusal(BLOCKED, "episode", 1.0, 4)]}) == {}


def test_the_usual_form_is_the_plurality_of_the_answers_that_are_no_refusal() -> None:
    refused = {"You can't see the {object}."}
    answers = [_Answer(f"You take the {thing}.", {"object": thing}) for thing in ("apple", "pear")]
    unseen = [_Answer(f"You can't see the {thing}.", {"object": thing}) for thing in ("fig", "plum", "kiwi")]
    assert _usual_form(answers + unseen, refused) == "You take the {object}."
    assert _usual_form(answers + unseen, set()) == "You can't see the {object}."
    assert _usual_form(answers[:1] + unseen[:1], set()) is None  # once each: no plurality
    assert _usual_form([_Answer("Done.", {"object": "apple"})] * 3, set()) is None  # the thing not shown


def _account_api() -> list[Evidence]:
    """Episodes of a tool API: a user found by email, then their ticket list (often empty); unknown ids refused."""
    evidence: list[Evidence] = []
    for n, user in enumerate(["u_ada", "u_bob", "u_cyd", "u_dee", "u_eve"]):
        turns = [("find_user", {"email": f"{user}@x.org"}, user),
                 ("list_tickets", {"user_id": user}, "[]" if n % 2 else f'[{{"ticket": "T-{n}"}}]'),
                 ("list_tickets", {"user_id": f"u_x{n}"}, f"Error: user u_x{n} not found")]
        evidence += [Evidence(turn_id=f"e{n}#{i}", action=name, arguments=arguments,
                              action_text=f"{name}({arguments})", observation=answer)
                     for i, (name, arguments, answer) in enumerate(turns)]
    return evidence


def test_a_refusal_of_a_thing_the_episode_showed_exists_is_contradicted() -> None:
    """"user X not found" is the refusal of an id never shown; once an answer that refused nothing showed X, the
    fallback must not adapt another episode's refusal to X (an answer echoing X in a refusal does not count)."""
    evidence = _account_api()
    tracker = ScopeTracker(evidence, place_of=PlaceTracker(evidence).place_of)
    assert [r.observation for r in tracker.refusals["list_tickets"]] == ["Error: user {user_id} not found"]
    tracker.reset()
    tracker.observe("list_tickets", {"user_id": "u_zed"}, "Error: user u_zed not found")
    assert tracker.contradicted("list_tickets", {"user_id": "u_zed"}) == set()  # only a refusal named it
    tracker.observe("find_user", {"email": "fay@x.org"}, "u_fay")
    assert tracker.contradicted("list_tickets", {"user_id": "u_fay"}) == {"Error: user u_fay not found"}
    assert tracker.contradicted("list_tickets", {"user_id": "u_gus"}) == set()  # never shown: may not exist

    nearest = NearestEvidence(evidence, same_shape_first=True)
    action = Action(name="list_tickets", arguments={"user_id": "u_fay"})
    assert nearest.nearest(action).observation == "Error: user u_fay not found"  # the nearest: a refused id
    passed = nearest.nearest(action, avoid=tracker.contradicted("list_tickets", {"user_id": "u_fay"}))
    assert passed.observation == "[]" and passed.outcome != "failure"
    assert nearest.nearest(action, avoid={"[]", "Error: user u_fay not found", '[{"ticket": "T-0"}]',
                                          '[{"ticket": "T-2"}]', '[{"ticket": "T-4"}]'}).observation \
        == "Error: user u_fay not found"  # every candidate contradicted: the nearest after all
