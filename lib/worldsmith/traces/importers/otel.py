"""OpenTelemetry GenAI spans (OTLP JSON) as episodes: tool spans become turns.

Two conventions are read, span by span:

- OTel GenAI semantic conventions: `execute_tool` spans (`gen_ai.operation.name`) with
  `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.call.arguments`/`.result`; chat spans
  (`gen_ai.input.messages`/`gen_ai.output.messages`) give the conversation context;
  `gen_ai.conversation.id` groups traces into one episode.
- OpenInference (Phoenix, Langfuse exports): `openinference.span.kind` TOOL spans with
  `tool.name`, `input.value` (or `tool.parameters`) and `output.value`; LLM spans give context;
  `session.id` groups traces.

One episode per conversation/session id where any span of a trace has one, else per trace id.
Turns follow span start time; each turn's `info.otel` keeps the span's trace id, span id and
parent span (id and name), its pointer says where the span sits in the file. Spans of an episode
may be spread over the file (or over several JSONL documents), so the spans of GenAI traces are
gathered first and the episodes built at the end.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from worldsmith.traces.actions import parse_arguments
from worldsmith.traces.import_report import Reject
from worldsmith.traces.importers.base import JsonRecord, ReadItem, iter_json_records
from worldsmith.traces.importers.otlp import (
    RESOURCE_SPANS_KEYS,
    Span,
    is_otlp_document,
    iter_document_spans,
    iter_resource_spans,
)
from worldsmith.traces.model import (
    Action,
    ContextEvent,
    Episode,
    Observation,
    Provenance,
    SourceRef,
    Turn,
    content_digest,
)

__all__ = ["OTelSpansImporter"]

_GENAI_TOOL_OPERATIONS = frozenset({"execute_tool"})
_GENAI_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
_GROUP_KEYS = ("gen_ai.conversation.id", "session.id")


def span_role(span: Span) -> str | None:
    """'tool', 'llm' or None (a span of neither convention, or another GenAI operation)."""
    attributes = span.attributes
    operation = attributes.get("gen_ai.operation.name")
    kind = attributes.get("openinference.span.kind")
    if operation in _GENAI_TOOL_OPERATIONS or kind == "TOOL":
        return "tool"
    if operation in _GENAI_LLM_OPERATIONS or kind == "LLM":
        return "llm"
    return None


def _is_genai(span: Span) -> bool:
    return any(key.startswith("gen_ai.") for key in span.attributes) or "openinference.span.kind" in span.attributes


def _text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _json_or_none(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    return value if isinstance(value, (list, dict)) else None


def _genai_message_texts(value: Any, role: str) -> list[str]:
    """Texts of the `role` messages in `gen_ai.input.messages`/`gen_ai.output.messages` (parts format)."""
    messages = _json_or_none(value)
    texts: list[str] = []
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict) or message.get("role") != role:
            continue
        parts = message.get("parts")
        if isinstance(parts, list):
            texts += [p["content"] for p in parts if isinstance(p, dict) and p.get("type") == "text"
                      and isinstance(p.get("content"), str) and p["content"]]
        elif isinstance(message.get("content"), str) and message["content"]:
            texts.append(message["content"])
    return texts


def _openinference_message_texts(attributes: dict[str, Any], prefix: str, role: str) -> list[str]:
    """Texts of `llm.<input|output>_messages.<i>.message.*` attributes with the given role."""
    texts = []
    index = 0
    while f"{prefix}.{index}.message.role" in attributes:
        if attributes[f"{prefix}.{index}.message.role"] == role:
            content = attributes.get(f"{prefix}.{index}.message.content")
            if isinstance(content, str) and content:
                texts.append(content)
        index += 1
    return texts


def llm_texts(span: Span) -> tuple[list[str], list[str]]:
    """(user texts of the input, assistant texts of the output) of an LLM/chat span."""
    attributes = span.attributes
    if "gen_ai.input.messages" in attributes or "gen_ai.output.messages" in attributes:
        return (_genai_message_texts(attributes.get("gen_ai.input.messages"), "user"),
                _genai_message_texts(attributes.get("gen_ai.output.messages"), "assistant"))
    users = _openinference_message_texts(attributes, "llm.input_messages", "user")
    answers = _openinference_message_texts(attributes, "llm.output_messages", "assistant")
    if not answers and isinstance(attributes.get("output.value"), str) and _json_or_none(attributes["output.value"]) is None:
        answers = [attributes["output.value"]]
    return users, answers


@dataclass(slots=True)
class ToolCall:
    """What a tool span says about one call: the action and its result (or why there is none)."""

    action: Action
    arguments_text: str
    result: str | None
    error: str | None


def tool_call(span: Span) -> ToolCall:
    attributes = span.attributes
    if "gen_ai.tool.name" in attributes or attributes.get("gen_ai.operation.name") in _GENAI_TOOL_OPERATIONS:
        name = attributes.get("gen_ai.tool.name") or span.name.removeprefix("execute_tool ").strip()
        call_id = attributes.get("gen_ai.tool.call.id")
        raw_arguments = attributes.get("gen_ai.tool.call.arguments")
        result = attributes.get("gen_ai.tool.call.result")
    else:  # OpenInference
        name = attributes.get("tool.name") or span.name
        call_id = attributes.get("tool_call.id") or attributes.get("tool.id")
        raw_arguments = attributes.get("input.value", attributes.get("tool.parameters"))
        result = attributes.get("output.value")
    if not isinstance(name, str) or not name:
        raise ValueError("tool span has no tool name (gen_ai.tool.name / tool.name)")
    arguments, parse_error = parse_arguments(raw_arguments)
    error = None
    if span.status_code == "STATUS_CODE_ERROR":
        messages = [e["attributes"].get("exception.message") for e in span.events if e["name"] == "exception"]
        error = span.status_message or next((m for m in messages if isinstance(m, str) and m), None) or "error"
    action = Action(
        name=name, arguments=arguments, raw=raw_arguments if isinstance(raw_arguments, str) else None,
        call_id=str(call_id) if call_id not in (None, "") else None, parse_error=parse_error,
    )
    return ToolCall(action, _text(raw_arguments) if raw_arguments is not None else "",
                    None if result is None else _text(result), error)


@dataclass(slots=True)
class _Trace:
    """The GenAI spans of one trace, and its conversation/session id if any span has one."""

    spans: list[Span] = field(default_factory=list)
    group: str | None = None
    genai: bool = False


class OTelSpansImporter:
    name = "otel"
    description = "OpenTelemetry GenAI / OpenInference spans as OTLP JSON (resourceSpans; JSON or JSON Lines)"

    def sniff(self, path: Path, head: str) -> float:
        if head.lstrip()[:1] != "{" or not any(f'"{key}"' in head for key in RESOURCE_SPANS_KEYS):
            return 0.0
        if "gen_ai." in head or "openinference.span.kind" in head:
            return 0.95
        return 0.6

    def read(self, path: Path) -> Iterator[ReadItem]:
        source = str(path)
        traces: dict[str, _Trace] = {}
        names: dict[tuple[str, str], str] = {}
        for item in self._spans(path):
            if isinstance(item, Reject):
                yield item
                continue
            names[(item.trace_id, item.span_id)] = item.name
            trace = traces.setdefault(item.trace_id, _Trace())
            if _is_genai(item):
                trace.genai = True
            if trace.group is None:
                trace.group = next((str(item.attributes[k]) for k in _GROUP_KEYS if item.attributes.get(k)), None)
            role = span_role(item)
            if role is not None:
                if role == "llm":
                    item.raw = {}  # only a tool span can be rejected later: keep no other verbatim span
                trace.spans.append(item)
        groups: dict[str, list[tuple[str, _Trace]]] = {}
        for trace_id, trace in traces.items():
            if trace.genai:
                groups.setdefault(trace.group or trace_id, []).append((trace_id, trace))
        for key, members in groups.items():
            yield from self._episode(source, key, members, names)

    def _spans(self, path: Path) -> Iterator[Span | Reject]:
        source = str(path)
        for record in iter_json_records(path, frozenset(RESOURCE_SPANS_KEYS)):
            if record.error is not None:
                yield record.reject(source)
                continue
            if record.envelope:  # the rest of a document whose resourceSpans streamed out
                continue
            if record.pointer.startswith(tuple(f"/{key}/" for key in RESOURCE_SPANS_KEYS)):
                parts: Iterator[Any] = iter_resource_spans(record.value, record.line, record.pointer)
            elif is_otlp_document(record.value):
                parts = iter_document_spans(record.value, record.line)
            else:
                yield record.reject(source, "not an OTLP trace document: expected an object with 'resourceSpans'")
                continue
            for part in parts:
                if isinstance(part, Span):
                    yield part
                else:
                    yield _reject(source, record, *part)

    def _episode(
        self, source: str, key: str, members: list[tuple[str, _Trace]], names: dict[tuple[str, str], str]
    ) -> Iterator[ReadItem]:
        spans = sorted((s for _, t in members for s in t.spans if span_role(s)), key=lambda s: (s.start_ns, s.end_ns))
        turns: list[Turn] = []
        context: list[ContextEvent] = []
        task: str | None = None
        models: set[str] = set()
        for span in spans:
            if span_role(span) == "llm":
                users, answers = llm_texts(span)
                if task is None and users:
                    task = users[-1]
                    context.append(ContextEvent(role="user", content=task))
                context += [ContextEvent(role="assistant", content=text) for text in answers]
                model = span.attributes.get("gen_ai.request.model") or span.attributes.get("llm.model_name")
                if isinstance(model, str):
                    models.add(model)
                continue
            try:
                call = tool_call(span)
            except ValueError as error:
                yield Reject(source, f"invalid tool span: {error}", line=span.line, pointer=span.pointer,
                             raw=orjson.dumps(span.raw).decode())
                continue
            if call.result is None and call.error is None:
                yield Reject(source, f"tool span {call.action.name!r} has no result (gen_ai.tool.call.result / "
                             "output.value not recorded)", line=span.line, pointer=span.pointer,
                             raw=orjson.dumps(span.raw).decode())
                continue
            info: dict[str, Any] = {"otel": {
                "trace_id": span.trace_id, "span_id": span.span_id, "span_name": span.name,
                "parent_span_id": span.parent_span_id,
                "parent_name": names.get((span.trace_id, span.parent_span_id or "")),
                "start_unix_nano": span.start_ns, "end_unix_nano": span.end_ns,
            }}
            if call.error is not None:
                info["error"] = call.error
            text = call.result if call.result is not None else f"error: {call.error}"
            turns.append(Turn(
                index=len(turns), action=call.action, observation=Observation(text=text), info=info, context=context,
                provenance=Provenance(source=source, line=span.line, pointer=span.pointer,
                                      content_hash=content_digest([call.action.name, call.arguments_text, text])[:16]),
            ))
            context = []
        first = min((s for _, t in members for s in t.spans), key=lambda s: (s.line, s.pointer), default=None)
        resource = first.resource if first else {}
        metadata: dict[str, Any] = {"trace_ids": [trace_id for trace_id, _ in members]}
        if any(t.group for _, t in members):
            metadata["conversation_id"] = key
        if isinstance(resource.get("service.name"), str):
            metadata["service_name"] = resource["service.name"]
        if models:
            metadata["models"] = sorted(models)
        conventions = {"openinference" if "openinference.span.kind" in s.attributes else "gen_ai" for s in spans}
        metadata["conventions"] = sorted(conventions)
        yield Episode(
            id=key, task=task, turns=turns, final_context=context, metadata=metadata,
            source=SourceRef(format=self.name, path=source, line=first.line if first else None,
                             pointer=first.pointer if first else None),
        )


def _reject(source: str, record: JsonRecord, pointer: str, reason: str, raw: Any) -> Reject:
    full = pointer if pointer.startswith(record.pointer) else f"{record.pointer}{pointer}"
    return Reject(source, reason, line=record.line, pointer=full, raw=orjson.dumps(raw).decode())
