"""Around every call: the response cache and the call log, for any backend.

`TrackedLLM` is itself an `LLM`: callers use it exactly like the backend it wraps. In a batch,
cached conversations are answered from the cache and only the misses go to the backend, in one
batched call. Every conversation is logged with the component that asked (`for_component`).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from worldsmith.llm.base import LLM, Completion, GenerationParams, LLMError, Message, check_messages
from worldsmith.llm.cache import ResponseCache, model_identity
from worldsmith.llm.calllog import CallLog, call_log_path
from worldsmith.llm.spec import make_llm, resolve_spec
from worldsmith.util.paths import default_workspace_root

__all__ = ["TrackedLLM", "new_run_id", "open_llm"]


def new_run_id(prefix: str = "run") -> str:
    return f"{prefix}-{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"


class TrackedLLM:
    """An `LLM` that caches responses and logs every call (with the asking component)."""

    def __init__(self, llm: LLM, *, cache: ResponseCache | None = None, log: CallLog | None = None,
                 run: str | None = None, component: str = "default") -> None:
        self.llm = llm
        self.spec = llm.spec
        self.cache = cache
        self.identity = model_identity(llm.spec) if cache is not None else ""  # the weights behind the spec now
        self.log = log
        self.run = run or new_run_id()
        self.component = component
        self.model_calls = 0  # conversations actually sent to the backend (cache misses)

    def for_component(self, component: str) -> TrackedLLM:
        """The same model, cache, log and run, attributed to another component."""
        return TrackedLLM(self.llm, cache=self.cache, log=self.log, run=self.run, component=component)

    def chat(self, messages: Sequence[Message], **params: Any) -> list[Completion]:
        return self.chat_many([messages], **params)[0]

    def chat_many(self, conversations: Sequence[Sequence[Message]], **params: Any) -> list[list[Completion]]:
        generation = GenerationParams(**params)
        checked = [check_messages(messages) for messages in conversations]
        results: list[list[Completion] | None] = [None] * len(checked)
        misses: list[int] = []
        for index, messages in enumerate(checked):
            hit = self.cache.get(self.spec, messages, generation, self.identity) if self.cache else None
            if hit is not None:
                results[index] = hit
            else:
                misses.append(index)
        if misses:
            try:
                fresh = self.llm.chat_many([checked[i] for i in misses], **params)
            except LLMError as error:
                if self.log:
                    for index in misses:
                        self.log.record(run=self.run, component=self.component, spec=self.spec,
                                        messages=checked[index], params=generation,
                                        error=f"{type(error).__name__}: {error}")
                raise
            self.model_calls += len(misses)
            for index, completions in zip(misses, fresh, strict=True):
                results[index] = completions
                if self.cache:
                    self.cache.put(self.spec, checked[index], generation, completions, self.identity)
        if self.log:
            for messages, answered in zip(checked, results, strict=True):
                self.log.record(run=self.run, component=self.component, spec=self.spec, messages=messages,
                                params=generation, completions=answered or [])
        return [answered or [] for answered in results]

    def close(self) -> None:
        self.llm.close()


def open_llm(spec: str, workspace_root: str | Path | None = None, *, component: str = "default",
             run: str | None = None, cache: bool = True, log: bool = True, **options: Any) -> TrackedLLM:
    """A backend from its spec or its `models.toml` name (`resolve_spec`), with the workspace's cache
    (`llm/cache.sqlite`) and call log (`llm/calls.sqlite`)."""
    root = Path(workspace_root) if workspace_root is not None else default_workspace_root()
    return TrackedLLM(
        make_llm(resolve_spec(spec, root), **options),
        cache=ResponseCache(root / "llm" / "cache.sqlite") if cache else None,
        log=CallLog(call_log_path(root)) if log else None,
        run=run, component=component,
    )
