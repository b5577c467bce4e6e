"""Agent logs written by the real tools, for the importer tests: an Inspect AI eval run by
Inspect's scripted mock model, and spans recorded by the real OpenTelemetry SDK and encoded
with the real OTLP encoder (what an OTLP exporter sends), in both GenAI conventions."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

ANSWER = "The total is 3"


# --------------------------------------------------------------------- Inspect AI


def write_inspect_logs(log_dir: Path, formats: tuple[str, ...] = ("eval", "json")) -> dict[str, Path]:
    """Run a two-sample, two-epoch task with a stateful `counter` tool; one log per format.

    The mock model calls `counter(step=1)`, then `counter(step=2)`, then answers; sample `add`
    expects 3 (scored correct), sample `miss` expects 9 (scored incorrect).
    """
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate, system_message, use_tools
    from inspect_ai.tool import tool
    from inspect_ai.util import store

    @tool
    def counter():  # noqa: ANN202 - Inspect's tool factory
        async def execute(step: int) -> str:
            """Add `step` to a running total kept in the sample's store.

            Args:
                step: amount to add
            """
            total = store().get("total", 0) + step
            store().set("total", total)
            return f"total={total}"

        return execute

    def script(messages: list[Any], tools: list[Any], tool_choice: Any, config: Any) -> ModelOutput:
        done = sum(1 for message in messages if message.role == "tool")
        if done < 2:
            output = ModelOutput.for_tool_call("mockllm/model", "counter", {"step": done + 1},
                                               tool_call_id=f"call_{done}")
        else:
            output = ModelOutput.from_content("mockllm/model", ANSWER)
        output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)  # else tiktoken downloads
        return output

    task = Task(
        name="counting",
        dataset=[Sample(input="Add 1 then 2", target="3", id="add", metadata={"level": "easy"}),
                 Sample(input="Count to nine", target="9", id="miss")],
        solver=[system_message("You count with tools."), use_tools(counter()), generate()],
        scorer=includes(), epochs=2,
    )
    written = {}
    for fmt in formats:
        model = get_model("mockllm/model", custom_outputs=script)
        [log] = inspect_eval(task, model=model, log_dir=str(log_dir / fmt), log_format=fmt, display="none")
        assert log.status == "success", log.error
        written[fmt] = Path(log.location)
    return written


# --------------------------------------------------------------------- OpenTelemetry


def record_agent_spans(convention: str) -> list[Any]:
    """A scripted agent loop traced with the real SDK: two conversations, two tool calls each
    (the second conversation spread over two traces), in `genai` or `openinference` attributes."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Status, StatusCode

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "scripted-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.agent_logs")
    genai = convention == "genai"

    def llm(user: str, answer: str, session: str) -> None:
        if genai:
            attributes = {
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "scripted-model",
                "gen_ai.conversation.id": session,
                "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": user}]}]),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]),
            }
        else:
            attributes = {
                "openinference.span.kind": "LLM", "llm.model_name": "scripted-model", "session.id": session,
                "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": user,
                "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": answer,
            }
        with tracer.start_as_current_span("chat scripted-model" if genai else "ChatCompletion", attributes=attributes):
            pass

    def call_tool(name: str, arguments: dict[str, Any], result: str | None, call_id: str, session: str) -> None:
        if genai:
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.call.arguments": json.dumps(arguments), "gen_ai.conversation.id": session,
            }
            if result is not None:
                attributes["gen_ai.tool.call.result"] = result
        else:
            attributes = {
                "openinference.span.kind": "TOOL", "tool.name": name, "session.id": session,
                "tool.parameters": json.dumps({"type": "object", "properties": {"step": {"type": "integer"}}}),
                "input.value": json.dumps(arguments), "input.mime_type": "application/json",
            }
            if result is not None:
                attributes["output.value"] = result
        with tracer.start_as_current_span(f"execute_tool {name}" if genai else name, attributes=attributes) as span:
            if result is None:
                span.set_status(Status(StatusCode.ERROR, "counter overflow"))

    def agent(session: str, root_attributes: dict[str, Any]) -> Any:
        name = "invoke_agent counter-agent" if genai else "agent"
        kind = {"gen_ai.operation.name": "invoke_agent"} if genai else {"openinference.span.kind": "AGENT"}
        return tracer.start_as_current_span(name, attributes={**kind, **root_attributes})

    session_key = "gen_ai.conversation.id" if genai else "session.id"
    with agent("conv-a", {session_key: "conv-a"}):
        llm("Add 1 then 2", "calling counter", "conv-a")
        call_tool("counter", {"step": 1}, "total=1", "call_a1", "conv-a")
        call_tool("counter", {"step": 2}, "total=3", "call_a2", "conv-a")
        llm("Add 1 then 2", ANSWER, "conv-a")
    for step, result in ((5, "total=5"), (99, None)):  # conversation b: one trace per request
        with agent("conv-b", {session_key: "conv-b"}):
            call_tool("counter", {"step": step}, result, f"call_b{step}", "conv-b")
    with tracer.start_as_current_span("GET /health"):  # not a GenAI trace: ignored
        pass
    provider.shutdown()
    return list(exporter.get_finished_spans())


def otlp_document(spans: list[Any], *, hex_ids: bool = False, snake_case: bool = False) -> dict[str, Any]:
    """The OTLP JSON of `spans`, as the real encoder and protobuf's JSON printer write it
    (base64 ids); `hex_ids` rewrites ids to hex as the Collector's file exporter writes them,
    `snake_case` keeps the proto field names (the printer's `preserving_proto_field_name`)."""
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    document = json.loads(MessageToJson(encode_spans(spans), preserving_proto_field_name=snake_case))
    if hex_ids:
        keys = ("trace_id", "span_id", "parent_span_id") if snake_case else ("traceId", "spanId", "parentSpanId")
        for resource_spans in document["resource_spans" if snake_case else "resourceSpans"]:
            for scope_spans in resource_spans["scope_spans" if snake_case else "scopeSpans"]:
                for span in scope_spans["spans"]:
                    for key in keys:
                        if key in span:
                            span[key] = base64.b64decode(span[key]).hex()
    return document
