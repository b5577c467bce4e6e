"""Tool answers in JSON, YAML blocks and Python literals read as the same values, written back in the tool's own
layout; prose is never taken for data."""

from __future__ import annotations

import datetime
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worldsmith.worldbook.answer_formats import (
    REPR_LAYOUT,
    YAML_LAYOUT,
    dump_layout,
    parse_structured,
    structured_layout,
)
from worldsmith.worldbook.record_store import own_records


def _agentdojo_event_answer() -> str:
    """A real AgentDojo answer: its calendar event model through its own default formatter (YAML, with dates)."""
    from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
    from agentdojo.default_suites.v1.tools.calendar_client import CalendarEvent

    event = CalendarEvent(id_="13", title="Networking Event", location="City Convention Center",
                          description="Industry networking event to meet and connect with professionals. Don't miss "
                                      "this opportunity to expand your professional network!",
                          start_time=datetime.datetime(2024, 5, 26, 17), end_time=datetime.datetime(2024, 5, 26, 19),
                          participants=["emma.johnson@bluesparrowtech.com"], all_day=False, status="confirmed")
    return str(tool_result_to_str([event]))


def test_an_agentdojo_yaml_answer_is_a_list_of_records_written_back_exactly() -> None:
    text = _agentdojo_event_answer()
    value = parse_structured(text)
    assert isinstance(value, list) and value[0]["id_"] == "13"
    assert value[0]["start_time"] == "2024-05-26 17:00:00"  # a date stays the text it is: records are JSON values
    json.dumps(value)
    assert structured_layout(text) == YAML_LAYOUT
    assert dump_layout(value, YAML_LAYOUT) == text
    assert [(key, ident) for key, ident, _ in own_records(value)] == [("id_", "13")]  # `id_` identifies


def test_a_python_literal_answer_round_trips_and_is_never_evaluated() -> None:
    text = str({"Le Marais Boutique": "Rating: 4.2\nReviews: Charming", "rooms": [1, 2]})
    assert parse_structured(text) == {"Le Marais Boutique": "Rating: 4.2\nReviews: Charming", "rooms": [1, 2]}
    assert structured_layout(text) == REPR_LAYOUT
    assert parse_structured("{'a': __import__('os').getcwd()}") is None  # literals only
    assert parse_structured("{'a': 1,  'b': 2}") is None  # not how Python writes it: no layout to answer in


@pytest.mark.parametrize("text", [
    "Error: file not found",  # one `key: value` line is a sentence
    "ValueError: File with ID '26' not found.",
    "You are in the middle of a room.\nLooking around you, you see a cabinet 1: closed.",
    "Hotel Names: Le Marais Boutique\nGood Night\nLuxury Palace",  # YAML would read a dict, the round trip fails
    "- one item\nand then prose: here",
    "",
    "   ",
])
def test_prose_is_not_data(text: str) -> None:
    assert parse_structured(text) is None and structured_layout(text) is None


@pytest.mark.parametrize(("text", "layout"), [
    ('{"a": 1, "b": [1, 2]}', (", ", ": ", False)),
    ('{"a":1,"b":[1,2]}', (",", ":", False)),
    ('{\n  "a": 1\n}', (",\n  ", ": ", False)),
])
def test_json_layouts_are_as_before(text: str, layout: tuple[str, str, bool]) -> None:
    assert structured_layout(text) == layout and dump_layout(parse_structured(text), layout) == text


_keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)
_scalars = st.one_of(st.integers(-10**6, 10**6), st.booleans(), st.none(),
                     st.text(alphabet="abcdefghij klmnop:-,.'\"\n0123456789", max_size=30))
_records = st.dictionaries(_keys, st.one_of(_scalars, st.lists(_scalars, max_size=3)), min_size=1, max_size=5)


@settings(max_examples=100, deadline=None)
@given(value=st.one_of(_records, st.lists(_records, min_size=1, max_size=3)))
def test_whatever_a_layout_writes_reads_back_as_the_same_value(value: object) -> None:
    for layout in (YAML_LAYOUT, REPR_LAYOUT, (", ", ": ", False)):
        text = dump_layout(value, layout)
        if layout == YAML_LAYOUT and "\n" not in text and not text.startswith("- "):
            assert parse_structured(text) is None  # one `key: value` line reads as a sentence, by design
            continue
        assert parse_structured(text) == value
        assert structured_layout(text) is not None
