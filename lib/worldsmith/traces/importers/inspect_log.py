"""Inspect AI eval logs (`.eval` and `.json`), read with Inspect's own reader (`inspect_ai.log`).

One episode per sample and epoch. Each tool call of an assistant message becomes a turn; its
result is the `tool` message with the same `tool_call_id`. System, user and assistant text
between calls is kept as the turn's context, the text after the last call as the final context.
The sample's scores become the reward (the first scorer's value as a float, Inspect's
`value_to_float`: C=1, P=0.5, I=0) and success (for C/I values), and go with the target,
task, model, eval and run ids to the metadata.

`.eval` logs (zip archives) are read sample by sample, so a sample that cannot be read is
rejected alone (old archives without a sample list are read whole); a `.json` log is read whole
by Inspect, so a broken one fails as a file.
`inspect_ai` is imported only when a log is read: the base install works without it.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from worldsmith.traces.importers.base import ReadItem
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
from worldsmith.traces.report import Reject, TraceFormatError

__all__ = ["InspectLogImporter"]

_MISSING = "reading Inspect AI logs needs the inspect_ai package: pip install 'worldsmith[importers]'"
_ZIP_MAGIC = b"PK\x03\x04"
_UNUSED_FIELDS = {"events"}  # the transcript of model calls and state changes: the messages carry the turns
_BATCH = 64  # samples read per call into Inspect: bounds memory, amortises its per-call event loop
_JSON_LOG = re.compile(r'"eval"\s*:\s*\{')


def _inspect_log() -> Any:
    try:
        import inspect_ai.log as inspect_log
    except ImportError:
        return None
    return inspect_log


class InspectLogImporter:
    name = "inspect"
    description = "Inspect AI eval logs (.eval archives or .json logs): one episode per sample and epoch"

    def sniff_bytes(self, path: Path, head: bytes) -> float:
        """A `.eval` log is a zip archive holding Inspect's header or journal."""
        if not head.startswith(_ZIP_MAGIC):
            return 0.0
        try:
            with zipfile.ZipFile(path) as archive:
                names = set(archive.namelist())
        except (zipfile.BadZipFile, OSError):
            # a cut-off `.eval` archive: claim it, so reading says what is wrong with it
            return 0.5 if path.suffix.lower() == ".eval" else 0.0
        if "header.json" in names or "_journal/start.json" in names:
            return 0.98
        return 0.0

    def sniff(self, path: Path, head: str) -> float:
        if head.lstrip()[:1] != "{":
            return 0.0
        if _JSON_LOG.search(head) and all(f'"{key}"' in head for key in ("version", "status", "run_id", "task")):
            return 0.97
        return 0.0

    def read(self, path: Path) -> Iterator[ReadItem]:
        inspect_log = _inspect_log()
        if inspect_log is None:
            raise TraceFormatError(str(path), _MISSING)
        source = str(path)
        is_eval = read_is_archive(path)
        fmt = "eval" if is_eval else "json"
        log = _read_log(inspect_log, path, header_only=is_eval, fmt=fmt)
        if is_eval and log.eval.dataset.sample_ids is None:  # older logs: no sample list to read by
            log = _read_log(inspect_log, path, header_only=False, fmt=fmt)
            is_eval = False
        if not is_eval:
            for index, sample in enumerate(log.samples or []):
                base = f"/samples/{index}" if fmt == "json" else f"samples/{sample.id}_epoch_{sample.epoch}.json#"
                yield from self._sample_items(path, log, sample, base)
            return
        epochs = log.eval.config.epochs or 1
        wanted = [(sample_id, epoch) for sample_id in log.eval.dataset.sample_ids for epoch in range(1, epochs + 1)]
        for start in range(0, len(wanted), _BATCH):
            for key, sample in _read_samples(inspect_log, path, wanted[start : start + _BATCH]):
                member = f"samples/{key[0]}_epoch_{key[1]}.json"
                if isinstance(sample, Exception):
                    yield Reject(source, f"unreadable sample {key[0]!r} epoch {key[1]}: {type(sample).__name__}: "
                                 f"{sample}", pointer=member, raw=_member_text(path, member))
                    continue
                yield from self._sample_items(path, log, sample, member + "#")

    def _sample_items(self, path: Path, log: Any, sample: Any, base: str) -> Iterator[ReadItem]:
        source = str(path)
        try:
            yield from self._episode(path, log, sample, base)
        except (ValueError, TypeError, AttributeError, KeyError) as error:
            yield Reject(source, f"invalid sample {sample.id!r} epoch {sample.epoch}: {error}", pointer=base,
                         raw=_raw_json(sample))

    def _episode(self, path: Path, log: Any, sample: Any, base: str) -> Iterator[ReadItem]:
        source = str(path)
        pointer = f"{base}/messages"
        calls: list[tuple[int, int, Any, list[ContextEvent]]] = []
        open_calls: dict[str | None, list[int]] = {}  # call id -> its unanswered calls, oldest first
        results: dict[int, Any] = {}
        context: list[ContextEvent] = []
        task: str | None = None
        for position, message in enumerate(sample.messages):
            if message.role == "tool":
                waiting = open_calls.get(message.tool_call_id)
                if waiting:  # ids may be reused: the earliest unanswered call with this id
                    results[waiting.pop(0)] = message
                else:
                    yield Reject(source, f"tool result has no matching call (tool_call_id {message.tool_call_id!r})",
                                 pointer=f"{pointer}/{position}", raw=_raw_json(message))
                continue
            context += _context_events(message)
            if task is None and message.role == "user":
                task = message.text
            for index, call in enumerate(getattr(message, "tool_calls", None) or []):
                open_calls.setdefault(call.id, []).append(len(calls))
                calls.append((position, index, call, context))
                context = []
        turns: list[Turn] = []
        carried: list[ContextEvent] = []
        for number, (position, index, call, call_context) in enumerate(calls):
            where = f"{pointer}/{position}/tool_calls/{index}"
            result = results.get(number)
            if result is None:
                yield Reject(source, f"tool call {call.function!r} has no result (id {call.id!r})", pointer=where,
                             raw=_raw_json(call))
                carried += call_context
                continue
            turns.append(_turn(source, len(turns), call, result, carried + call_context, where))
            carried = []
        yield _sample_episode(self.name, source, log, sample, turns, carried + context, task, base)


def _read_samples(
    inspect_log: Any, path: Path, keys: list[tuple[Any, int]]
) -> Iterator[tuple[tuple[Any, int], Any]]:
    """Samples of an archive, a batch at a time (one event loop and zip directory per batch);
    a batch that fails is read again sample by sample, so a broken sample comes back as its
    exception and a sample that was never run (a cancelled eval) is left out."""
    try:
        samples = inspect_log.read_eval_log_samples_by_id(str(path), keys, resolve_attachments=True, format="eval",
                                                          exclude_fields=_UNUSED_FIELDS)
    except Exception:  # noqa: BLE001 - find the sample that broke the batch, below
        pass
    else:
        yield from zip(keys, samples, strict=True)
        return
    for sample_id, epoch in keys:
        try:
            yield (sample_id, epoch), inspect_log.read_eval_log_sample(
                str(path), id=sample_id, epoch=epoch, resolve_attachments=True, format="eval",
                exclude_fields=_UNUSED_FIELDS)
        except IndexError:
            continue  # not run: nothing to import, nothing lost
        except Exception as error:  # noqa: BLE001 - one broken sample must not stop the rest
            yield (sample_id, epoch), error


def _read_log(inspect_log: Any, path: Path, *, header_only: bool, fmt: str) -> Any:
    try:
        return inspect_log.read_eval_log(str(path), header_only=header_only, format=fmt,
                                         resolve_attachments=not header_only)
    except Exception as error:  # noqa: BLE001 - Inspect raises many kinds on a broken log
        raise TraceFormatError(str(path), f"not a readable Inspect AI log: {type(error).__name__}: {error}") from None


def _context_events(message: Any) -> list[ContextEvent]:
    events = []
    if isinstance(message.content, list):
        for part in message.content:
            if getattr(part, "type", None) == "reasoning" and getattr(part, "reasoning", ""):
                events.append(ContextEvent(role="reasoning", content=part.reasoning))
    if message.text:
        events.append(ContextEvent(role=message.role, content=message.text))
    return events


def _turn(source: str, index: int, call: Any, result: Any, context: list[ContextEvent], pointer: str) -> Turn:
    text = result.text
    info: dict[str, Any] = {}
    if result.error is not None:
        info["error"] = {"type": result.error.type, "message": result.error.message}
        text = text or f"error: {result.error.message}"
    arguments_text = orjson.dumps(call.arguments, option=orjson.OPT_SORT_KEYS).decode()
    action = Action(name=call.function, arguments=call.arguments, call_id=call.id, parse_error=call.parse_error)
    return Turn(
        index=index, action=action, observation=Observation(text=text), info=info, context=context,
        provenance=Provenance(source=source, pointer=pointer,
                              content_hash=content_digest([call.function, arguments_text, text])[:16]),
    )


def _score_outcome(scores: dict[str, Any] | None) -> tuple[float | None, bool | None]:
    """Reward and success from the first scorer (Inspect's own value-to-float mapping)."""
    if not scores:
        return None, None
    from inspect_ai.scorer import CORRECT, INCORRECT, value_to_float

    value = next(iter(scores.values())).value
    if not isinstance(value, (str, int, float, bool)):
        return None, None
    success = True if value in (CORRECT, True) else False if value in (INCORRECT, False) else None
    return value_to_float()(value), success


def _sample_episode(
    fmt: str, source: str, log: Any, sample: Any, turns: list[Turn], final: list[ContextEvent], task: str | None,
    base: str,
) -> Episode:
    spec = log.eval
    reward, success = _score_outcome(sample.scores)
    metadata: dict[str, Any] = {
        "task": spec.task, "model": spec.model, "eval_id": spec.eval_id, "run_id": spec.run_id,
        "sample_id": sample.id, "epoch": sample.epoch, "target": sample.target, "log_status": log.status,
        "scores": {name: score.model_dump(mode="json", exclude_none=True) for name, score in (sample.scores or {}).items()},
    }
    if sample.metadata:
        metadata["sample_metadata"] = sample.metadata
    if sample.error is not None:
        metadata["error"] = sample.error.message
    return Episode(
        id=f"{spec.task}-{sample.id}-e{sample.epoch}-{spec.eval_id[:8]}",
        env_id=spec.task, task=task, task_id=str(sample.id), turns=turns, final_context=final,
        reward=reward, success=success, family=f"{spec.task}-{sample.id}", metadata=metadata,
        source=SourceRef(format=fmt, path=source, pointer=base.rstrip("#") or None),
    )


def _raw_json(value: Any) -> str:
    """A message, call (a dataclass) or sample as JSON text, for the quarantine file."""
    if hasattr(value, "model_dump_json"):
        return value.model_dump_json()
    return orjson.dumps(value, default=lambda o: o.model_dump(mode="json") if hasattr(o, "model_dump") else str(o)).decode()


def read_is_archive(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(4) == _ZIP_MAGIC


def _member_text(path: Path, member: str) -> str | None:
    """The stored JSON of one sample, verbatim, for the quarantine file."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.read(member).decode("utf-8", errors="replace")
    except (KeyError, zipfile.BadZipFile, OSError):
        return None
