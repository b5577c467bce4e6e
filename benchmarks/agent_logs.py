"""Import throughput of the `otel` and `inspect` importers on logs written by the real tools.

    python benchmarks/agent_logs.py [--conversations 2000] [--samples 200] [--calls 10] [--repeats 3]
                                    [--out benchmarks/results/agent_logs.json]

OTel: `--conversations` traces (agent span, chat span, `--calls` execute_tool spans, chat span),
recorded with the OpenTelemetry SDK and written as OTLP JSON Lines (one ExportTraceServiceRequest
of 1,000 spans per line, the real OTLP encoder + protobuf's JSON printer), once per convention.
Inspect: one eval of `--samples` samples whose scripted mock model makes `--calls` tool calls each,
written as `.eval` and `.json`. Each repeat ingests one file into a fresh workspace in a child
process; prints and writes the median turns/s (wall clock and per CPU-second, which other tenants
of a shared machine disturb less) and the peak RSS of the child.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_CHILD = r"""
import json, re, sys, time
from pathlib import Path
from worldsmith.workspace import Workspace
started, cpu = time.perf_counter(), time.process_time()
report = Workspace(sys.argv[2]).ingest([sys.argv[1]], "bench")
seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
# VmHWM, not ru_maxrss: on Linux a child's ru_maxrss starts at its parent's peak (fork), VmHWM at exec
peak_kb = int(re.search(r"VmHWM:\s+(\d+)", Path("/proc/self/status").read_text()).group(1))
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds, "episodes": report.episodes, "turns": report.turns,
                  "rejected": report.rejected, "peak_rss_mb": peak_kb / 1024}))
"""


def write_otel(path: Path, convention: str, conversations: int, calls: int) -> int:
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("benchmark")
    genai = convention == "genai"
    lines = 0
    with open(path, "w", encoding="utf-8") as handle:
        def flush(force: bool = False) -> None:
            nonlocal lines
            spans = exporter.get_finished_spans()
            if spans and (force or len(spans) >= 1000):
                handle.write(MessageToJson(encode_spans(spans), indent=None) + "\n")
                exporter.clear()
                lines += 1

        for index in range(conversations):
            session = f"conv-{index}"
            with tracer.start_as_current_span("invoke_agent" if genai else "agent"):
                for step in range(calls + 2):
                    if step in (0, calls + 1):
                        attributes: dict[str, Any] = (
                            {"gen_ai.operation.name": "chat", "gen_ai.conversation.id": session,
                             "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                                 {"type": "text", "content": f"step {step} of {session}"}]}])}
                            if genai else
                            {"openinference.span.kind": "LLM", "session.id": session,
                             "llm.output_messages.0.message.role": "assistant",
                             "llm.output_messages.0.message.content": f"step {step} of {session}"})
                        name = "chat"
                    else:
                        arguments = json.dumps({"user_id": f"user_{index}", "step": step})
                        result = json.dumps({"status": "ok", "total": index * step, "items": list(range(step))})
                        attributes = (
                            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                             "gen_ai.tool.call.id": f"call_{index}_{step}", "gen_ai.conversation.id": session,
                             "gen_ai.tool.call.arguments": arguments, "gen_ai.tool.call.result": result}
                            if genai else
                            {"openinference.span.kind": "TOOL", "tool.name": "lookup", "session.id": session,
                             "input.value": arguments, "output.value": result})
                        name = "execute_tool lookup"
                    with tracer.start_as_current_span(name, attributes=attributes):
                        pass
            flush()
        flush(force=True)
    provider.shutdown()
    return lines


def write_inspect(folder: Path, samples: int, calls: int) -> dict[str, Path]:
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate, use_tools
    from inspect_ai.tool import tool

    @tool
    def lookup():  # noqa: ANN202 - Inspect's tool factory
        async def execute(step: int) -> str:
            """Look something up.

            Args:
                step: which step
            """
            return json.dumps({"status": "ok", "step": step, "items": list(range(step))})

        return execute

    def script(messages: list[Any], tools: list[Any], tool_choice: Any, config: Any) -> ModelOutput:
        done = sum(1 for message in messages if message.role == "tool")
        output = (ModelOutput.for_tool_call("mockllm/model", "lookup", {"step": done + 1}, tool_call_id=f"c{done}")
                  if done < calls else ModelOutput.from_content("mockllm/model", "done"))
        output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
        return output

    task = Task(name="bench", dataset=[Sample(input=f"task {i}", target="done", id=i) for i in range(samples)],
                solver=[use_tools(lookup()), generate()], scorer=includes())
    out = {}
    for fmt in ("eval", "json"):
        [log] = inspect_eval(task, model=get_model("mockllm/model", custom_outputs=script),
                             log_dir=str(folder / fmt), log_format=fmt, display="none", max_samples=50)
        out[fmt] = Path(log.location)
    return out


def ingest_in_child(path: Path, scratch: Path, repeat: int) -> dict[str, Any]:
    workspace = scratch / f"ws-{path.stem}-{repeat}"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(workspace)], capture_output=True,
                            text=True, env=env, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=2000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/agent_logs.json"))
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        files = {f"otel-{c}": scratch / f"{c}.otlp.jsonl" for c in ("genai", "openinference")}
        for name, path in files.items():
            write_otel(path, name.removeprefix("otel-"), args.conversations, args.calls)
        for fmt, path in write_inspect(scratch / "inspect", args.samples, args.calls).items():
            files[f"inspect-{fmt}"] = path
        for name, path in files.items():
            runs = [ingest_in_child(path, scratch, repeat) for repeat in range(args.repeats)]
            rates = [run["turns"] / run["seconds"] for run in runs]
            cpu_rates = [run["turns"] / run["cpu_seconds"] for run in runs]
            results[name] = {
                "bytes": path.stat().st_size, "episodes": runs[0]["episodes"], "turns": runs[0]["turns"],
                "rejected": runs[0]["rejected"], "turns_per_s": [round(rate) for rate in rates],
                "median_turns_per_s": round(statistics.median(rates)),
                "median_turns_per_cpu_s": round(statistics.median(cpu_rates)),
                "peak_rss_mb": round(max(run["peak_rss_mb"] for run in runs)),
            }
            print(f"{name:22s} {results[name]['turns']:7d} turns  {path.stat().st_size / 1e6:7.1f} MB  "
                  f"median {results[name]['median_turns_per_s']:6d} turns/s "
                  f"({results[name]['median_turns_per_cpu_s']:6d} per CPU-s)  peak RSS {results[name]['peak_rss_mb']} MB")
    document = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "machine": platform.platform(),
                "python": platform.python_version(), "cpus": os.cpu_count(), "args": {k: str(v) for k, v in vars(args).items()},
                "results": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()
