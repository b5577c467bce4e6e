"""Inspect AI eval logs (`.eval` and `.json`), read with Inspect's own reader (`inspect_ai.log`).

One episode per sample and epoch. Each tool call of an assistant message becomes a turn; its
result is the `tool` message with the same `tool_call_id`. System, user and assistant text
between calls is kept as the turn's context, the text after the last call as the final context.
The sample's scores become the reward (the first scorer's value as a float, Inspect's
`value_to_float`: C=1, P=0.5, I=0) and success (for C/I values), and go with the target,
task, model, eval and run ids to the metadata.

`.eval` logs (zip archives) are opened once and read member by member with Python's `zipfile`
under the caps of `traces.limits`: the member count and the decompressed sizes the directory
declares are checked before anything is inflated (zipfile never inflates past a declared size),
a sample over the member cap or nested past the depth cap is rejected alone, unread, and so is
one that does not parse; only a header that cannot be read fails the file. Samples are then
validated by Inspect's own models. A `.json` log is read whole by Inspect, so a broken one fails
as a file. `inspect_ai` is imported only when a log is read: the base install works without it.
"""

from __future__ import annotations

import re
import struct
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from worldsmith.traces.import_report import Reject, TraceFormatError
from worldsmith.traces.importers.base import ReadItem
from worldsmith.traces.limits import ImportLimits, import_limits, truncate_raw
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
from worldsmith.util.json_depth import too_deep

__all__ = ["InspectLogImporter"]

_MISSING = "reading Inspect AI logs needs the inspect_ai package: pip install 'worldsmith[importers]'"
_ZIP_MAGIC = b"PK\x03\x04"
_UNUSED_FIELDS = ("events", "events_data")  # the transcript of model calls and state changes: messages carry turns
_HEADER = "header.json"
_START = "_journal/start.json"
# What zipfile raises on a damaged, lying or unsupported member: each rejects that member alone.
_MEMBER_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError, ValueError)
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
        count = declared_member_count(path)
        if count is not None and count > import_limits().max_members:
            # too many members to list just to sniff: claim a `.eval`, so reading says what is wrong with it
            return 0.5 if path.suffix.lower() == ".eval" else 0.0
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
        if read_is_archive(path):
            yield from self._read_archive(path, import_limits())
            return
        log = _read_log(inspect_log, path, header_only=False, fmt="json")
        for index, sample in enumerate(log.samples or []):
            yield from self._sample_items(path, log, sample, f"/samples/{index}")

    def _read_archive(self, path: Path, limits: ImportLimits) -> Iterator[ReadItem]:
        """An `.eval` archive, opened once: its header, then each sample it lists (every sample member, for old
        logs without a list), each read under the caps and rejected alone when it cannot be taken."""
        count = declared_member_count(path)
        if count is not None and count > limits.max_members:  # refused before its directory is parsed
            raise TraceFormatError(str(path), _too_many(count, limits))
        try:
            archive = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError, ValueError) as error:
            raise TraceFormatError(
                str(path), f"not a readable Inspect AI log: {type(error).__name__}: {error}"
            ) from None
        with archive:
            members = _checked_members(path, archive, limits)
            log = _read_header(path, archive, members, limits)
            for name in _sample_members(log, members):
                sample = _archive_sample(path, archive, members[name], limits)
                if isinstance(sample, Reject):
                    yield sample
                    continue
                yield from self._sample_items(path, log, sample, name + "#")

    def _sample_items(self, path: Path, log: Any, sample: Any, base: str) -> Iterator[ReadItem]:
        source = str(path)
        try:
            yield from self._episode(path, log, sample, base)
        except (ValueError, TypeError, AttributeError, KeyError) as error:
            yield Reject(
                source,
                f"invalid sample {sample.id!r} epoch {sample.epoch}: {error}",
                pointer=base,
                raw=_raw_json(sample, import_limits().max_quarantine_raw),
            )

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
                    yield Reject(
                        source,
                        f"tool result has no matching call (tool_call_id {message.tool_call_id!r})",
                        pointer=f"{pointer}/{position}",
                        raw=_raw_json(message),
                    )
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
                yield Reject(
                    source,
                    f"tool call {call.function!r} has no result (id {call.id!r})",
                    pointer=where,
                    raw=_raw_json(call),
                )
                carried += call_context
                continue
            turns.append(_turn(source, len(turns), call, result, carried + call_context, where))
            carried = []
        yield _sample_episode(self.name, source, log, sample, turns, carried + context, task, base)


def _too_many(count: int, limits: ImportLimits) -> str:
    return f"archive has {count} members, over the cap of {limits.max_members} (WORLDSMITH_IMPORT_MAX_MEMBERS)"


_EOCD, _ZIP64_LOCATOR, _ZIP64_EOCD = b"PK\x05\x06", b"PK\x06\x07", b"PK\x06\x06"


def declared_member_count(path: Path) -> int | None:
    """The member count a zip's end record declares (its zip64 record's, past 65,535), read from the file's tail
    without parsing the central directory (which costs memory per member); None when no end record is found."""
    with open(path, "rb") as handle:
        size = handle.seek(0, 2)
        tail_size = min(size, 22 + 0xFFFF + 20)  # the end record, its longest comment, the zip64 locator
        handle.seek(size - tail_size)
        tail = handle.read(tail_size)
        at = tail.rfind(_EOCD)
        if at < 0 or len(tail) - at < 22:
            return None
        count: int = struct.unpack_from("<H", tail, at + 10)[0]
        if count == 0xFFFF and at >= 20 and tail[at - 20 : at - 16] == _ZIP64_LOCATOR:
            handle.seek(struct.unpack_from("<Q", tail, at - 12)[0])
            record = handle.read(40)
            if len(record) == 40 and record[:4] == _ZIP64_EOCD:
                count = struct.unpack_from("<Q", record, 32)[0]
        return count


def _checked_members(path: Path, archive: zipfile.ZipFile, limits: ImportLimits) -> dict[str, zipfile.ZipInfo]:
    """The archive's members by name (a re-logged member: its last entry, as Inspect reads it), once the member
    count and the declared decompressed total are within the caps; else the file is refused, nothing inflated."""
    infos = archive.infolist()
    if len(infos) > limits.max_members:
        raise TraceFormatError(str(path), _too_many(len(infos), limits))
    total = sum(info.file_size for info in infos)
    if total > limits.max_archive_bytes:
        raise TraceFormatError(
            str(path),
            f"archive declares {total} bytes decompressed, over the cap of "
            f"{limits.max_archive_bytes} (WORLDSMITH_IMPORT_MAX_ARCHIVE_BYTES)",
        )
    return {info.filename: info for info in infos}


class _MemberError(Exception):
    """One member that cannot be taken; the message says why."""


def _member_bytes(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limits: ImportLimits) -> bytes:
    """One member, inflated only when its declared size is within the cap (zipfile stops at that size)."""
    if info.file_size > limits.max_member_bytes:
        raise _MemberError(
            f"{info.file_size} bytes decompressed, over the cap of {limits.max_member_bytes} "
            "(WORLDSMITH_IMPORT_MAX_MEMBER_BYTES); not read"
        )
    try:
        with archive.open(info) as handle:
            return handle.read(limits.max_member_bytes + 1)
    except _MEMBER_ERRORS as error:
        raise _MemberError(f"damaged member: {type(error).__name__}: {error}") from None


def _member_json(data: bytes, limits: ImportLimits) -> Any:
    """A member's bytes parsed as a JSON object within the depth cap (Inspect's unused fields dropped first)."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise _MemberError(f"not JSON: {error}") from None
    if not isinstance(value, dict):
        raise _MemberError(f"expected a JSON object, found {type(value).__name__}")
    for field in _UNUSED_FIELDS:
        value.pop(field, None)
    if too_deep(value, limits.max_json_depth):
        raise _MemberError(f"nested deeper than {limits.max_json_depth} levels (WORLDSMITH_IMPORT_MAX_JSON_DEPTH)")
    return value


def _read_header(
    path: Path, archive: zipfile.ZipFile, members: dict[str, zipfile.ZipInfo], limits: ImportLimits
) -> Any:
    """The log's header (`header.json`, or the journal's start of a log still running) under the caps;
    a header that cannot be taken fails the file, naming the member."""
    from inspect_ai._util.constants import get_deserializing_context
    from inspect_ai.log import EvalLog
    from inspect_ai.log._recorders.eval import LogStart

    name = _HEADER if _HEADER in members else _START if _START in members else None
    if name is None:
        raise TraceFormatError(str(path), f"not a readable Inspect AI log: no {_HEADER} or {_START} member")
    try:
        value = _member_json(_member_bytes(archive, members[name], limits), limits)
        if name == _HEADER:
            return EvalLog.model_validate(value, context=get_deserializing_context())
        start = LogStart.model_validate(value, context=get_deserializing_context())
        return EvalLog(version=start.version, eval=start.eval, plan=start.plan, location=str(path))
    except (_MemberError, ValueError, TypeError) as error:
        raise TraceFormatError(str(path), f"not a readable Inspect AI log: {name}: {error}") from None


def _archive_sample(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, limits: ImportLimits) -> Any:
    """One sample member as Inspect's `EvalSample` (attachments resolved), or the Reject saying why not."""
    from inspect_ai._util.constants import get_deserializing_context
    from inspect_ai.log import EvalSample, resolve_sample_attachments

    member = info.filename
    label = _sample_label(member)
    data = b""
    try:
        data = _member_bytes(archive, info, limits)
        value = _member_json(data, limits)
        sample = EvalSample.model_validate(value, context=get_deserializing_context())
        return resolve_sample_attachments(sample, "full")
    except (_MemberError, ValueError, TypeError, RecursionError) as error:
        reason = str(error) if isinstance(error, _MemberError) else f"{type(error).__name__}: {error}"
        raw, _ = truncate_raw(
            data[: limits.max_quarantine_raw + 1].decode("utf-8", errors="replace") or None, limits.max_quarantine_raw
        )
        return Reject(str(path), f"unreadable sample {label}: {reason}", pointer=member, raw=raw)


_MEMBER_NAME = re.compile(r"samples/(?P<id>.*)_epoch_(?P<epoch>\d+)\.json")


def _sample_members(log: Any, members: dict[str, zipfile.ZipInfo]) -> list[str]:
    """The sample members to read, in the header's order (sample list, then epoch); every sample member for old
    logs without a list. Found from the members, never by enumerating ids x epochs: a header may claim any number
    of epochs, and a sample listed but never run (a cancelled eval) has no member and nothing to import."""
    names = [name for name in members if name.startswith("samples/") and name.endswith(".json")]
    sample_ids = log.eval.dataset.sample_ids
    if sample_ids is None:  # older logs: no sample list to read by
        return names
    epochs = log.eval.config.epochs or 1
    order = {str(sample_id): index for index, sample_id in enumerate(sample_ids)}
    listed: list[tuple[int, int, str]] = []
    for name in names:
        match = _MEMBER_NAME.fullmatch(name)
        if match is None or match.group("id") not in order or len(match.group("epoch")) > 9:
            continue
        epoch = int(match.group("epoch"))
        if 1 <= epoch <= epochs:
            listed.append((order[match.group("id")], epoch, name))
    return [name for _, _, name in sorted(listed)]


def _sample_label(member: str) -> str:
    """`'add' epoch 2` for `samples/add_epoch_2.json` (the member name when it has another shape)."""
    match = _MEMBER_NAME.fullmatch(member)
    return f"{match.group('id')!r} epoch {match.group('epoch')}" if match else repr(member)


def _read_log(inspect_log: Any, path: Path, *, header_only: bool, fmt: str) -> Any:
    try:
        return inspect_log.read_eval_log(
            str(path), header_only=header_only, format=fmt, resolve_attachments=not header_only
        )
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
    depth = import_limits().max_json_depth
    if too_deep(call.arguments, depth):  # a `.json` log is parsed by Inspect: its arguments are measured here
        raise ValueError(
            f"tool call {call.function!r} arguments are nested deeper than {depth} levels "
            "(WORLDSMITH_IMPORT_MAX_JSON_DEPTH)"
        )
    text = result.text
    info: dict[str, Any] = {}
    if result.error is not None:
        info["error"] = {"type": result.error.type, "message": result.error.message}
        text = text or f"error: {result.error.message}"
    arguments_text = orjson.dumps(call.arguments, option=orjson.OPT_SORT_KEYS).decode()
    action = Action(name=call.function, arguments=call.arguments, call_id=call.id, parse_error=call.parse_error)
    return Turn(
        index=index,
        action=action,
        observation=Observation(text=text),
        info=info,
        context=context,
        provenance=Provenance(
            source=source, pointer=pointer, content_hash=content_digest([call.function, arguments_text, text])[:16]
        ),
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
    fmt: str,
    source: str,
    log: Any,
    sample: Any,
    turns: list[Turn],
    final: list[ContextEvent],
    task: str | None,
    base: str,
) -> Episode:
    spec = log.eval
    reward, success = _score_outcome(sample.scores)
    metadata: dict[str, Any] = {
        "task": spec.task,
        "model": spec.model,
        "eval_id": spec.eval_id,
        "run_id": spec.run_id,
        "sample_id": sample.id,
        "epoch": sample.epoch,
        "target": sample.target,
        "log_status": log.status,
        "scores": {
            name: score.model_dump(mode="json", exclude_none=True) for name, score in (sample.scores or {}).items()
        },
    }
    if sample.metadata:
        metadata["sample_metadata"] = sample.metadata
    if sample.error is not None:
        metadata["error"] = sample.error.message
    return Episode(
        id=f"{spec.task}-{sample.id}-e{sample.epoch}-{spec.eval_id[:8]}",
        env_id=spec.task,
        task=task,
        task_id=str(sample.id),
        turns=turns,
        final_context=final,
        reward=reward,
        success=success,
        family=f"{spec.task}-{sample.id}",
        metadata=metadata,
        source=SourceRef(format=fmt, path=source, pointer=base.rstrip("#") or None),
    )


def _raw_json(value: Any, limit: int | None = None) -> str | None:
    """A message, call (a dataclass) or sample as JSON text, for the quarantine file (cut to `limit` characters);
    None when it cannot be written back (nested past what the serialisers take)."""
    try:
        if hasattr(value, "model_dump_json"):
            text = value.model_dump_json()
        else:
            text = orjson.dumps(
                value, default=lambda o: o.model_dump(mode="json") if hasattr(o, "model_dump") else str(o)
            ).decode()
    except (ValueError, TypeError, RecursionError):
        return None
    return truncate_raw(text, limit)[0] if limit is not None else text


def read_is_archive(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(4) == _ZIP_MAGIC
