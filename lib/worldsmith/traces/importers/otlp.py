"""OTLP JSON decoding: `resourceSpans → scopeSpans → spans` documents to plain `Span` records.

OTLP/JSON as the Collector's file exporter writes it uses lowerCamelCase keys, hex ids and
`{"key": ..., "value": {"stringValue": ...}}` attributes; protobuf's own JSON printer (what
`MessageToJson` and some exporters write) gives base64 ids, and int64 values as strings;
snake_case keys appear in exports that keep proto field names. All of these are read.
A span that cannot be decoded raises `ValueError` naming the field, for the importer to reject.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "RESOURCE_SPANS_KEYS", "Span", "SpanProblem", "decode_attributes", "decode_id", "is_otlp_document",
    "iter_document_spans", "iter_resource_spans",
]

RESOURCE_SPANS_KEYS = ("resourceSpans", "resource_spans")
_SCOPE_SPANS_KEYS = ("scopeSpans", "scope_spans", "instrumentationLibrarySpans", "instrumentation_library_spans")
_HEX = re.compile(r"[0-9a-fA-F]+")


@dataclass(slots=True)
class Span:
    """One decoded span; `pointer` says where it sits in its record."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_code: str | None
    status_message: str | None
    events: list[dict[str, Any]]
    resource: dict[str, Any]
    scope: str | None
    line: int
    pointer: str
    raw: dict[str, Any] = field(repr=False)


def _get(value: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if key in value:
            return value[key]
    return None


def is_otlp_document(value: Any) -> bool:
    return isinstance(value, dict) and any(isinstance(value.get(key), list) for key in RESOURCE_SPANS_KEYS)


def decode_id(value: Any, size: int, what: str) -> str:
    """A trace id (16 bytes) or span id (8 bytes) as lowercase hex, from hex or base64 text."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, not {type(value).__name__}")
    if len(value) == 2 * size and _HEX.fullmatch(value):
        return value.lower()
    try:
        decoded = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        decoded = b""
    if len(decoded) != size:
        raise ValueError(f"{what} {value!r} is neither {2 * size} hex digits nor base64 of {size} bytes")
    return decoded.hex()


def _same(raw: Any) -> Any:
    return raw


def _decode_array(raw: Any) -> list[Any]:
    return [decode_value(item) for item in (raw or {}).get("values", [])]


def _decode_kvlist(raw: Any) -> dict[str, Any]:
    return decode_attributes((raw or {}).get("values", []))


# The kinds of an `AnyValue`, in the order they are looked for (`<kind>Value`, then `<kind>_value`).
_VALUE_KINDS: tuple[tuple[str, Callable[[Any], Any]], ...] = (
    ("string", _same),
    ("bool", bool),
    ("int", int),  # int64 arrives as a JSON string
    ("double", float),
    ("array", _decode_array),
    ("kvlist", _decode_kvlist),
    ("bytes", _same),  # base64 text: kept as is
)


def decode_value(value: Any) -> Any:
    """One OTLP `AnyValue` as a plain JSON value."""
    if not isinstance(value, dict):
        raise ValueError(f"attribute value must be an object, not {type(value).__name__}")
    for kind, decode in _VALUE_KINDS:
        for key in (f"{kind}Value", f"{kind}_value"):
            if key in value:
                return decode(value[key])
    if not value:
        return None  # an empty AnyValue
    raise ValueError(f"unknown attribute value type {sorted(value)!r}")


def decode_attributes(items: Any) -> dict[str, Any]:
    """An OTLP `KeyValue` list as a dict; ValueError naming the bad key."""
    if items is None:
        return {}
    if not isinstance(items, list):
        raise ValueError(f"attributes must be a list, not {type(items).__name__}")
    out: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise ValueError("attribute is not an object with a string 'key'")
        try:
            out[item["key"]] = decode_value(item.get("value", {}))
        except (ValueError, TypeError) as error:
            raise ValueError(f"attribute {item['key']!r}: {error}") from None
    return out


def _nanos(value: Any, what: str) -> int:
    if value is None:
        return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be an integer (nanoseconds), not {value!r}") from None


def decode_span(span: Any, resource: dict[str, Any], scope: str | None, line: int, pointer: str) -> Span:
    if not isinstance(span, dict):
        raise ValueError(f"span is a {type(span).__name__}, not an object")
    parent = _get(span, "parentSpanId", "parent_span_id")
    status = _get(span, "status") or {}
    if not isinstance(status, dict):
        raise ValueError("'status' must be an object")
    events = []
    for event in _get(span, "events") or []:
        if isinstance(event, dict):
            events.append({"name": event.get("name"), "attributes": decode_attributes(event.get("attributes"))})
    code = status.get("code")
    return Span(
        trace_id=decode_id(_get(span, "traceId", "trace_id"), 16, "traceId"),
        span_id=decode_id(_get(span, "spanId", "span_id"), 8, "spanId"),
        parent_span_id=decode_id(parent, 8, "parentSpanId") if parent else None,
        name=str(span.get("name") or ""),
        start_ns=_nanos(_get(span, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano"),
        end_ns=_nanos(_get(span, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano"),
        attributes=decode_attributes(span.get("attributes")),
        status_code={2: "STATUS_CODE_ERROR", 1: "STATUS_CODE_OK"}.get(code, code) if code is not None else None,
        status_message=status.get("message") or None,
        events=events,
        resource=resource,
        scope=scope,
        line=line,
        pointer=pointer,
        raw=span,
    )


SpanProblem = tuple[str, str, Any]  # (pointer, reason, raw part)


def iter_document_spans(document: dict[str, Any], line: int) -> Iterator[Span | SpanProblem]:
    """The spans of one OTLP document; an undecodable part comes as (pointer, reason, raw)."""
    key = next(k for k in RESOURCE_SPANS_KEYS if isinstance(document.get(k), list))
    for index, resource_spans in enumerate(document[key]):
        yield from iter_resource_spans(resource_spans, line, f"/{key}/{index}")


def iter_resource_spans(resource_spans: Any, line: int, pointer: str) -> Iterator[Span | SpanProblem]:
    """The spans of one `ResourceSpans` entry (at `pointer`), or the problems found in it."""
    if not isinstance(resource_spans, dict):
        yield pointer, "resource spans entry is not an object", resource_spans
        return
    try:
        resource = decode_attributes((resource_spans.get("resource") or {}).get("attributes"))
    except (ValueError, AttributeError) as error:
        yield f"{pointer}/resource", f"invalid resource: {error}", resource_spans.get("resource")
        resource = {}
    scope_key = next((k for k in _SCOPE_SPANS_KEYS if k in resource_spans), None)
    scopes = resource_spans.get(scope_key) if scope_key else []
    if not isinstance(scopes, list):
        yield f"{pointer}/{scope_key}", "scope spans must be a list", scopes
        return
    for s_index, scope_spans in enumerate(scopes):
        s_pointer = f"{pointer}/{scope_key}/{s_index}"
        if not isinstance(scope_spans, dict) or not isinstance(scope_spans.get("spans", []), list):
            yield s_pointer, "scope spans entry is not an object with a 'spans' list", scope_spans
            continue
        scope = _get(scope_spans, "scope", "instrumentationLibrary", "instrumentation_library") or {}
        scope_name = scope.get("name") if isinstance(scope, dict) else None
        for index, span in enumerate(scope_spans.get("spans", [])):
            span_pointer = f"{s_pointer}/spans/{index}"
            try:
                yield decode_span(span, resource, scope_name, line, span_pointer)
            except (ValueError, TypeError, AttributeError) as error:
                yield span_pointer, f"invalid span: {error}", span
