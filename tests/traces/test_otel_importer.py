"""The OpenTelemetry GenAI importer on spans recorded by the real SDK and encoded as OTLP JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from agent_logs import ANSWER, otlp_document, record_agent_spans
from worldsmith.traces import Episode, Reject, detect_format, read_traces
from worldsmith.traces.importers import OTelSpansImporter
from worldsmith.traces.importers.otlp import decode_attributes, decode_id, decode_value
from worldsmith.workspace import Workspace


@pytest.fixture(scope="module")
def spans() -> dict[str, list[Any]]:
    return {convention: record_agent_spans(convention) for convention in ("genai", "openinference")}


def split(items: list[Any]) -> tuple[dict[str, Episode], list[Reject]]:
    return ({item.id: item for item in items if isinstance(item, Episode)},
            [item for item in items if isinstance(item, Reject)])


@pytest.mark.parametrize("hex_ids", [False, True], ids=["base64-ids", "hex-ids"])
@pytest.mark.parametrize("convention", ["genai", "openinference"])
def test_tool_spans_become_turns_grouped_by_conversation(
    spans: dict[str, list[Any]], tmp_path: Path, convention: str, hex_ids: bool
) -> None:
    document = otlp_document(spans[convention], hex_ids=hex_ids)
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(document, indent=2))
    assert detect_format(path).importer.name == "otel"
    found, rejects = split(list(read_traces([path])))
    assert rejects == []
    assert sorted(found) == ["conv-a", "conv-b"]  # the health-check trace has no GenAI span
    a, b = found["conv-a"], found["conv-b"]
    assert [(t.action.name, t.action.arguments, t.observation.text) for t in a.turns] == [
        ("counter", {"step": 1}, "total=1"), ("counter", {"step": 2}, "total=3")]
    if convention == "genai":
        assert [t.action.call_id for t in a.turns] == ["call_a1", "call_a2"]
    assert a.task == "Add 1 then 2"
    assert [(c.role, c.content) for c in a.turns[0].context] == [("user", "Add 1 then 2"), ("assistant", "calling counter")]
    assert [c.content for c in a.final_context] == [ANSWER] and a.metadata["models"] == ["scripted-model"]
    # conversation b spans two traces: one episode, turns in start order, the failed call kept with its error
    assert len(b.metadata["trace_ids"]) == 2 and b.metadata["conversation_id"] == "conv-b"
    assert [t.observation.text for t in b.turns] == ["total=5", "error: counter overflow"]
    assert b.turns[1].info["error"] == "counter overflow"
    # span links: the turn's span, its parent (the agent span), where it sits in the file
    agent_name = "invoke_agent counter-agent" if convention == "genai" else "agent"
    agent_a = next(s for s in spans[convention] if s.name == agent_name)  # ends first of the agent spans
    link = a.turns[0].info["otel"]
    assert link["parent_name"] == agent_name
    assert link["parent_span_id"] == format(agent_a.context.span_id, "016x")
    assert link["trace_id"] == format(agent_a.context.trace_id, "032x") == a.metadata["trace_ids"][0]
    pointer = a.turns[0].provenance.pointer
    resource, scope, index = (int(part) for part in pointer.split("/")[2::2])
    span = document["resourceSpans"][resource]["scopeSpans"][scope]["spans"][index]
    assert decode_id(span["spanId"], 8, "spanId") == link["span_id"]
    assert a.source.format == "otel" and a.metadata["conventions"] == [
        "gen_ai" if convention == "genai" else "openinference"]


def test_proto_field_names_read_the_same(spans: dict[str, list[Any]], tmp_path: Path) -> None:
    camel, snake = tmp_path / "camel.json", tmp_path / "snake.json"
    camel.write_text(json.dumps(otlp_document(spans["genai"])))
    document = otlp_document(spans["genai"], hex_ids=True, snake_case=True)
    assert "resource_spans" in document and "start_time_unix_nano" in json.dumps(document)
    snake.write_text(json.dumps(document))
    assert detect_format(snake).importer.name == "otel"
    from_camel, _ = split(list(read_traces([camel])))
    from_snake, rejects = split(list(read_traces([snake])))
    assert rejects == [] and sorted(from_snake) == ["conv-a", "conv-b"]
    for key, episode in from_camel.items():
        mine = from_snake[key]
        assert [t.model_dump(exclude={"provenance"}) for t in mine.turns] == [
            t.model_dump(exclude={"provenance"}) for t in episode.turns]
        assert mine.turns[0].provenance.pointer.startswith("/resource_spans/0/scope_spans/0/spans/")


def test_json_lines_of_documents_and_a_malformed_span_are_quarantined(
    spans: dict[str, list[Any]], tmp_path: Path
) -> None:
    recorded = spans["genai"]
    first = otlp_document(recorded[:4], hex_ids=True)
    second = otlp_document(recorded[4:])
    second_spans = second["resourceSpans"][0]["scopeSpans"][0]["spans"]
    second_spans[0]["traceId"] = "not-an-id"
    bad_attribute = next(i for i, s in enumerate(second_spans) if s["name"].startswith("execute_tool"))
    second_spans[bad_attribute]["attributes"].append({"key": "x", "value": {"mysteryValue": 1}})
    path = tmp_path / "spans.otlp.jsonl"
    path.write_text("\n".join([json.dumps(first), "{broken", json.dumps(second)]) + "\n")
    assert detect_format(path).importer.name == "otel"
    report = Workspace(tmp_path / "ws").ingest([path], "spans")
    assert report.files[0].format == "otel" and report.committed
    reasons = {(r["line"], r["pointer"]): r["reason"] for r in report.rejects}
    assert reasons[(2, None)].startswith("invalid JSON")
    assert "traceId 'not-an-id' is neither 32 hex digits nor base64 of 16 bytes" in reasons[
        (3, "/resourceSpans/0/scopeSpans/0/spans/0")]
    assert "attribute 'x': unknown attribute value type ['mysteryValue']" in reasons[
        (3, f"/resourceSpans/0/scopeSpans/0/spans/{bad_attribute}")]
    quarantined = [orjson.loads(line) for line in Path(report.quarantine_path).read_text().splitlines()]
    assert any(q["raw"] and "mysteryValue" in q["raw"] for q in quarantined)
    # conv-a whole from line 1; conv-b keeps the call whose span was readable
    assert (report.episodes, report.turns, report.rejected) == (2, 3, 3)
    assert Workspace(tmp_path / "ws").dataset("spans").stats()["episodes"] == 2


def test_a_tool_span_without_result_is_rejected(spans: dict[str, list[Any]], tmp_path: Path) -> None:
    document = otlp_document(spans["openinference"])
    for resource_spans in document["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                span["attributes"] = [a for a in span.get("attributes", []) if a["key"] != "output.value"]
                span.pop("status", None)
    path = tmp_path / "no-results.json"
    path.write_text(json.dumps(document))
    found, rejects = split(list(OTelSpansImporter().read(path)))
    assert len(rejects) == 4 and all("has no result" in r.reason for r in rejects)
    assert all(r.pointer.startswith("/resourceSpans/") and r.raw for r in rejects)
    assert all(not e.turns for e in found.values())  # ingest reports them as episodes without turns


def test_otlp_decoding_units() -> None:
    assert decode_id("AAECAwQFBgc=", 8, "spanId") == "0001020304050607"
    assert decode_id("0001020304050607", 8, "spanId") == "0001020304050607"
    with pytest.raises(ValueError, match="spanId"):
        decode_id("00010203", 8, "spanId")
    assert decode_attributes([
        {"key": "s", "value": {"stringValue": "x"}}, {"key": "i", "value": {"intValue": "7"}},
        {"key": "d", "value": {"double_value": 0.5}}, {"key": "b", "value": {"boolValue": True}},
        {"key": "l", "value": {"arrayValue": {"values": [{"intValue": "1"}]}}},
        {"key": "m", "value": {"kvlistValue": {"values": [{"key": "k", "value": {"stringValue": "v"}}]}}},
    ]) == {"s": "x", "i": 7, "d": 0.5, "b": True, "l": [1], "m": {"k": "v"}}



@pytest.mark.parametrize(
    ("value", "decoded"),
    [
        ({"string_value": "x"}, "x"),
        ({"bool_value": 1}, True),
        ({"int_value": "-3"}, -3),
        ({"doubleValue": "2.5"}, 2.5),
        ({"array_value": None}, []),
        ({"kvlist_value": {"values": [{"key": "k", "value": {"int_value": 1}}]}}, {"k": 1}),
        ({"bytesValue": "AAE="}, "AAE="),  # base64 text, kept
        ({}, None),  # an empty AnyValue
        ({"intValue": "1", "stringValue": "one"}, "one"),  # kinds are looked for in order, strings first
    ],
)
def test_otlp_value_kinds(value: dict[str, Any], decoded: Any) -> None:
    assert decode_value(value) == decoded


@pytest.mark.parametrize(("value", "message"), [("x", "must be an object"), ({"mapValue": 1}, "unknown attribute")])
def test_otlp_value_errors(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_value(value)

def test_not_an_otlp_document_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"resourceSpans": "nope"}\n')
    _, rejects = split(list(OTelSpansImporter().read(path)))
    assert [r.reason for r in rejects] == ["not an OTLP trace document: expected an object with 'resourceSpans'"]
