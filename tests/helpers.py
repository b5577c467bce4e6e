"""Builders of test inputs shared by several test modules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson


def tool_call(call_id: str | None, name: str, arguments: Any) -> dict[str, Any]:
    call: dict[str, Any] = {
        "type": "function",
        "function": {"name": name, "arguments": arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()},
    }
    if call_id is not None:
        call["id"] = call_id
    return call


def airline_conversation(task_id: int, reward: float, *, user_id: str = "mia_li_3668") -> dict[str, Any]:
    """A conversation shaped like the published tau-bench airline logs (ids reused within it)."""
    return {
        "task_id": task_id,
        "reward": reward,
        "info": {"task": {"user_id": user_id, "instruction": f"You are {user_id}. Book a flight.", "actions": []},
                 "source": "user", "reward_info": {"reward": reward}},
        "traj": [
            {"role": "system", "content": "# Airline Agent Policy\nBe helpful."},
            {"role": "user", "content": "Hi! I want to book a flight from New York to Seattle."},
            {"content": "Could you give me your user id?", "role": "assistant"},
            {"role": "user", "content": f"Sure, it is {user_id}."},
            {"content": None, "role": "assistant",
             "tool_calls": [tool_call("call_A", "get_user_details", {"user_id": user_id})]},
            {"role": "tool", "tool_call_id": "call_A", "name": "get_user_details",
             "content": orjson.dumps({"name": {"first_name": "Mia"}, "membership": "gold"}).decode()},
            {"content": None, "role": "assistant",
             "tool_calls": [tool_call("call_B", "search_direct_flight", {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"})]},
            {"role": "tool", "tool_call_id": "call_B", "name": "search_direct_flight", "content": "[]"},
            {"content": "There are no direct flights. Shall I search one-stop flights?", "role": "assistant"},
            {"role": "user", "content": "Yes please."},
            {"content": None, "role": "assistant",
             "tool_calls": [tool_call("call_B", "search_onestop_flight", {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"})]},
            {"role": "tool", "tool_call_id": "call_B", "name": "search_onestop_flight",
             "content": orjson.dumps([[{"flight_number": "HAT136"}, {"flight_number": "HAT039"}]]).decode()},
            {"content": "I found HAT136 then HAT039.", "role": "assistant"},
            {"role": "user", "content": "###STOP###"},
        ],
    }


def write_json(path: Path, value: Any) -> Path:
    path.write_bytes(orjson.dumps(value, option=orjson.OPT_INDENT_2))
    return path


def write_jsonl(path: Path, values: list[Any]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(v) + b"\n" for v in values))
    return path


SAMPLES = Path(__file__).resolve().parents[1] / "data_samples" / "collected"


def sample_episodes(name: str) -> list[Any]:
    """The bundled episodes `data_samples/collected/<name>.jsonl` (real environments, collected by their experts)."""
    import pytest

    from worldsmith.traces import Episode

    path = SAMPLES / f"{name}.jsonl"
    if not path.exists():
        pytest.fail(f"sample missing: {path} (data_samples/make_samples.py)")
    return [Episode.model_validate({k: v for k, v in orjson.loads(line).items() if k != "format"})
            for line in path.read_bytes().splitlines() if line.strip()]


def split_by_family(episodes: list[Any], every: int = 4) -> tuple[list[Any], list[Any]]:
    """(construction, held out): every `every`-th trajectory family (sorted) is held out, whole."""
    from worldsmith.traces import trajectory_family

    families = sorted({trajectory_family(e) for e in episodes})
    held = set(families[::every])
    return ([e for e in episodes if trajectory_family(e) not in held],
            [e for e in episodes if trajectory_family(e) in held])


TOOLSHOP_CONVERSATIONS = Path(__file__).resolve().parents[1] / "data_samples" / "toolshop" / "conversations.openai.jsonl"


def _called(record: dict[str, Any]) -> set[str]:
    return {call["function"]["name"] for message in record["messages"] for call in message.get("tool_calls") or []}


def toolshop_files(folder: Path, *, declared: bool = True) -> tuple[Path, Path]:
    """The toolshop transcripts without their env id, as a train file (the conversations that place an order or
    cancel one) and a test file (the rest): one API, two different sets of called tools."""
    rows = [json.loads(line) for line in TOOLSHOP_CONVERSATIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        row.pop("env_id")
        if not declared:
            row.pop("tools")
    train = [r for r in rows if _called(r) & {"place_order", "cancel_order"}]
    test = [r for r in rows if r not in train and _called(r)]
    assert set().union(*map(_called, train)) != set().union(*map(_called, test))
    paths = folder / "train.openai.jsonl", folder / "test.openai.jsonl"
    for path, part in zip(paths, (train, test), strict=True):
        path.write_text("".join(json.dumps(r) + "\n" for r in part), encoding="utf-8")
    return paths


def tool_log(episodes: list[list[tuple[str, dict[str, Any], Any]]]) -> list[Any]:
    """Evidence of tool calls, episode `ep<n>` after episode: each call (tool, arguments, answer), a non-text
    answer written as JSON."""
    from worldsmith.worldbook.model import Evidence

    out = []
    for number, calls in enumerate(episodes):
        for index, (tool, arguments, answer) in enumerate(calls):
            text = answer if isinstance(answer, str) else json.dumps(answer)
            out.append(Evidence(turn_id=f"ep{number}#{index}", action=tool, action_text=f"{tool}({arguments})",
                                observation=text, arguments=arguments))
    return out
