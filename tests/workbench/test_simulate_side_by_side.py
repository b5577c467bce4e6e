"""The Simulate page's side-by-side view under AppTest, on a held-out ALFWorld episode in a real workspace.

The worldbook is built from the workspace's own ALFWorld dataset (3 of every 4 task families);
the episode stepped is from a family left out. The methods are the page's defaults: the harness
and direct prompting on the bundled tiny model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from workbench_support import APP, REPO, shown

from ports import free_port
from worldsmith.sim.htmlview import escape_html
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.traces import Episode, trajectory_family
from worldsmith.workspace import Workspace
from worldsmith.worldbook import WorldbookStore

PAGE = REPO / "pages" / "simulate.py"
SAMPLE = REPO / "data_samples" / "collected" / "alfworld_expert.jsonl"
TINY = REPO / "data_samples" / "models" / "tiny"


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture
def alfworld_workspace(empty_root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Episode]:
    """Dataset `alfworld` (36 games) and worldbook `alfworld` built on most families; a held-out episode."""
    if not (TINY / "config.json").exists():
        pytest.fail(f"the tiny model is missing at {TINY} (make samples)")
    monkeypatch.delenv("WORLDSMITH_MODEL", raising=False)  # the default model: the bundled tiny one
    workspace = Workspace(empty_root)
    assert workspace.ingest([SAMPLE], "alfworld").committed
    episodes = list(workspace.dataset("alfworld").iter_episodes())
    families = sorted({trajectory_family(e) for e in episodes})
    held = {f for i, f in enumerate(families) if i % 4 == 0}
    book = build_simulator_book([e for e in episodes if trajectory_family(e) not in held], name="alfworld").book
    WorldbookStore(empty_root / "worldbooks").save(book, sources=[{"dataset": "alfworld"}], message="test build")
    episode = max((e for e in episodes if trajectory_family(e) in held), key=lambda e: (len(e.turns), e.id))
    return empty_root, episode


def _open_side_by_side(episode: Episode) -> AppTest:
    at = no_exception(AppTest.from_file(str(APP), default_timeout=120).run())
    at = no_exception(at.switch_page(str(PAGE)).run())
    no_exception(at.radio(key="sim_view").set_value("Side by side").run())
    assert at.selectbox(key="sbs_dataset").value == "alfworld"  # the worldbook's source dataset
    no_exception(at.text_input(key="sbs_search").input(episode.id[-40:]).run())
    no_exception(at.selectbox(key="sbs_episode").set_value(episode.id).run())
    return at


def _markdown(at: AppTest) -> list[str]:
    return [str(m.value) for m in at.markdown]


def _scores(at: AppTest):
    return next(df.value for df in at.dataframe if "recorded" in df.value.columns)


def _captions(at: AppTest) -> list[str]:
    return [str(c.value) for c in at.caption]


def test_step_an_episode_beside_the_real_observations(alfworld_workspace: tuple[Path, Episode]) -> None:
    _, episode = alfworld_workspace
    at = _open_side_by_side(episode)
    assert at.multiselect(key="sbs_methods").value == ["harness", "direct"]
    assert any(f"0 steps of {len(episode.turns)} recorded" in c for c in _captions(at))

    no_exception(at.button(key="sbs_step").click().run())
    no_exception(at.button(key="sbs_step").click().run())
    markdown = _markdown(at)
    assert any(escape_html(episode.turns[1].observation.text) in m for m in markdown)  # the real column
    for header in ("**real**", "**harness**", "**direct**"):
        assert header in markdown, header
    scores = [c for c in _captions(at) if c.startswith("score: exact")]
    assert len(scores) == 2  # one per method column
    table = _scores(at)
    assert list(table["step"]) == [0, 1] and list(table["action"]) == [t.action.raw for t in episode.turns[:2]]
    assert table["harness F1"].notna().all() and table["direct F1"].notna().all()
    assert table["harness F1"].sum() >= table["direct F1"].sum()
    source = next(c.replace("\\", "") for c in _captions(at) if c.startswith("Produced by"))
    assert (f"Produced by: method harness · model none · dataset alfworld · split episode {episode.id} · "
            "n 2 steps · run alfworld@") in source and "protocol teacher forcing" in source, source
    assert "Produced by: method direct · model tiny:" in source, source  # the default model: the bundled tiny one
    assert any(shown(e.label).startswith("Audit: fast_path") for e in at.expander)  # the harness's take rule
    assert any(e.label.startswith("State: ") for e in at.expander)

    at.text_input(key="sbs_action").input("inventory")
    no_exception(at.button(key="sbs_act").click().run())
    assert at.text_input(key="sbs_action").value == ""
    assert any("typed action: no real observation" in c for c in _captions(at))
    assert any("left the recording at step 2" in c for c in _captions(at))
    assert at.button(key="sbs_step").disabled  # no recorded action to follow now
    table = _scores(at)
    assert list(table["recorded"]) == [True, True, False] and table["harness F1"].isna().iloc[2]

    no_exception(at.number_input(key="sbs_fork_at_3").set_value(2).run())
    no_exception(at.button(key="sbs_fork").click().run())
    assert any("Forked at turn 2" in str(s.value) for s in at.success)
    assert any("2 steps of" in c and "on the recording" in c for c in _captions(at))
    assert not at.button(key="sbs_step").disabled

    no_exception(at.button(key="sbs_reset").click().run())
    assert any("Back at the opening" in str(s.value) for s in at.success)
    assert any(f"0 steps of {len(episode.turns)} recorded" in c for c in _captions(at))
    no_exception(at.button(key="sbs_run").click().run())
    assert any(f"{len(episode.turns)} steps taken" in str(s.value) for s in at.success)
    assert len(_scores(at)) == len(episode.turns)


def test_other_methods_and_an_opening_without_an_episode(alfworld_workspace: tuple[Path, Episode]) -> None:
    _, episode = alfworld_workspace
    at = _open_side_by_side(episode)
    no_exception(at.multiselect(key="sbs_methods").set_value(["harness", "nearest"]).run())
    no_exception(at.radio(key="sbs_mode").set_value("open_loop").run())
    no_exception(at.button(key="sbs_step").click().run())
    assert "**nearest**" in _markdown(at) and "**direct**" not in _markdown(at)
    assert any("open loop" in c for c in _captions(at))
    links = at.page_link  # nearest evidence's retrieved turns open in Traces (dataset alfworld, turn id)
    assert links and all("#" in link.value for link in links)
    assert all(link.proto.page == "traces" and link.proto.query_string.startswith("dataset=alfworld&turn=")
               for link in links)

    no_exception(at.selectbox(key="sbs_dataset").set_value("(new episode: type an opening)").run())
    no_exception(at.text_area(key="sbs_opening").input("You are in the middle of a room <b>here</b>.").run())
    assert any(escape_html("You are in the middle of a room <b>here</b>.") in m for m in _markdown(at))
    assert all("<b>here</b>" not in m for m in _markdown(at))  # untrusted text is escaped
    assert at.button(key="sbs_step").disabled
    take = next(t for t in episode.turns if t.action.name == "take")
    at.text_input(key="sbs_action").input(take.action.raw)
    no_exception(at.button(key="sbs_act").click().run())
    assert any(escape_html(take.observation.text) in m for m in _markdown(at))  # the harness's rule
    assert any("typed action: no real observation" in c for c in _captions(at))


def test_session_mode_is_still_the_default(alfworld_workspace: tuple[Path, Episode]) -> None:
    at = no_exception(AppTest.from_file(str(APP), default_timeout=120).run())
    at = no_exception(at.switch_page(str(PAGE)).run())
    assert at.radio(key="sim_view").value == "Sessions"
    assert at.selectbox(key="sim_session").value == "(new session)"


def test_a_simulate_link_opens_the_episode_at_its_turn(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """simulate?dataset=&episode=&turn= (what the Evaluate page links) steps the side-by-side view to that turn."""
    root = tmp_path / "ws"
    monkeypatch.setenv("WORLDSMITH_WORKSPACE", str(root))
    monkeypatch.setenv("WORLDSMITH_SAMPLES", "")
    sample = REPO / "data_samples" / "collected" / "alfworld_expert.jsonl"
    workspace = Workspace(root)
    workspace.ingest([sample], "alf")
    episodes = list(workspace.dataset("alf").iter_episodes())
    WorldbookStore(root / "worldbooks").save(build_simulator_book(episodes[:30], name="alfworld").book,
                                             sources=[{"dataset": "alf"}])
    target = episodes[-1]
    at = AppTest.from_file(str(APP), default_timeout=300).run()
    at.query_params.update({"dataset": "alf", "episode": target.id, "turn": "2"})
    at.switch_page(str(REPO / "pages" / "simulate.py")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.radio(key="sim_view").value == "Side by side"
    assert at.selectbox(key="sbs_episode").value == target.id
    assert any("3 steps" in str(c.value) for c in at.caption), [c.value for c in at.caption]

    # with a method (what a wrong prediction on the Evaluate page links): that method alone, its audit open
    # (a followed link gives way to the view's own kept state in the address: the next link names its episode too)
    at.query_params.update({"dataset": "alf", "episode": target.id, "method": "nearest", "turn": "1"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.multiselect(key="sbs_methods").value == ["nearest"]
    assert any("2 steps" in str(c.value) for c in at.caption), [c.value for c in at.caption]
    [audit] = [e for e in at.expander if e.label.startswith("Audit:")]
    assert audit.proto.expanded and "nearest" in audit.label


def test_a_failed_model_is_labelled_a_fallback_and_a_leaked_episode_is_named(
        alfworld_workspace: tuple[Path, Episode]) -> None:

    root, held = alfworld_workspace
    book = WorldbookStore(root / "worldbooks").load("alfworld")
    trained = sorted({item.turn_id.split("#")[0] for item in book.evidence})[0]
    port = free_port()  # nothing listens there
    at = _open_side_by_side(held)
    at.text_input(key="sbs_llm").input(f"openai:m@http://127.0.0.1:{port}/v1?max_retries=0&timeout=5")
    no_exception(at.multiselect(key="sbs_methods").set_value(["nearest", "direct"]).run())
    assert not any(str(w.value).startswith("Leaked:") for w in at.warning)  # a held-out episode
    no_exception(at.button(key="sbs_step").click().run())
    assert "**direct** · fallback" in _markdown(at) and "**nearest**" in _markdown(at)
    warning = next(str(w.value) for w in at.warning if str(w.value).startswith("Fallback:"))
    assert "model call failed" in warning and "nearest evidence answered instead" in warning
    assert "Not scored as direct" in warning
    table = _scores(at)
    assert list(table["direct status"]) == ["fallback"] and table["direct F1"].isna().all()
    assert table["nearest F1"].notna().all()

    no_exception(at.text_input(key="sbs_search").input(trained[-40:]).run())
    no_exception(at.selectbox(key="sbs_episode").set_value(trained).run())
    leak = next(str(w.value) for w in at.warning if str(w.value).startswith("Leaked:"))
    assert "in the book" in leak and "evidence turns were left out" in leak and "scores are leaked" in leak

def _json_method_column() -> None:
    from workbench.simulate.side_by_side import _method_column
    from worldsmith.sim.sidebyside import MethodStep
    from worldsmith.worldbook import Worldbook

    step = MethodStep(method="worldbook", observation='{"balance": 7, "items": ["pen"], "vip": true}')
    _method_column("worldbook", step, Worldbook(name="w"), None, ".", 0, real='{"balance": 10, "items": ["pen"]}')
    text = MethodStep(method="worldbook", observation="You see a pen.")
    _method_column("text", text, Worldbook(name="w"), None, ".", 1, real='{"balance": 10}')


def test_json_results_are_diffed_as_json_beside_the_real_one() -> None:
    at = AppTest.from_function(_json_method_column, default_timeout=30).run()
    assert not at.exception, [e.value for e in at.exception]
    (diff,) = [e.proto.body for e in at.get("html") if "ws-diff" in e.proto.body]  # the one diff view
    assert "against the real result" in diff and "1 added, 1 changed" in diff and "data-kind='json'" in diff
    assert "<tr class='ws-diff-changed'><td><code>/balance</code></td><td>changed</td><td>10</td><td>7</td>" in diff
    assert "<tr class='ws-diff-added'><td><code>/vip</code></td><td>added</td><td></td><td>true</td>" in diff
    assert '"balance": 7' in at.code[0].value
    assert any("You see a pen&#46;" in str(m.value) for m in at.markdown)  # text against JSON: the text view


def _real_columns() -> None:
    from workbench.simulate.side_by_side import _real_column
    from worldsmith.sim.sidebyside import StepView
    from worldsmith.traces import Action

    common = {"recorded": True, "teacher_forced": True, "methods": {}}
    _real_column(StepView(index=0, action=Action(name="get_user"), action_text="get_user",
                          real='{"balance": 10, "items": ["pen"]}', **common), None)
    _real_column(StepView(index=1, action=Action(name="look"), action_text="look", real="You see a pen.", **common),
                 None)


def test_a_json_real_observation_is_indented_like_the_predictions() -> None:
    at = AppTest.from_function(_real_columns, default_timeout=30).run()
    assert not at.exception, [e.value for e in at.exception]
    [code] = at.code
    assert code.language == "json" and '{\n  "balance": 10,' in code.value
    assert any("You see a pen&#46;" in str(m.value) for m in at.markdown)  # text stays the text view


def test_state_changes_show_every_value_in_full() -> None:
    from workbench.simulate.side_by_side import changes_frame
    from worldsmith.sim.sidebyside import StateChange

    address = {"street": "9874 Maple Blvd", "city": "Omaha", "state": "NE", "zip": "68119", "note": "x" * 200}
    frame = changes_frame([StateChange(path="/orders/o1/address", kind="changed", before={"city": "Lincoln"},
                                       after=address),
                           StateChange(path="/tickets", kind="changed", before=[], after=["t1"], added=["t1"])])
    rows = frame.to_dict("records")
    assert rows[0]["after"] == json.dumps(address) and rows[0]["before"] == '{"city": "Lincoln"}'
    assert rows[1]["after"] == "+t1" and rows[1]["change"] == "changed"


def _long_state_change() -> None:
    from workbench.simulate.side_by_side import _state_panel
    from worldsmith.sim.sidebyside import StateChange

    _state_panel([StateChange(path="/note", kind="changed", before="short", after="a long note " * 10)], None, "t")


def test_a_value_a_cell_would_cut_is_shown_whole() -> None:
    at = AppTest.from_function(_long_state_change, default_timeout=30).run()
    assert not at.exception, [e.value for e in at.exception]
    [code] = at.code
    assert code.value == "/note\nbefore: short\nafter:  " + ("a long note " * 10)
