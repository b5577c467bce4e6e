"""OpenAI chat messages: conversation shapes, call/result alignment, context, sibling fields."""

from __future__ import annotations

from pathlib import Path

import orjson

from helpers import airline_conversation, tool_call, write_json, write_jsonl
from worldsmith.traces import Episode, Reject, detect_format, get_importer, read_traces


def _read(path: Path) -> tuple[list[Episode], list[Reject]]:
    items = list(read_traces([path]))
    return [i for i in items if isinstance(i, Episode)], [i for i in items if isinstance(i, Reject)]


def test_airline_logs_list_of_conversations_under_traj(tmp_path: Path) -> None:
    path = write_json(tmp_path / "gpt-4o-airline.json", [airline_conversation(0, 0.0), airline_conversation(1, 1.0)])
    assert detect_format(path).importer.name == "openai"
    episodes, rejects = _read(path)
    assert rejects == []
    assert [e.id for e in episodes] == ["gpt-4o-airline-1", "gpt-4o-airline-2"]
    first = episodes[0]
    assert first.task_id == "0" and first.reward == 0.0 and episodes[1].reward == 1.0
    assert first.task == "You are mia_li_3668. Book a flight."  # from info.task.instruction
    assert [t.action.name for t in first.turns] == ["get_user_details", "search_direct_flight", "search_onestop_flight"]
    # the reused id call_B is matched to the open call, in order
    assert first.turns[1].observation.text == "[]"
    assert first.turns[2].observation.data == [[{"flight_number": "HAT136"}, {"flight_number": "HAT039"}]]
    assert first.turns[0].observation.data["membership"] == "gold"
    assert first.turns[0].action.arguments == {"user_id": "mia_li_3668"}
    assert first.turns[0].action.raw == '{"user_id":"mia_li_3668"}'
    # system/user/assistant text is context of the turn that follows it
    roles = [(c.role, c.content[:10]) for c in first.turns[0].context]
    assert roles == [("system", "# Airline "), ("user", "Hi! I want"), ("assistant", "Could you "), ("user", "Sure, it i")]
    assert [c.role for c in first.turns[2].context] == ["assistant", "user"]
    assert [c.content for c in first.final_context] == ["I found HAT136 then HAT039.", "###STOP###"]
    # provenance points into the file: element 0, message 4, call 0
    assert first.turns[0].id == "gpt-4o-airline-1#0"
    assert first.turns[0].provenance.pointer == "/0/traj/4/tool_calls/0"
    assert first.turns[0].provenance.line == 2
    assert first.metadata["info"]["source"] == "user"


def test_jsonl_with_messages_and_parallel_calls_out_of_order(tmp_path: Path) -> None:
    record = {
        "id": "conv-7", "task_id": "t7", "reward": 1, "env": "retail",
        "messages": [
            {"role": "user", "content": "Look up two orders."},
            {"role": "assistant", "content": "Checking both.", "tool_calls": [
                tool_call("c1", "get_order", {"order_id": "#1"}), tool_call("c2", "get_order", {"order_id": "#2"})]},
            {"role": "tool", "tool_call_id": "c2", "content": "order 2: shipped"},
            {"role": "tool", "tool_call_id": "c1", "content": "order 1: pending"},
            {"role": "assistant", "content": "Done."},
        ],
    }
    path = write_jsonl(tmp_path / "retail.jsonl", [record])
    episodes, rejects = _read(path)
    assert rejects == []
    (episode,) = episodes
    assert episode.id == "conv-7" and episode.env_id == "retail" and episode.reward == 1.0
    assert [t.observation.text for t in episode.turns] == ["order 1: pending", "order 2: shipped"]
    assert [t.action.call_id for t in episode.turns] == ["c1", "c2"]
    assert [c.content for c in episode.turns[0].context] == ["Look up two orders.", "Checking both."]
    assert episode.turns[1].context == []
    assert episode.turns[1].provenance.pointer == "/messages/1/tool_calls/1"
    assert episode.task == "Look up two orders."  # no task key: the first user message


def test_results_without_ids_align_by_adjacency_and_legacy_function_calls(tmp_path: Path) -> None:
    record = {"conversation": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [tool_call(None, "a", {}), tool_call(None, "b", {"x": 1})]},
        {"role": "tool", "content": "A out"},
        {"role": "tool", "content": "B out"},
        {"role": "assistant", "content": None, "function_call": {"name": "legacy", "arguments": "{\"q\": 2}"}},
        {"role": "function", "name": "legacy", "content": "legacy out"},
    ]}
    episodes, rejects = _read(write_jsonl(tmp_path / "noids.jsonl", [record]))
    assert rejects == []
    assert [(t.action.name, t.observation.text) for t in episodes[0].turns] == [
        ("a", "A out"), ("b", "B out"), ("legacy", "legacy out")]


def test_bare_message_lists_and_content_parts(tmp_path: Path) -> None:
    conversation = [
        {"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "image_url", "image_url": {"url": "x"}}]},
        {"role": "assistant", "tool_calls": [tool_call("z", "f", {"k": "v"})]},
        {"role": "tool", "tool_call_id": "z", "content": [{"type": "text", "text": "{\"ok\": true}"}]},
    ]
    path = write_json(tmp_path / "bare.json", [conversation])
    episodes, rejects = _read(path)
    assert rejects == []
    turn = episodes[0].turns[0]
    assert turn.context[0].content == "part one\n[image]"
    assert turn.observation.data == {"ok": True}


def test_orphan_result_and_unanswered_call_are_rejected_with_pointers(tmp_path: Path) -> None:
    record = {"id": "broken", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "ghost", "content": "nobody asked"},
        {"role": "assistant", "tool_calls": [tool_call("c1", "ok", {})]},
        {"role": "tool", "tool_call_id": "c1", "content": "fine"},
        {"role": "assistant", "tool_calls": [tool_call("c2", "never_answered", {})]},
    ]}
    path = write_jsonl(tmp_path / "broken.jsonl", [record])
    episodes, rejects = _read(path)
    assert [t.action.name for t in episodes[0].turns] == ["ok"]
    reasons = {r.pointer: r.reason for r in rejects}
    assert "no matching call" in reasons["/messages/1"] and "ghost" in reasons["/messages/1"]
    assert "has no result" in reasons["/messages/4/tool_calls/0"]
    assert all(r.line == 1 and r.source == str(path) for r in rejects)
    assert orjson.loads(rejects[0].raw)["content"] == "nobody asked"


def test_malformed_arguments_are_kept_with_the_parse_error(tmp_path: Path) -> None:
    record = {"messages": [
        {"role": "assistant", "tool_calls": [tool_call("c", "f", "{not json")]},
        {"role": "tool", "tool_call_id": "c", "content": "Error: bad arguments"},
    ]}
    episodes, rejects = _read(write_jsonl(tmp_path / "args.jsonl", [record]))
    action = episodes[0].turns[0].action
    assert action.raw == "{not json" and action.arguments == {} and "not valid JSON" in action.parse_error


def test_a_record_that_is_not_a_conversation_is_rejected(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mixed.jsonl", [
        {"messages": [{"role": "user", "content": "x"}]},
        {"something": "else"},
    ])
    episodes, rejects = _read(path)
    assert len(episodes) == 1 and len(rejects) == 1
    assert rejects[0].line == 2 and "not a conversation" in rejects[0].reason
    assert orjson.loads(rejects[0].raw) == {"something": "else"}


def test_sniff_scores() -> None:
    importer = get_importer("openai")
    assert importer.sniff(Path("x"), '[{"task_id": 0, "traj": [{"role": "system", "content": ""}') >= 0.8
    assert importer.sniff(Path("x"), "User: hello") == 0.0


def test_results_document_with_simulations_and_user_tool_calls(tmp_path: Path) -> None:
    """A tau2-bench results file: conversations under `simulations`, flat tool calls with dict
    arguments, tool messages that carry the call id as `id`, user-side tool calls, nested reward."""
    simulation = {
        "id": "5e1f", "task_id": "[telecom]airplane_mode", "trial": 0,
        "reward_info": {"reward": 1.0},
        "messages": [
            {"role": "assistant", "content": "Hi! How can I help?", "turn_idx": 0},
            {"role": "user", "content": "My phone has no service.", "turn_idx": 1},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "t1", "name": "get_customer_by_phone", "arguments": {"phone_number": "555"}, "requestor": "assistant"}]},
            {"role": "tool", "id": "t1", "content": "{\"customer_id\": \"C1\"}", "requestor": "assistant", "error": False},
            {"role": "user", "content": None, "tool_calls": [
                {"id": "u1", "name": "toggle_airplane_mode", "arguments": {}, "requestor": "user"}]},
            {"role": "tool", "id": "u1", "content": "Airplane mode is now OFF.", "requestor": "user", "error": False},
            {"role": "user", "content": "It works now, thanks!"},
        ],
    }
    path = write_json(tmp_path / "results.json", {"info": {"num_trials": 1}, "tasks": [], "simulations": [simulation]})
    assert detect_format(path).importer.name == "openai"
    episodes, rejects = _read(path)
    assert rejects == []
    (episode,) = episodes
    assert episode.id == "5e1f" and episode.reward == 1.0 and episode.task_id == "[telecom]airplane_mode"
    assert [(t.action.name, t.observation.text) for t in episode.turns] == [
        ("get_customer_by_phone", '{"customer_id": "C1"}'), ("toggle_airplane_mode", "Airplane mode is now OFF.")]
    assert episode.turns[0].action.arguments == {"phone_number": "555"}
    assert episode.turns[0].info == {"requestor": "assistant", "error": False}
    assert episode.turns[1].info["requestor"] == "user"
    assert episode.turns[0].provenance.pointer == "/simulations/0/messages/2/tool_calls/0"
    assert [c.content for c in episode.final_context] == ["It works now, thanks!"]


def test_one_line_array_and_pretty_printed_bare_conversation(tmp_path: Path) -> None:
    one_line = tmp_path / "compact.json"
    one_line.write_bytes(orjson.dumps([airline_conversation(0, 1.0), airline_conversation(1, 0.0)]))
    episodes, rejects = _read(one_line)
    assert rejects == [] and [e.task_id for e in episodes] == ["0", "1"]
    assert episodes[1].turns[0].provenance.pointer == "/1/traj/4/tool_calls/0"
    bare = write_json(tmp_path / "bare_pretty.json", airline_conversation(0, 1.0)["traj"])
    (episode,), rejects = _read(bare)
    assert rejects == [] and len(episode.turns) == 3 and episode.id == "bare_pretty-1"
    assert episode.turns[0].provenance.pointer == "/4/tool_calls/0"


def test_fast_rows_equal_the_rows_of_the_validated_episode(tmp_path: Path) -> None:
    """The ingest fast path (rows, no models) must flatten exactly like the model path, or
    content hashes and stored data would depend on which path read the file."""
    from worldsmith.traces import export_episodes
    from worldsmith.traces.rows import episode_to_rows

    importer = get_importer("openai")
    parallel = {"id": "p", "env": "retail", "success": True, "metadata": {"b": 1, "a": [2]}, "messages": [
        {"role": "system", "content": "be nice"}, {"role": "user", "content": "two things"},
        {"role": "assistant", "content": "ok", "reasoning_content": "hmm",
         "tool_calls": [tool_call("x1", "f", {"z": 1, "a": {"y": 2, "b": 3}}), tool_call("x2", "g", "{bad")]},
        {"role": "tool", "tool_call_id": "x2", "content": "g failed", "is_error": True},
        {"role": "tool", "tool_call_id": "x1", "content": [{"type": "text", "text": "{\"ok\": 1}"}]},
        {"role": "user", "content": None, "tool_calls": [tool_call("u", "toggle", {})]},
        {"role": "tool", "id": "u", "content": "done"},
        {"role": "assistant", "content": "bye"},
    ]}
    sources = [
        write_json(tmp_path / "airline.json", [airline_conversation(0, 0.0), airline_conversation(1, 1.0)]),
        write_jsonl(tmp_path / "parallel.jsonl", [parallel]),
    ]
    exported = tmp_path / "exported.openai.jsonl"
    export_episodes([e for e in read_traces(sources[1:]) if isinstance(e, Episode)], "openai", exported)
    sources.append(exported)
    for source in sources:
        for rows in importer.read_rows(source):
            assert not isinstance(rows, Reject), rows
            episode = rows.to_episode()
            assert episode_to_rows(episode) == rows, source.name
            assert episode.content_hash() == rows.content_hash()
