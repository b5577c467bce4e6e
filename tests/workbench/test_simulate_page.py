"""The Simulate page under AppTest: create a session, step it, fork it, compare the two, all on disk."""

from __future__ import annotations

from pathlib import Path

import orjson
from streamlit.testing.v1 import AppTest
from workbench_support import APP, REPO, shown

from worldsmith.sim import Session
from worldsmith.traces import Episode
from worldsmith.worldbook import Worldbook, WorldbookStore, build_worldbook

PAGE = REPO / "pages" / "simulate.py"


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_page() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    return no_exception(at.switch_page(str(PAGE)).run())


def _save_alfworld_book(root: Path) -> None:
    lines = (REPO / "data_samples" / "collected" / "alfworld.jsonl").read_bytes().splitlines()
    episodes = [Episode.model_validate({k: v for k, v in orjson.loads(line).items() if k != "format"})
                for line in lines]
    WorldbookStore.of_workspace(root).save(build_worldbook(episodes, name="alfworld", env_id="alfworld").book)


def _step(at: AppTest, action: str) -> AppTest:
    at.text_input(key="sim_action").input(action)
    return no_exception(at.button[[b.label for b in at.button].index("Step")].click().run())


def test_empty_workspace_says_how_to_make_a_worldbook(empty_root: Path) -> None:
    at = open_page()
    assert any("No worldbooks" in str(i.value) for i in at.info)


def test_create_step_fork_and_compare(empty_root: Path) -> None:
    _save_alfworld_book(empty_root)
    at = open_page()
    at.text_input(key="sim_new_name").input("first")
    at.text_area(key="sim_new_opening").input("You are in the middle of a room.")
    no_exception(at.button[[b.label for b in at.button].index("Create session")].click().run())
    assert at.selectbox(key="sim_session").value == "first"
    assert any("created" in str(s.value) for s in at.success)

    _step(at, "take mug 3 from shelf 2")
    assert any(code.value == "You pick up the mug 3 from the shelf 2." for code in at.code)
    assert any(shown(metric.value) == "fast_path" for metric in at.metric)  # the harness, by default
    _step(at, "go to bed 1")
    with Session.open(empty_root / "sessions" / "first") as stored:
        assert [t.action.raw for t in stored.turns()] == ["take mug 3 from shelf 2", "go to bed 1"]
        assert stored.turns()[0].prediction.audit.route == "fast_path"
    table = next(df.value for df in at.dataframe if "route" in df.value.columns)
    assert list(table["action"]) == ["take mug 3 from shelf 2", "go to bed 1"]
    tracked = next(j.value for j in at.json if "places" in str(j.value))
    assert "'bed 1'" in str(tracked) or '"bed 1"' in str(tracked)  # the harness knows where the agent went

    at.number_input(key="sim_fork_at").set_value(1)
    no_exception(at.button(key="sim_fork").click().run())
    assert at.selectbox(key="sim_session").value == "first-fork1"
    _step(at, "go to desk 1")
    with Session.open(empty_root / "sessions" / "first-fork1") as fork:
        assert [t.action.raw for t in fork.turns()] == ["take mug 3 from shelf 2", "go to desk 1"]

    no_exception(at.selectbox(key="sim_compare").set_value("first").run())
    assert any("first difference at turn 1" in str(c.value) for c in at.caption)
    compared = next(df.value for df in at.dataframe if "same_action" in df.value.columns)
    assert list(compared["same_action"]) == [True, False]


def test_start_a_session_from_a_recorded_episode(empty_root: Path) -> None:
    from worldsmith.workspace import Workspace

    _save_alfworld_book(empty_root)
    Workspace(empty_root).ingest([REPO / "data_samples" / "collected" / "alfworld.jsonl"], "alf")
    episode = next(Workspace(empty_root).dataset("alf").iter_episodes())
    at = open_page()
    assert at.button(key="sim_from_episode").disabled  # no episode chosen yet
    at.selectbox(key="sim_ep_dataset").set_value("alf").run()
    assert episode.id in at.selectbox(key="sim_ep_episode").options
    at.selectbox(key="sim_ep_episode").set_value(episode.id).run()
    no_exception(at.button(key="sim_from_episode").click().run())
    name = at.selectbox(key="sim_session").value
    with Session.open(empty_root / "sessions" / name) as session:
        assert session.meta["initial_observation"] == episode.initial_observation.text
        assert session.meta["task"] == episode.task
    assert any(code.value == episode.initial_observation.text for code in at.code)  # the opening, shown
    assert any("0 turns" in str(c.value) for c in at.caption)
    _step(at, "look")
    # the caption counts the turn just committed, as the table below it does
    assert any("1 turns" in str(c.value) for c in at.caption)
    assert len(next(df.value for df in at.dataframe if "route" in df.value.columns)) == 1


def test_the_page_offers_what_is_registered(empty_root: Path) -> None:
    """A world model registered by a plugin is in the page's choices (sessions and side by side) and steps."""
    from worldsmith.sim import NearestEvidence, registry, world_model, world_model_names

    plugin = "page-test-nearest"

    @world_model(plugin, description="nearest evidence, registered by a test")
    def _build(book: Worldbook, *, llm: object = None, **options: object) -> NearestEvidence:
        return NearestEvidence(book)

    try:
        _save_alfworld_book(empty_root)
        at = open_page()
        offered = at.selectbox(key="sim_model").options  # "name: description", in registration order
        assert [o.split(": ")[0] for o in offered] == world_model_names() and world_model_names()[-1] == plugin
        assert offered[-1] == f"{plugin}: nearest evidence, registered by a test"
        no_exception(at.selectbox(key="sim_model").set_value(plugin).run())
        at.text_input(key="sim_new_name").input("plugged")
        no_exception(at.button[[b.label for b in at.button].index("Create session")].click().run())
        _step(at, "take mug 3 from shelf 2")
        with Session.open(empty_root / "sessions" / "plugged") as stored:
            assert stored.meta["model"] == plugin
            assert stored.turns()[0].prediction.audit.route == "fallback:nearest_evidence"
        no_exception(at.radio(key="sim_view").set_value("Side by side").run())
        assert at.multiselect(key="sbs_methods").options == world_model_names()
    finally:
        registry._REGISTRY.unregister(plugin)


def test_a_step_shows_how_unsure_the_book_was_and_candidates_are_ranked(empty_root: Path) -> None:
    _save_alfworld_book(empty_root)
    at = open_page()
    at.text_input(key="sim_new_name").input("unsure")
    no_exception(at.button[[b.label for b in at.button].index("Create session")].click().run())
    assert not any(m.label == "situation seen" for m in at.metric)  # nothing assessed on load
    _step(at, "take mug 3 from shelf 2")
    assert any(m.label == "rule status" and shown(m.value) == "supported" for m in at.metric)
    assert any(m.label == "score" for m in at.metric)
    assert any("supported rule answers it" in str(t.value) for t in at.text)
    head = WorldbookStore.of_workspace(empty_root).head("alfworld")
    sources = [str(c.value).replace("\\", "") for c in at.caption if str(c.value).startswith("Produced by")]
    assert any(c.startswith("Produced by: method harness route table, held-out record of ") and c.endswith(
        f" · model none · dataset unknown · split unknown · n 0 turns · run alfworld@{head}")  # no sources, no routes
        for c in sources), sources
    at.text_area(key="sim_candidates").input("take mug 3 from shelf 2\nfrobnicate the unicorn\n\n")
    no_exception(at.button(key="sim_rank").click().run())
    ranked = next(df.value for df in at.dataframe if "situation seen" in df.value.columns)
    assert list(ranked["action"]) == ["frobnicate the unicorn", "take mug 3 from shelf 2"]
    assert ranked["score"].iloc[0] > ranked["score"].iloc[1] and ranked["action seen"].iloc[0] == 0
    with Session.open(empty_root / "sessions" / "unsure") as stored:
        assert len(stored) == 1  # ranking plays nothing


def test_candidates_from_the_recorded_episodes_admissible_actions(empty_root: Path) -> None:
    from worldsmith.workspace import Workspace

    _save_alfworld_book(empty_root)
    Workspace(empty_root).ingest([REPO / "data_samples" / "collected" / "alfworld.jsonl"], "alf")
    episode = next(Workspace(empty_root).dataset("alf").iter_episodes())
    at = open_page()
    at.selectbox(key="sim_ep_dataset").set_value("alf").run()
    at.selectbox(key="sim_ep_episode").set_value(episode.id).run()
    no_exception(at.button(key="sim_from_episode").click().run())
    no_exception(at.button(key="sim_use_admissible").click().run())
    listed = [line for line in at.text_area(key="sim_candidates").value.splitlines() if line]
    assert listed == [str(a) for a in episode.initial_info["admissible_actions"]] and len(listed) > 5
    no_exception(at.button(key="sim_rank").click().run())
    ranked = next(df.value for df in at.dataframe if "situation seen" in df.value.columns)
    assert sorted(ranked["action"]) == sorted(set(listed))
    assert list(ranked["score"]) == sorted(ranked["score"], reverse=True)


def test_an_order_no_log_showed_is_invented_said_so_and_typed_any_way(empty_root: Path) -> None:
    from toolshop_support import BOOK, toolshop_book

    WorldbookStore.of_workspace(empty_root).save(toolshop_book())
    at = open_page()
    assert at.selectbox(key="sim_book").value == BOOK
    at.text_input(key="sim_new_name").input("unseen")
    at.text_area(key="sim_new_opening").input("Hello, my order #O00017 never arrived.")
    no_exception(at.button[[b.label for b in at.button].index("Create session")].click().run())
    _step(at, 'get_order {"order_id": "#O00017"}')  # typed as text: the same call as a structured one
    _step(at, "get_order(order_id='#O00017')")
    table = next(df.value for df in at.dataframe if "records" in df.value.columns)
    assert "invented (no log showed it)" in table["records"].iloc[0]
    with Session.open(empty_root / "sessions" / "unseen") as stored:
        first, second = (t.prediction for t in stored.turns())
        assert orjson.loads(first.observation)["order_id"] == "#O00017" and second.observation == first.observation
        assert first.audit.source == "record_invented" and second.audit.source == "record_read"
