"""The workbench under Streamlit's AppTest: zero-config start, Traces page browsing, deep links, import."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from streamlit.testing.v1 import AppTest
from workbench_support import APP, TRACES_PAGE, shown

from worldsmith.workspace import Workspace

pytestmark = pytest.mark.slow  # starts the workbench in a subprocess

TIMEOUT = 30


def traces(**query: str) -> AppTest:
    at = AppTest.from_file(str(TRACES_PAGE), default_timeout=TIMEOUT)
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def markdown(at: AppTest) -> str:
    return "\n".join(str(m.value) for m in at.markdown)


def codes(at: AppTest) -> str:
    return "\n".join(str(c.value) for c in at.code)


def frames_with(at: AppTest, column: str) -> list:
    """The tables shown (read-only st.dataframe carries no key) that have `column`."""
    return [df.value for df in at.dataframe if column in df.value.columns]


def episode_table(at: AppTest):
    tables = [df for df in at.dataframe if df.key and df.key.startswith("tr_episodes_")]
    assert len(tables) == 1, [df.key for df in at.dataframe]
    return tables[0].value


# ------------------------------------------------------------------------- links (pure)


def test_turn_link_encodes_the_hash_and_round_trips() -> None:
    from workbench.common.links import episode_link, turn_link

    url = turn_link("samples", "ep #1/x#12")
    assert url.startswith("traces?") and "#" not in url and "%23" in url
    query = parse_qs(urlsplit(url).query)
    assert query == {"dataset": ["samples"], "turn": ["ep #1/x#12"]}
    assert parse_qs(urlsplit(episode_link("d", "a&b")).query) == {"dataset": ["d"], "episode": ["a&b"]}
    assert turn_link(None, "e#0") == "traces?turn=e%230"


def test_untrusted_text_stays_literal_in_markdown() -> None:
    from workbench.common.text import md_code, md_escape

    assert md_code("ep#1") == "`ep#1`"
    assert md_code("a`b") == "``a`b``" and md_code("`x") == "`` `x ``"
    assert md_escape("[x](http://e) **b** <i>") == "\\[x\\]\\(http\\://e\\) \\*\\*b\\*\\* \\<i\\>"
    assert "\n" not in md_escape("two\nlines")


# ------------------------------------------------------------------------- app shell


def test_app_zero_config_imports_the_samples_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                   samples_folder: Path) -> None:
    root = tmp_path / "fresh-ws"
    monkeypatch.setenv("WORLDSMITH_WORKSPACE", str(root))
    monkeypatch.setenv("WORLDSMITH_SAMPLES", str(samples_folder))
    at = no_exception(AppTest.from_file(str(APP), default_timeout=TIMEOUT).run())
    workspace = Workspace(root)
    assert workspace.list_datasets() == ["samples"]
    assert workspace.dataset("samples").stats()["episodes"] == 2
    assert "samples" in markdown(at)  # the Home page lists it
    revision = workspace.dataset("samples").revision
    no_exception(AppTest.from_file(str(APP), default_timeout=TIMEOUT).run())
    assert workspace.dataset("samples").revision == revision  # not imported twice


def test_app_without_samples_starts_empty(empty_root: Path) -> None:
    at = no_exception(AppTest.from_file(str(APP), default_timeout=TIMEOUT).run())
    assert Workspace(empty_root).list_datasets() == []
    assert any("No datasets yet" in str(i.value) for i in at.info)


def test_app_navigates_to_traces(populated: Path) -> None:
    at = no_exception(AppTest.from_file(str(APP), default_timeout=TIMEOUT).run())
    assert "chat" in markdown(at) and "samples" in markdown(at)
    at.switch_page(str(TRACES_PAGE)).run()
    no_exception(at)
    assert [t.value for t in at.title] == ["Traces"]


# ------------------------------------------------------------------------- browsing


def test_traces_page_lists_datasets_and_episodes(populated: Path) -> None:
    at = no_exception(traces())
    picker = at.selectbox(key="tr_dataset_pick")
    assert picker.options == ["chat", "many", "samples"]
    sizes = frames_with(at, "revision")[0]
    assert list(sizes["dataset"]) == ["chat", "many", "samples"] and list(sizes["episodes"]) == [3, 30, 2]
    assert picker.value == "chat"
    assert list(episode_table(at)["episode_id"]) == ["c-win", "c-lose", "c-long"]
    picker.set_value("samples").run()
    no_exception(at)
    assert list(episode_table(at)["episode_id"]) == ["ledger_trace", "terminal-1"]
    assert at.query_params.get("dataset") == "samples"


def test_selecting_an_episode_shows_its_turns(populated: Path) -> None:
    at = no_exception(traces(dataset="samples"))
    at.selectbox(key="tr_episode_pick").set_value("terminal-1").run()
    no_exception(at)
    text = markdown(at)
    assert "Episode terminal\\-1" in [str(h.value) for h in at.subheader]
    for index in range(3):
        assert f"`terminal-1#{index}`" in text
    assert "root@host:/app/tests# pwd" in codes(at)  # observation text, whitespace kept
    assert '"keystrokes": "cd tests\\n"' in codes(at)  # action arguments as pretty JSON
    assert "linked turn" not in text
    assert at.query_params.get("episode") == "terminal-1" and at.query_params.get("dataset") == "samples"
    # previous / next step through the page
    at.button(key="tr_prev_episode").click().run()
    assert at.query_params.get("episode") == "ledger_trace"
    assert "`ledger_trace#1`" in markdown(at)


def test_json_observations_are_pretty_printed_and_context_is_shown(populated: Path) -> None:
    at = no_exception(traces(dataset="chat", episode="c-win"))
    assert '"name": "user number 0"' in codes(at)
    assert "hi from c-win" in "\n".join(str(t.value) for t in at.text)
    at.segmented_control(key="tr_view").set_value("Cards").run()  # the folded view
    assert any("Context: 1 user" in e.label and "hi from c\\-win" in e.label for e in at.expander)
    assert "hi from c-win" in "\n".join(str(t.value) for t in at.text)


def test_the_transcript_interleaves_messages_with_tool_calls_and_results(populated: Path) -> None:
    at = no_exception(traces(dataset="chat", episode="c-lose"))  # user message, call, result, call, result
    assert at.segmented_control(key="tr_view").value == "Transcript"
    messages = at.get("chat_message")
    assert [m.proto.name for m in messages] == ["user"]
    assert "hi from c-lose" in "\n".join(str(t.value) for t in messages[0].text)
    assert not any(e.label.startswith("Context:") for e in at.expander)
    assert "**Tool call**" in markdown(at) and "**Tool result**" in markdown(at)
    # the second result is JSON like the first: what changed is listed by field
    changes = next(e for e in at.expander if e.label.startswith("Changes since turn 0"))
    assert "2 changed" in changes.label
    (diff,) = [e.proto.body for e in at.get("html") if "ws-diff" in e.proto.body]  # the one diff view
    assert "<td><code>/name</code></td><td>changed</td><td>&quot;user number 0&quot;</td>" \
        "<td>&quot;user number 1&quot;</td>" in diff
    assert "<td><code>/index</code></td><td>changed</td><td>0</td><td>1</td>" in diff


def test_filters_reduce_the_list(populated: Path) -> None:
    at = no_exception(traces(dataset="chat"))
    at.selectbox(key="tr_f_outcome").set_value("success").run()
    assert list(episode_table(no_exception(at))["episode_id"]) == ["c-win"]
    at.selectbox(key="tr_f_outcome").set_value("failure").run()
    assert list(episode_table(at)["episode_id"]) == ["c-lose", "c-long"]
    at.number_input(key="tr_f_min").set_value(10).run()
    assert list(episode_table(at)["episode_id"]) == ["c-long"]
    at.selectbox(key="tr_f_outcome").set_value("any").run()
    at.number_input(key="tr_f_min").set_value(None).run()
    at.number_input(key="tr_f_max").set_value(1).run()
    assert list(episode_table(at)["episode_id"]) == ["c-win"]
    at.number_input(key="tr_f_max").set_value(None).run()
    at.text_input(key="tr_f_search").input("lose").run()
    assert list(episode_table(at)["episode_id"]) == ["c-lose"]
    at.text_input(key="tr_f_search").input("nothing-matches").run()
    assert any("No episodes match" in str(i.value) for i in no_exception(at).info)


def test_environment_filter(populated: Path) -> None:
    at = no_exception(traces(dataset="samples"))
    env = at.selectbox(key="tr_f_env")
    assert env.options == ["All", "terminal"]
    env.set_value("terminal").run()
    assert list(episode_table(no_exception(at))["episode_id"]) == ["terminal-1"]


def test_episode_pages(populated: Path) -> None:
    at = no_exception(traces(dataset="chat"))
    assert all(p.key != "tr_episode_page" for p in at.get("pagination"))  # 3 episodes: one page
    assert any("Episodes 1–3 of 3" in str(c.value) for c in at.caption)

    at = no_exception(traces(dataset="many"))
    assert list(episode_table(at)["episode_id"]) == [f"m{i:02d}" for i in range(25)]
    pager = [p for p in at.get("pagination") if p.key == "tr_episode_page"]
    assert len(pager) == 1 and pager[0].num_pages == 2
    pager[0].set_value(2).run()
    assert list(episode_table(no_exception(at))["episode_id"]) == [f"m{i:02d}" for i in range(25, 30)]
    assert any("Episodes 26–30 of 30" in str(c.value) for c in at.caption)
    # a filter change goes back to page 1
    at.selectbox(key="tr_f_outcome").set_value("success").run()
    assert list(episode_table(no_exception(at))["episode_id"]) == [f"m{i:02d}" for i in range(1, 30, 2)]
    # a bigger page size shows everything on one page
    at.selectbox(key="tr_f_outcome").set_value("any").run()
    at.selectbox(key="tr_episode_page_size").set_value(50).run()
    assert len(episode_table(no_exception(at))) == 30
    # switching dataset resets the filters
    at.selectbox(key="tr_f_outcome").set_value("failure").run()
    at.selectbox(key="tr_dataset_pick").set_value("chat").run()
    assert at.selectbox(key="tr_f_outcome").value == "any"
    assert len(episode_table(no_exception(at))) == 3


def test_a_new_import_shows_up_without_restart(empty_root: Path, chat_file: Path, openai_file: Path) -> None:
    workspace = Workspace(empty_root)
    workspace.ingest([openai_file], "grow")
    at = no_exception(traces(dataset="grow"))
    assert list(episode_table(at)["episode_id"]) == ["c1"]
    workspace.ingest([chat_file], "grow")  # new revision: the cached pages must not be reused
    at.run()
    # (two ingests within one second may list in either order: ingest ids start with the second)
    assert sorted(episode_table(no_exception(at))["episode_id"]) == ["c-long", "c-lose", "c-win", "c1"]
    assert at.selectbox(key="tr_dataset_pick").value == "grow"
    assert [m.value for m in at.metric][:2] == ["4", "49"]


# ------------------------------------------------------------------------- turns and deep links


def test_turn_pages_and_search(populated: Path) -> None:
    at = no_exception(traces(dataset="chat", episode="c-long"))
    pager = [p for p in at.get("pagination") if p.key == "tr_turn_page"]
    assert len(pager) == 1 and pager[0].num_pages == 3
    assert "`c-long#0`" in markdown(at) and "`c-long#19`" in markdown(at) and "`c-long#20`" not in markdown(at)
    pager[0].set_value(3).run()
    text = markdown(no_exception(at))
    assert "`c-long#40`" in text and "`c-long#44`" in text and "`c-long#0`" not in text
    at.text_input(key="tr_turn_search").input("user number 33").run()
    text = markdown(no_exception(at))
    assert "`c-long#33`" in text and "`c-long#32`" not in text
    assert any("1 of 45 turns match" in str(c.value) for c in at.caption)


def test_deep_link_opens_and_highlights_the_turn(populated: Path) -> None:
    at = no_exception(traces(dataset="chat", turn="c-long#44"))
    text = markdown(at)
    linked = [str(m.value) for m in at.markdown if "linked turn" in str(m.value)]
    assert len(linked) == 1 and "`c-long#44`" in linked[0]
    assert "`c-long#0`" not in text  # jumped to the page holding turn 44
    assert [p.value for p in at.get("pagination") if p.key == "tr_turn_page"] == [3]
    assert at.query_params.get("turn") == "c-long#44" and at.query_params.get("dataset") == "chat"
    assert at.session_state["tr_episode"] == "c-long"


def test_linked_turn_off_page_offers_a_way_back(populated: Path) -> None:
    at = no_exception(traces(dataset="chat", turn="c-long#44"))
    [pager] = [p for p in at.get("pagination") if p.key == "tr_turn_page"]
    pager.set_value(1).run()
    assert "linked turn" not in markdown(no_exception(at))
    assert any("is not on this page" in str(c.value) for c in at.caption)
    at.button(key="tr_goto_linked").click().run()
    linked = [str(m.value) for m in no_exception(at).markdown if "linked turn" in str(m.value)]
    assert len(linked) == 1 and "`c-long#44`" in linked[0]


def test_deep_link_without_dataset_finds_it(populated: Path) -> None:
    at = no_exception(traces(turn="terminal-1#2"))
    assert at.selectbox(key="tr_dataset_pick").value == "samples"
    linked = [str(m.value) for m in at.markdown if "linked turn" in str(m.value)]
    assert len(linked) == 1 and "`terminal-1#2`" in linked[0]


def test_episode_deep_link_and_link_button(populated: Path) -> None:
    at = no_exception(traces(dataset="samples", episode="ledger_trace"))
    assert "`ledger_trace#1`" in markdown(at) and "linked turn" not in markdown(at)
    at.button(key="tr_link_ledger_trace#1").click().run()
    no_exception(at)
    assert at.query_params.get("turn") == "ledger_trace#1" and "episode" not in at.query_params
    linked = [str(m.value) for m in at.markdown if "linked turn" in str(m.value)]
    assert len(linked) == 1 and "`ledger_trace#1`" in linked[0]
    # choosing another episode drops the link
    at.selectbox(key="tr_episode_pick").set_value("terminal-1").run()
    assert at.query_params.get("episode") == "terminal-1" and "turn" not in at.query_params


@pytest.mark.parametrize(
    ("query", "message"),
    [({"dataset": "nope"}, "is not in this workspace"),
     ({"dataset": "[x](http://evil.example)"}, "`[x](http://evil.example)` is not in this workspace"),
     ({"dataset": "samples", "turn": "not-a-turn"}, "is not a turn id")],
)
def test_bad_deep_links_warn(populated: Path, query: dict[str, str], message: str) -> None:
    at = no_exception(traces(**query))
    assert any(message in str(w.value) for w in at.warning)


def test_unknown_episode_warns(populated: Path) -> None:
    at = no_exception(traces(dataset="samples", episode="missing-episode"))
    assert any("is not in dataset" in str(w.value) for w in at.warning)


# ------------------------------------------------------------------------- import


def test_import_through_the_uploader(empty_root: Path, openai_file: Path) -> None:
    at = no_exception(traces())
    assert any("No datasets yet" in str(i.value) for i in at.info)
    assert at.button(key="tr_import_button").disabled
    at.file_uploader[0].set_value(("my chat.jsonl", openai_file.read_bytes(), "application/json"))
    at.text_input(key="tr_import_dataset").input("from-upload")
    at.run()
    at.button(key="tr_import_button").click().run()
    no_exception(at)
    summary = at.session_state["tr_last_report"]
    assert summary["committed"] and summary["episodes"] == 1 and summary["dataset"] == "from-upload"
    stored = Path(summary["files"][0]["path"])
    assert stored.parent.parent in ((empty_root / "uploads").resolve(), empty_root / "uploads")
    assert stored.name == "my_chat.jsonl"  # the file's own name: ids derived from it carry no prefix
    assert Workspace(empty_root).dataset("from-upload").stats()["episodes"] == 1
    assert any("Imported 1 episodes" in str(s.value) for s in at.success)
    assert at.selectbox(key="tr_dataset_pick").value == "from-upload"
    assert list(episode_table(at)["episode_id"]) == ["c1"]
    # the report survives reruns, and the dataset's history lists the ingest
    at.run()
    assert any("Imported 1 episodes" in str(s.value) for s in at.success)
    history = frames_with(at, "ingest")
    assert len(history) == 1 and list(history[0]["episodes"]) == [1]


def test_an_environment_chosen_on_import_is_stored(empty_root: Path, openai_file: Path) -> None:
    at = no_exception(traces())
    at.file_uploader[0].set_value(("chat.jsonl", openai_file.read_bytes(), "application/json"))
    at.text_input(key="tr_import_env").input("airline")
    at.run()
    no_exception(at.button(key="tr_import_button").click().run())
    assert [e.env_id for e in Workspace(empty_root).dataset("uploads").iter_episodes()] == ["airline"]
    assert list(episode_table(at)["env_id"]) == ["airline"]


def test_invalid_dataset_name_blocks_the_import(empty_root: Path, openai_file: Path) -> None:
    at = no_exception(traces())
    at.file_uploader[0].set_value(("a.jsonl", openai_file.read_bytes(), "application/json"))
    at.text_input(key="tr_import_dataset").input("../evil name")
    at.run()
    assert at.button(key="tr_import_button").disabled
    assert any("dataset name" in shown(e.value) and "1-120 letters" in shown(e.value) for e in at.error)


def test_rejects_and_quarantine_are_reported(empty_root: Path, tmp_path: Path, openai_file: Path) -> None:
    bad = tmp_path / "mixed.jsonl"
    bad.write_text(openai_file.read_text() + "{not json\n" + json.dumps({"id": "x", "messages": 5}) + "\n")
    at = no_exception(traces())
    at.file_uploader[0].set_value(("mixed.jsonl", bad.read_bytes(), "application/json"))
    at.selectbox(key="tr_import_format").set_value("openai")
    at.checkbox(key="tr_import_strict").check()
    at.run()
    at.button(key="tr_import_button").click().run()
    no_exception(at)
    summary = at.session_state["tr_last_report"]
    assert not summary["committed"] and summary["rejected"] >= 1 and summary["quarantine"]
    assert any("Nothing committed" in str(e.value) for e in at.error)
    rejects = frames_with(at, "reason")
    assert len(rejects) == 1
    assert list(rejects[0].columns) == ["source", "line", "pointer", "reason"]
    assert 2 in list(rejects[0]["line"])
    why = next(str(m.value) for m in at.markdown if str(m.value).startswith("Why, in full"))
    assert "1 × invalid JSON" in shown(why), why  # each reason whole, not cut by a table cell
    assert [b.key for b in at.get("download_button")] == ["tr_last_report_quarantine"]
    assert Workspace(empty_root).list_datasets() == []
    at.button(key="tr_dismiss_report").click().run()
    assert not at.session_state["tr_last_report"]


def test_reject_reasons_are_grouped_by_their_wording() -> None:
    from workbench.traces.import_report import reason_counts

    rejects = [{"reason": "tool call 'f' has no result (id 'a')"}, {"reason": "invalid JSON: line 1 column 2"},
               {"reason": "tool call 'g' has no result (id 'b')"}, {}]
    assert reason_counts(rejects) == [("tool call 'f' has no result (id 'a')", 2),
                                      ("invalid JSON: line 1 column 2", 1), ("(no reason given)", 1)]


def test_import_report_component_renders_stored_reports(populated: Path) -> None:
    def page() -> None:
        import os

        from workbench.traces.import_report import render_import_history
        from worldsmith.workspace import Workspace

        root = os.environ["WORLDSMITH_WORKSPACE"]
        render_import_history(Workspace(root).dataset("samples").reports(), root=root, key="h")

    at = no_exception(AppTest.from_function(page, default_timeout=TIMEOUT).run())
    table = frames_with(at, "ingest")[0]
    assert list(table["episodes"]) == [2] and list(table["committed"]) == [True]
    ingest = table["ingest"][0]
    at.selectbox(key="h_pick").set_value(ingest).run()
    no_exception(at)
    assert any("Imported 2 episodes, 5 turns into `samples`" in str(s.value) for s in at.success)


# ------------------------------------------------------------------------- configuration


def test_streamlit_reads_the_safe_defaults_from_the_repository_root() -> None:
    import subprocess
    import sys
    import tomllib

    from workbench_support import REPO

    config = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
    assert config["server"] == {"address": "127.0.0.1", "headless": True, "enableXsrfProtection": True,
                                "enableCORS": True, "maxUploadSize": 500}
    assert config["browser"]["gatherUsageStats"] is False
    shown = subprocess.run([sys.executable, "-m", "streamlit", "config", "show"], cwd=REPO, capture_output=True,
                           text=True, timeout=60, check=True).stdout
    origin = f"The value below was set in {REPO / '.streamlit' / 'config.toml'}"
    for line in ('address = "127.0.0.1"', "enableXsrfProtection = true", "maxUploadSize = 500",
                 "gatherUsageStats = false"):
        before = shown.split("\n" + line + "\n")[0]
        assert before.rstrip().endswith(origin), line


def test_assign_splits_and_export_from_the_page(empty_root: Path, chat_file: Path) -> None:
    workspace = Workspace(empty_root)
    assert workspace.ingest([chat_file], "chat").committed
    at = no_exception(traces(dataset="chat"))
    at.number_input(key="sp_train").set_value(0.5)
    at.number_input(key="sp_validation").set_value(0.0)
    at.number_input(key="sp_test").set_value(0.5)
    at.button(key="sp_assign").click().run()
    no_exception(at)
    counts = frames_with(at, "families")[0]
    assert dict(zip(counts["split"], counts["episodes"], strict=True)) == {"train": 2, "validation": 0, "test": 1}
    assert workspace.dataset("chat").splits() == ["test", "train"]
    at.selectbox(key="ex_format").set_value("openai")
    at.selectbox(key="ex_split").set_value("train")
    at.button(key="ex_run").click().run()
    no_exception(at)
    out = empty_root / "exports" / "chat.train.openai.jsonl"
    assert out.exists() and len(out.read_text().splitlines()) == 2
    assert "Wrote 2 episodes" in markdown(at)


def test_the_import_headline_flags_dialogue_only_and_empty_records_and_suffixed_ids() -> None:
    from workbench.traces.import_report import report_headline

    report = {"dataset": "d", "committed": True, "files": [
        {"path": "a.jsonl", "episodes": 3, "turns": 5, "rejected": 2, "duplicates": 0, "empty": 2, "renamed": 1,
         "dialogue_only": 1}]}
    headline = report_headline(report)
    assert "1 of them dialogue only (no tool call)" in headline
    assert "2 empty records (no turn, no message), not stored" in headline and "1 ids suffixed on a collision" in headline
    plain = report_headline({"dataset": "d", "committed": True, "files": [  # an old report: no dialogue_only count
        {"path": "a.jsonl", "episodes": 3, "turns": 5, "rejected": 0, "duplicates": 0}]})
    assert "empty" not in plain and "dialogue" not in plain


def test_results_are_diffed_only_against_the_same_tool_and_entity() -> None:
    from workbench.traces.timeline import comparable
    from worldsmith.traces import Action, Observation, Turn

    def turn(index: int, tool: str, data: dict) -> Turn:
        return Turn(id=f"e#{index}", index=index, action=Action(name=tool),
                    observation=Observation(text=json.dumps(data), data=data))

    order = turn(0, "get_order", {"order_id": "o1", "status": "pending"})
    assert comparable(order, turn(2, "get_order", {"order_id": "o1", "status": "cancelled"}))
    assert not comparable(order, turn(1, "get_user", {"user_id": "u1", "name": "Ann"}))  # an order is not a user
    assert not comparable(order, turn(3, "get_order", {"order_id": "o2", "status": "pending"}))  # nor another order


def _long_system_prompt() -> None:
    from workbench.traces.timeline import render_messages
    from worldsmith.traces import ContextEvent

    render_messages([ContextEvent(role="system", content="You are a support agent. " * 100),
                     ContextEvent(role="user", content="hi")])


def test_a_long_system_prompt_is_folded() -> None:
    at = no_exception(AppTest.from_function(_long_system_prompt, default_timeout=TIMEOUT).run())
    [folded] = [e for e in at.expander if e.label.startswith("System prompt")]
    assert "2,500 characters" in folded.label and not folded.proto.expanded
    assert "hi" in [str(t.value) for t in at.text]
