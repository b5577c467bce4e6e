"""The Collect and Play pages under AppTest: collect into a dataset, play and save a session."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from streamlit.testing.v1 import AppTest
from workbench_support import APP, REPO

import fake_envs  # noqa: F401 - registers the `counter` environment in this process
from worldsmith.envs.collect import CollectConfig, collect
from worldsmith.workspace import Workspace

COLLECT_PAGE = REPO / "pages" / "collect.py"
PLAY_PAGE = REPO / "pages" / "play.py"
TIMEOUT = 60


def open_page(page: Path) -> AppTest:
    """The page inside the app (its navigation is what st.page_link resolves against)."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    return no_exception(at.switch_page(str(page)).run())


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_collect_page_collects_into_a_dataset(empty_root: Path) -> None:
    at = open_page(COLLECT_PAGE)
    at.selectbox(key="co_env").set_value("counter").run()
    at.multiselect(key="co_tasks_pick").set_value(["reach-2", "reach-3"])
    at.text_input(key="co_tasks_typed").set_value("broken")
    at.number_input(key="co_episodes").set_value(0)
    at.number_input(key="co_workers").set_value(1)
    at.text_input(key="co_dataset").set_value("counted")
    no_exception(at.button(key="co_run").click().run())
    success = "\n".join(str(s.value) for s in at.success)
    assert "2 won of 3" in success and "2 episodes stored" in success
    failures = [df.value for df in at.dataframe if "status" in df.value.columns and "error" in df.value.columns]
    assert any("load_error" in set(frame["status"]) for frame in failures)
    assert Workspace(empty_root).dataset("counted").stats()["episodes"] == 2


def test_collect_page_runs_the_curious_policy_with_its_mixture(empty_root: Path) -> None:
    at = open_page(COLLECT_PAGE)
    at.selectbox(key="co_env").set_value("counter").run()
    at.multiselect(key="co_tasks_pick").set_value(["reach-3"])
    at.selectbox(key="co_policy").set_value("curious").run()
    at.number_input(key="co_curious_invalid").set_value(0.0)
    at.number_input(key="co_curious_min_steps").set_value(4)
    at.number_input(key="co_episodes").set_value(0)
    at.text_input(key="co_dataset").set_value("explored")
    no_exception(at.button(key="co_run").click().run())
    episode = next(Workspace(empty_root).dataset("explored").iter_episodes())
    assert episode.id.endswith("curious-s0") and episode.turns
    config = orjson.loads((empty_root / "runs" / "collect" / "explored" / "config.json").read_bytes())
    assert config["policy"] == "curious"
    assert config["policy_options"] == {"expert": 0.4, "random": 0.2, "revisit": 0.2, "read_after_write": 0.1,
                                        "invalid": 0.0, "min_steps": 4}


def test_collect_page_names_what_to_install(empty_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from worldsmith.envs import register, spec
    from worldsmith.envs import registry as listing

    original = spec("counter")
    register(replace(original, requires=("no_such_module_xyz",), install_hint="pip install xyz"), replace=True)
    try:
        assert "counter" in listing()
        at = open_page(COLLECT_PAGE)
        at.selectbox(key="co_env").set_value("counter").run()
        assert any("pip install xyz" in str(e.value) for e in at.error)
    finally:
        register(original, replace=True)


def test_play_page_plays_and_saves_a_session(empty_root: Path) -> None:
    at = open_page(PLAY_PAGE)
    at.selectbox(key="pl_env").set_value("counter").run()
    at.selectbox(key="pl_task_pick").set_value("reach-2").run()
    no_exception(at.button(key="pl_start").click().run())
    at.text_input(key="pl_typed").set_value("jump")
    form_button = next(b for b in at.button if b.label == "Send")
    no_exception(form_button.click().run())
    codes = "\n".join(str(c.value) for c in at.code)
    assert "count 0, target 2" in codes and "I don't know how to 'jump'." in codes
    at.selectbox(key="pl_pick_1").set_value("inc").run()
    at.selectbox(key="pl_pick_2").set_value("inc").run()
    no_exception(at)
    assert any("won" in str(s.value) for s in at.success)
    at.text_input(key="pl_dataset").set_value("played")
    no_exception(at.button(key="pl_save").click().run())
    episode = next(Workspace(empty_root).dataset("played").iter_episodes(with_state=True))
    assert [t.action.raw for t in episode.turns] == ["jump", "inc", "inc"]
    assert episode.success is True and episode.metadata["policy"] == "human"
    assert episode.turns[-1].state == {"count": 2, "target": 2}


@pytest.mark.integration
def test_collect_and_play_pages_on_a_real_environment(empty_root: Path) -> None:
    """BFCL's real backends through both pages (a worker process for Collect, in-process for Play)."""
    pytest.importorskip("bfcl_eval")
    at = open_page(COLLECT_PAGE)
    at.selectbox(key="co_env").set_value("bfcl").run()
    at.text_input(key="co_tasks_typed").set_value("multi_turn_base_1")
    at.number_input(key="co_episodes").set_value(0)
    at.text_input(key="co_dataset").set_value("bfcl-expert")
    no_exception(at.button(key="co_run").click().run())
    assert "1 won of 1" in "\n".join(str(s.value) for s in at.success)
    episode = next(Workspace(empty_root).dataset("bfcl-expert").iter_episodes())
    assert episode.success is True and episode.turns[0].observation.text

    at = open_page(PLAY_PAGE)
    at.selectbox(key="pl_env").set_value("bfcl").run()
    at.text_input(key="pl_task_typed").set_value("multi_turn_base_1").run()
    no_exception(at.button(key="pl_start").click().run())
    at.text_input(key="pl_typed").set_value("ls(a=True)")
    no_exception(next(b for b in at.button if b.label == "Send").click().run())
    codes = "\n".join(str(c.value) for c in at.code)
    assert '"current_directory_content"' in codes


def test_collect_page_filters_an_environment_of_many_tasks(empty_root: Path) -> None:
    """toolshop lists 20,000 tasks: the picker offers a filtered thousand, and a filtered id can be collected."""
    at = open_page(COLLECT_PAGE)
    at.selectbox(key="co_env").set_value("toolshop").run()
    assert len(at.multiselect(key="co_tasks_pick").options) == 1000
    at.text_input(key="co_tasks_filter").set_value("task=1999").run()
    options = at.multiselect(key="co_tasks_pick").options
    assert options and len(options) <= 11 and all("task=1999" in option for option in options)
    at.multiselect(key="co_tasks_pick").set_value(["db=0:task=19990"])
    at.number_input(key="co_episodes").set_value(0)
    at.number_input(key="co_workers").set_value(1)
    at.text_input(key="co_dataset").set_value("one_shop")
    no_exception(at.button(key="co_run").click().run())
    episode = next(Workspace(empty_root).dataset("one_shop").iter_episodes())
    assert episode.source.pointer == "/db=0:task=19990" and episode.turns


def test_collect_page_explores_in_rounds_and_links_new_rules_to_their_turns(empty_root: Path) -> None:
    """Explore mode on toolshop: a budget in rounds, the curve on a held-out dataset, each round's rules linked."""
    workspace = Workspace(empty_root)
    collect(workspace, "shop_heldout", CollectConfig(env="toolshop", tasks=["db=0:task=7000"], policy="probing",
                                                      workers=0))
    at = open_page(COLLECT_PAGE)
    at.selectbox(key="co_env").set_value("toolshop").run()
    at.text_input(key="co_tasks_typed").set_value("db=0:task=1, db=0:task=2")
    at.radio(key="co_mode").set_value("Explore").run()
    at.number_input(key="co_ex_budget").set_value(11)
    at.number_input(key="co_ex_rounds").set_value(2)
    at.selectbox(key="co_ex_strategy").set_value("explore")
    at.text_input(key="co_ex_schedule").set_value("1.0, 0.5")
    at.selectbox(key="co_ex_heldout").set_value("shop_heldout").run()
    at.text_input(key="co_ex_dataset").set_value("shop_explored")
    no_exception(at.button(key="co_ex_run").click().run())
    success = "\n".join(str(s.value) for s in at.success)
    assert "11 of 11 real steps in 2 of 2 rounds" in success
    assert at.get("plotly_chart"), "no curve"
    last = orjson.loads((empty_root / "runs" / "explore" / "shop_explored" / "rounds.jsonl").read_text()
                        .splitlines()[-1])
    sources = [str(c.value).replace("\\", "") for c in at.caption if str(c.value).startswith("Produced by")]
    assert any(c.startswith("Produced by: method harness · model none · dataset shop_heldout · split 1 episodes · "
                            f"n {last['heldout_turns']} turns of 1 episodes · run ")
               and f"@{last['version']} (explore run " in c for c in sources), sources
    links = at.get("page_link")
    turn_links = [link.label.replace("\\", "") for link in links if link.page == "traces"]
    assert turn_links and all(label.startswith("toolshop-db-0:task-") and "#" in label for label in turn_links)
    assert any(link.page == "worldbook" and link.label.startswith("new") for link in links)
    rounds = (empty_root / "runs" / "explore" / "shop_explored" / "rounds.jsonl").read_text().splitlines()
    assert [orjson.loads(line)["weight"] for line in rounds] == [1.0, 0.5]
    at.number_input(key="co_ex_budget").set_value(1)
    at.number_input(key="co_ex_rounds").set_value(3)
    at.text_input(key="co_ex_dataset").set_value("other")
    no_exception(at.button(key="co_ex_run").click().run())
    assert any("cannot be split over 3 rounds" in str(e.value) for e in at.error)
    at.number_input(key="co_ex_budget").set_value(10)
    at.text_input(key="co_ex_schedule").set_value("1.0, lots")
    no_exception(at.button(key="co_ex_run").click().run())
    assert any("lots" in str(e.value) for e in at.error)


@pytest.mark.integration
@pytest.mark.slow
def test_collect_page_collects_and_explores_on_an_mcp_server(empty_root: Path, tmp_path: Path) -> None:
    """The mcp environment through the Collect page: mcp-server-time started from its command, tasks from a file."""
    import sys

    pytest.importorskip("mcp")
    server = Path(sys.prefix) / "bin" / "mcp-server-time"
    if not server.exists():
        pytest.skip("mcp-server-time is not installed (make install)")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n".join(orjson.dumps(task).decode() for task in (
        {"id": "paris", "instruction": "What time is it in Paris?",
         "ground_truth": [{"name": "get_current_time", "arguments": {"timezone": "Europe/Paris"}}]},
        {"id": "tokyo", "instruction": "And in Tokyo?",
         "ground_truth": [{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}]})))
    at = open_page(COLLECT_PAGE)
    at.selectbox(key="co_env").set_value("mcp").run()
    assert any("Give the server's command" in str(info.value) for info in at.info)
    at.radio(key="co_mcp_how").set_value("URL").run()
    at.text_input(key="co_mcp_url").set_value("http://127.0.0.1:1/mcp").run()
    warned = [str(w.value).replace("\\", "") for w in at.warning]  # the task list says why (markdown escaped)
    assert any("cannot start the MCP server at http://127.0.0.1:1/mcp" in text for text in warned), warned
    at.radio(key="co_mcp_how").set_value("command").run()
    at.text_input(key="co_mcp_command").set_value(str(server))
    at.text_input(key="co_mcp_tasks").set_value(str(tasks)).run()
    assert at.multiselect(key="co_tasks_pick").options == ["paris", "tokyo"]
    at.number_input(key="co_episodes").set_value(0)
    at.number_input(key="co_workers").set_value(1)
    at.text_input(key="co_dataset").set_value("times")
    no_exception(at.button(key="co_run").click().run())
    assert "2 won of 2" in "\n".join(str(s.value) for s in at.success)
    episodes = list(Workspace(empty_root).dataset("times").iter_episodes())
    assert {e.env_id for e in episodes} == {"mcp/mcp-time"} and all(e.turns for e in episodes)
    assert episodes[0].metadata["env"]["kwargs"] == {"command": str(server), "tasks": str(tasks)}

    at.radio(key="co_mode").set_value("Explore").run()
    at.number_input(key="co_ex_budget").set_value(4)
    at.number_input(key="co_ex_rounds").set_value(1)
    at.text_input(key="co_ex_dataset").set_value("times_explored")
    no_exception(at.button(key="co_ex_run").click().run())
    assert "4 of 4 real steps in 1 of 1 rounds" in "\n".join(str(s.value) for s in at.success)
    explored = list(Workspace(empty_root).dataset("times_explored").iter_episodes())
    assert explored and {e.env_id for e in explored} == {"mcp/mcp-time"}
