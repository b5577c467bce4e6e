"""What a workspace's model layer holds, as the Models page and `worldsmith llm` both show it.

The configured models and the registered backends as rows, one prompt sent the way every call is (cached and
logged through `open_llm`), and the call log with its per-run totals. The page lays these out; the CLI prints them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from worldsmith.llm.base import Completion, Message
from worldsmith.llm.calllog import CallLog, CallRecord, call_log_path
from worldsmith.llm.registry import backends
from worldsmith.llm.spec import ModelSpec
from worldsmith.llm.tracked import open_llm

__all__ = ["Reply", "backend_rows", "call_log_path", "call_prompt", "chat_once", "model_rows", "open_call_log",
           "prompt_messages", "run_rows", "workbench_run_id"]


def model_rows(models: Mapping[str, ModelSpec]) -> list[dict[str, Any]]:
    """One row per configured model (`configured_models`): its name, backend, model, server and options."""
    return [{"name": name, "backend": spec.kind, "model": spec.model, "base_url": spec.base_url,
             "options": ", ".join(f"{key}={value}" for key, value in spec.options.items())}
            for name, spec in models.items()]


def backend_rows() -> list[dict[str, Any]]:
    """One row per registered backend, in registration order: its spec prefix, an example spec, the package it
    needs and whether that package is installed here."""
    return [{"kind": kind, "spec": spec.example, "package": spec.package, "available": spec.available()}
            for kind, spec in backends().items()]


def prompt_messages(prompt: str, system: str | None = None) -> list[Message]:
    """The conversation of one prompt: the system message when there is one (blank is none), then the prompt."""
    messages: list[Message] = [{"role": "system", "content": system}] if system and system.strip() else []
    messages.append({"role": "user", "content": prompt})
    return messages


@dataclass(frozen=True)
class Reply:
    """What one prompt got back, and the run it was logged under."""

    spec: str
    run: str
    model_calls: int  # 0: every completion came from the response cache
    completions: list[Completion]


def chat_once(spec: str, root: str | Path, prompt: str, *, system: str | None = None, component: str = "default",
              run: str | None = None, cache: bool = True, **params: Any) -> Reply:
    """Send one prompt to `spec` (a spec or a models.toml name) through the workspace's cache and call log.

    Raises ValueError (a bad spec) or `LLMError` (the backend failed)."""
    llm = open_llm(spec, root, component=component, run=run, cache=cache)
    try:
        completions = llm.chat(prompt_messages(prompt, system), **params)
    finally:
        llm.close()
    return Reply(spec=spec, run=llm.run, model_calls=llm.model_calls, completions=completions)


def workbench_run_id(now: datetime | None = None) -> str:
    """The run the workbench logs its calls under: one per browser session, named by when it began (UTC)."""
    return f"workbench-{now or datetime.now(UTC):%Y%m%dT%H%M%S}"


def open_call_log(root: str | Path) -> CallLog | None:
    """The workspace's call log; None while no call has been logged (it is not created just to be read)."""
    path = call_log_path(root)
    return CallLog(path) if path.exists() else None


def run_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`CallLog.runs()` as table rows: counts, tokens, rounded latency and cost, the last call's time (UTC)."""
    return [{"run": r["run"], "calls": r["calls"], "cached": r["cache_hits"], "errors": r["errors"],
             "prompt tokens": r["prompt_tokens"], "completion tokens": r["completion_tokens"],
             "latency s": round(r["latency_s"] or 0.0, 2), "cost $": round(r["cost_usd"] or 0.0, 4),
             "last": datetime.fromtimestamp(r["last"], UTC).strftime("%Y-%m-%d %H:%M:%S")} for r in runs]


def call_prompt(call: CallRecord) -> str:
    """The prompt of a logged call: its last message (empty when it had none)."""
    return str(call.messages[-1].get("content", "")) if call.messages else ""
