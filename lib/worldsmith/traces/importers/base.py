"""The `Importer` seam and the streaming readers every JSON-based importer shares.

Readers never load a whole file: JSONL is read line by line, a top-level JSON array element by
element (with `json.JSONDecoder.raw_decode` over a sliding buffer). Each record comes with its
line number and JSON pointer so a reject can say exactly where it was, and with its verbatim
text so the quarantine file can hold it unchanged.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

import orjson
from pydantic import ValidationError

from worldsmith.traces.import_report import Reject, TraceFormatError
from worldsmith.traces.limits import import_limits
from worldsmith.traces.model import Episode
from worldsmith.util.json_depth import too_deep

__all__ = [
    "HEAD_BYTES",
    "Importer",
    "JsonRecord",
    "ReadItem",
    "format_validation_error",
    "iter_json_records",
    "read_head",
    "safe_records",
    "skip_rest_of_line",
    "text_head",
]

HEAD_BYTES = 64 * 1024
_CHUNK_CHARS = 1 << 20
_READ_BUFFER = 1 << 20

ReadItem = Episode | Reject
_Item = TypeVar("_Item")  # what a converter yields besides rejects: episodes, or flat rows (`traces.rows`)


@runtime_checkable
class Importer(Protocol):
    """Reads one trace format. `sniff` scores how likely a file is in this format (0..1) from
    its head; `read` streams episodes and rejects, never raising on bad records."""

    name: str
    description: str

    def sniff(self, path: Path, head: str) -> float: ...

    def read(self, path: Path) -> Iterator[ReadItem]: ...


_MAX_INVALID_SHARE = 0.01  # invalid UTF-8 sequences a text file's head may hold: a stray byte in a record or two


def read_head(path: Path, size: int = HEAD_BYTES) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(size)


def text_head(path: Path, head: bytes) -> str:
    """Decode a file head for sniffing; raise TraceFormatError for empty or binary files."""
    if not head:
        raise TraceFormatError(str(path), "empty file")
    if b"\x00" in head:
        raise TraceFormatError(str(path), "binary file (contains NUL bytes), not a trace")
    # A few bad bytes make a text file with bad lines (each rejected where it is read); many make a binary file.
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text = decoder.decode(head, final=False)
    invalid = text.count("\ufffd") - head.count("\ufffd".encode())
    if invalid >= 2 and invalid > _MAX_INVALID_SHARE * len(head):
        raise TraceFormatError(str(path), f"binary file ({invalid} of the first {len(head)} bytes are not UTF-8)")
    if not text.strip():
        raise TraceFormatError(str(path), "empty file (only whitespace)")
    return text.lstrip("\ufeff")


@dataclass(slots=True)
class JsonRecord:
    """One top-level record of a JSON/JSONL file, or the reason it could not be parsed."""

    line: int
    pointer: str
    raw: str | bytes | None
    value: Any = None
    error: str | None = None
    envelope: bool = False  # the rest of a document whose records were streamed out of it

    def raw_text(self) -> str:
        """The record as it stands in the file (re-serialised only if it was not kept)."""
        if isinstance(self.raw, bytes):
            return self.raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if self.raw is not None:
            return self.raw
        return orjson.dumps(self.value).decode()

    def reject(self, source: str, reason: str | None = None) -> Reject:
        return Reject(
            source=source,
            reason=reason or self.error or "invalid record",
            line=self.line,
            pointer=self.pointer or None,
            raw=self.raw_text(),
        )


def iter_json_records(path: Path, stream_keys: frozenset[str] = frozenset()) -> Iterator[JsonRecord]:
    """Stream the records of a JSONL file, a JSON array file, or a single JSON document.

    In a document that is one object, arrays under `stream_keys` (e.g. `simulations`) stream
    element by element, so a results file of any size is never loaded whole. A record nested
    deeper than `MAX_JSON_DEPTH` (`traces.limits`) comes back as an error: rejected alone.
    """
    limits = import_limits()
    layout = _json_layout(path)
    records = (
        _iter_jsonl(path, limits.max_record_bytes) if layout == "jsonl" else _iter_json_document(path, stream_keys)
    )
    for record in records:
        if record.error is None and too_deep(record.value, limits.max_json_depth):
            record.error = (
                f"nested deeper than {limits.max_json_depth} levels (the import limit WORLDSMITH_IMPORT_MAX_JSON_DEPTH)"
            )
            record.value = None
        yield record


_WS = re.compile(r"\s*")


def _json_layout(path: Path) -> str:
    """'jsonl' or 'document': a file whose first line is a complete JSON value is JSONL."""
    bound = import_limits().max_record_bytes + 1  # an over-long line is looked at, not read whole
    with open(path, "rb") as handle:
        first = handle.readline(bound)
        stripped = first.strip().lstrip(b"\xef\xbb\xbf")
        while not stripped:
            first = handle.readline(bound)
            if not first:
                return "document"
            stripped = first.strip()
        first_value = _parse_or_none(stripped)
        if first_value is not None:
            rest = handle.readline(bound)
            while rest and not rest.strip():
                rest = handle.readline(bound)
            if not rest and isinstance(first_value, list) and not _is_message_list(first_value):
                return "document"  # a whole JSON array on one line: its elements are the records
            return "jsonl"
        if stripped[:1] == b"[":
            return "document"
        # The first line is broken: JSONL with a bad first line, or a pretty-printed document?
        second = handle.readline(bound).strip()
        while not second:
            nxt = handle.readline(bound)
            if not nxt:
                return "document"
            second = nxt.strip()
        return "jsonl" if second[:1] in (b"{", b"[") and _parse_or_none(second) is not None else "document"


def _parse_or_none(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def _is_message_list(value: list[Any]) -> bool:
    return bool(value) and isinstance(value[0], dict) and "role" in value[0]


def _iter_jsonl(path: Path, max_record_bytes: int) -> Iterator[JsonRecord]:
    """Line by line; a line over `max_record_bytes` is skipped unread (streamed past) and rejected alone."""
    with open(path, "rb", buffering=_READ_BUFFER) as handle:  # records of many KB: read in big blocks
        number = 0
        while line := handle.readline(max_record_bytes + 1):
            number += 1
            if number == 1:
                line = line.lstrip(b"\xef\xbb\xbf")
            if len(line) > max_record_bytes and not line.endswith(b"\n"):
                size = len(line) + skip_rest_of_line(handle)
                yield JsonRecord(
                    line=number,
                    pointer="",
                    raw=line[:_RAW_HEAD],
                    error=f"record of {size} bytes is over the {max_record_bytes}-byte limit "
                    "(WORLDSMITH_IMPORT_MAX_RECORD_BYTES)",
                )
                continue
            if not line or line.isspace():  # isspace() scans without copying a long line
                continue
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError:
                try:  # parse again without the line ending to tell a cut-off record apart
                    orjson.loads(line.rstrip(b"\r\n"))
                except orjson.JSONDecodeError as bare:
                    error = bare
                text = str(error)
                kind = (
                    "nested too deeply"
                    if "recursion" in text.lower() or "depth limit" in text.lower()
                    else "truncated JSON"
                    if _looks_truncated(text)
                    else "invalid JSON"
                )
                yield JsonRecord(line=number, pointer="", raw=line, error=f"{kind}: {error}")
                continue
            yield JsonRecord(line=number, pointer="", raw=line, value=value)


_RAW_HEAD = 64 << 10  # what the quarantine keeps of a record too long to read


def skip_rest_of_line(handle: Any) -> int:
    """Read past the rest of an over-long line in bounded blocks; the bytes skipped."""
    skipped = 0
    while chunk := handle.readline(_READ_BUFFER):
        skipped += len(chunk)
        if chunk.endswith(b"\n"):
            break
    return skipped


def _looks_truncated(message: str) -> bool:
    return "unexpected end" in message.lower() or "eof" in message.lower()


class _TextWindow:
    """A sliding window over a UTF-8 text file: refill on demand, drop what was consumed."""

    def __init__(self, path: Path) -> None:
        self._handle = open(path, encoding="utf-8", errors="strict", newline="")
        self.buffer = ""
        self.pos = 0
        self.eof = False
        self.line = 1  # line number at self.pos
        self.max_record = import_limits().max_record_bytes  # characters one value may span (bounds the buffer)

    def close(self) -> None:
        self._handle.close()

    def refill(self, at_least: int = _CHUNK_CHARS) -> bool:
        if self.eof:
            return False
        chunk = self._handle.read(max(at_least, _CHUNK_CHARS))
        if not chunk:
            self.eof = True
            return False
        if self.pos > _CHUNK_CHARS:
            self.buffer = self.buffer[self.pos :]
            self.pos = 0
        self.buffer += chunk
        return True

    def skip_ws(self) -> str:
        """Skip whitespace; return the next character ('' at end of file)."""
        while True:
            match = _WS.match(self.buffer, self.pos)
            end = match.end() if match else self.pos
            self.line += self.buffer.count("\n", self.pos, end)
            self.pos = end
            if self.pos < len(self.buffer):
                return self.buffer[self.pos]
            if not self.refill():
                return ""

    def advance(self, end: int) -> None:
        self.line += self.buffer.count("\n", self.pos, end)
        self.pos = end


def _iter_json_document(path: Path, stream_keys: frozenset[str]) -> Iterator[JsonRecord]:
    window = _TextWindow(path)
    try:
        yield from _walk_document(window, stream_keys)
    except UnicodeDecodeError as error:
        yield JsonRecord(
            line=window.line,
            pointer="",
            raw=None,
            error=f"not UTF-8 text near line {window.line}: {error.reason}; the rest of the file is skipped",
        )
    finally:
        window.close()


class _TooDeep(Exception):
    """A value nested past what the decoder can recurse into; `end` is where it ends (-1: not found)."""

    def __init__(self, end: int) -> None:
        super().__init__(end)
        self.end = end


def _decode_value(window: _TextWindow, decoder: json.JSONDecoder) -> tuple[Any, int] | str:
    """Decode one JSON value at the window position, refilling as needed; error text on failure.
    Raises `_TooDeep` for a value too deep to decode, having found its end, so the caller can skip it."""
    want = _CHUNK_CHARS
    while True:
        try:
            value, end = decoder.raw_decode(window.buffer, window.pos)
            if end < len(window.buffer) or window.eof or not window.refill(want):
                return value, end
            continue  # a bare number may go on past the end of the buffer: decode it again, whole
        except RecursionError:
            raise _TooDeep(_value_end(window)) from None
        except json.JSONDecodeError as error:
            if not window.refill(want):
                at_end = error.pos >= len(window.buffer.rstrip()) - 1 or error.msg.startswith("Unterminated")
                kind = "truncated JSON (the file ends inside this value)" if at_end else "invalid JSON"
                lines_before_pos = window.buffer.count("\n", 0, window.pos)
                line = window.line - lines_before_pos + error.lineno - 1
                return f"{kind}: {error.msg} (line {line}, column {error.colno})"
            if len(window.buffer) - window.pos > window.max_record:
                return (
                    f"a value over the {window.max_record}-character limit (WORLDSMITH_IMPORT_MAX_RECORD_BYTES) "
                    f"starts near line {window.line}; the rest of the file is skipped"
                )
            want = max(want * 2, len(window.buffer))


def _decode_or_error(window: _TextWindow, decoder: json.JSONDecoder) -> tuple[Any, int] | str:
    """`_decode_value` where a too-deep value cannot be skipped: it ends the walk with an error."""
    try:
        return _decode_value(window, decoder)
    except _TooDeep:
        return f"invalid JSON: nested too deeply near line {window.line}"


_STRUCTURE = re.compile(r'[\[\]{}"]')
_STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.S)


def _value_end(window: _TextWindow) -> int:
    """The end of the array or object at the window position (brackets counted, strings skipped), refilling the
    window as needed; -1 when the file ends first or the value runs past the record cap. Linear: used to skip a
    value too deep to decode."""
    depth = 0
    offset = 0  # from window.pos, which a refill may move

    def more() -> bool:  # doubling what is held, so a long string is rescanned a logarithmic number of times
        held = len(window.buffer) - window.pos
        return held <= window.max_record and window.refill(max(_CHUNK_CHARS, held))

    while True:
        at = window.pos + offset
        found = _STRUCTURE.search(window.buffer, at)
        if found is not None and found.group() == '"':
            rest = _STRING_REST.match(window.buffer, found.end())
            if rest is None:  # the string goes on past the buffer: read more and look again
                if not more():
                    return -1
                continue
            offset = rest.end() - window.pos
            continue
        if found is None:
            offset = len(window.buffer) - window.pos
            if not more():
                return -1
            continue
        depth += 1 if found.group() in "[{" else -1
        offset = found.end() - window.pos
        if depth == 0:
            return found.end()


def _walk_document(window: _TextWindow, stream_keys: frozenset[str]) -> Iterator[JsonRecord]:
    decoder = json.JSONDecoder()
    first = window.skip_ws()
    if first == "\ufeff":
        window.advance(window.pos + 1)
        first = window.skip_ws()
    if first == "[":
        complete = yield from _walk_array(window, decoder, "")
    elif first == "{" and stream_keys:
        complete = yield from _walk_object(window, decoder, stream_keys)
    else:
        start_line = window.line
        result = _decode_or_error(window, decoder)
        if isinstance(result, str):
            yield JsonRecord(line=start_line, pointer="", raw=_tail(window), error=result)
            return
        value, end = result
        raw = window.buffer[window.pos : end]
        window.advance(end)
        yield JsonRecord(line=start_line, pointer="", raw=raw, value=value)
        complete = True
    if complete and window.skip_ws():
        yield JsonRecord(line=window.line, pointer="", raw=_tail(window), error="extra data after the JSON document")


def _walk_array(window: _TextWindow, decoder: json.JSONDecoder, prefix: str) -> Generator[JsonRecord, None, bool]:
    """Yield each element of the array at the window as a record; return False if it broke off."""
    window.advance(window.pos + 1)
    index = 0
    if window.skip_ws() == "]":
        window.advance(window.pos + 1)
        return True
    while True:
        if window.skip_ws() == "":
            yield JsonRecord(
                line=window.line, pointer=f"{prefix}/{index}", raw="", error="truncated JSON array: missing ']'"
            )
            return False
        start_line = window.line
        try:
            result = _decode_value(window, decoder)
        except _TooDeep as deep:
            if deep.end < 0:
                yield JsonRecord(
                    line=start_line,
                    pointer=f"{prefix}/{index}",
                    raw=_tail(window),
                    error="invalid JSON: nested too deeply, and the value never ends",
                )
                return False
            yield JsonRecord(
                line=start_line,
                pointer=f"{prefix}/{index}",
                raw=window.buffer[window.pos : deep.end],
                error="nested too deeply to read",
            )
            window.advance(deep.end)
            result = None
        if isinstance(result, str):
            yield JsonRecord(line=start_line, pointer=f"{prefix}/{index}", raw=_tail(window), error=result)
            return False
        if result is not None:
            value, end = result
            raw = window.buffer[window.pos : end]
            window.advance(end)
            yield JsonRecord(line=start_line, pointer=f"{prefix}/{index}", raw=raw, value=value)
        index += 1
        separator = window.skip_ws()
        if separator == ",":
            window.advance(window.pos + 1)
            continue
        if separator == "]":
            window.advance(window.pos + 1)
            return True
        if separator == "":
            yield JsonRecord(
                line=window.line, pointer=f"{prefix}/{index}", raw="", error="truncated JSON array: missing ']'"
            )
            return False
        yield JsonRecord(
            line=window.line,
            pointer=f"{prefix}/{index}",
            raw=_tail(window),
            error=f"invalid JSON array: expected ',' or ']' but found {separator!r}; the rest of the file is skipped",
        )
        return False


def _walk_object(
    window: _TextWindow, decoder: json.JSONDecoder, stream_keys: frozenset[str]
) -> Generator[JsonRecord, None, bool]:
    """A top-level object: arrays under `stream_keys` stream element by element (pointer
    `/<key>/<i>`); the other members form one last record marked `envelope` (or the whole
    document, when nothing was streamed)."""
    start_line = window.line
    window.advance(window.pos + 1)
    members: dict[str, Any] = {}
    streamed = False
    while True:
        char = window.skip_ws()
        if char == "}":
            window.advance(window.pos + 1)
            break
        if char != '"':
            yield JsonRecord(
                line=window.line,
                pointer="",
                raw=_tail(window),
                error=f"invalid JSON object: expected a key but found {char!r}",
            )
            return False
        key_result = _decode_or_error(window, decoder)
        if isinstance(key_result, str):
            yield JsonRecord(line=window.line, pointer="", raw=_tail(window), error=key_result)
            return False
        key, end = key_result
        window.advance(end)
        if window.skip_ws() != ":":
            yield JsonRecord(line=window.line, pointer="", raw=_tail(window), error="invalid JSON object: expected ':'")
            return False
        window.advance(window.pos + 1)
        if key in stream_keys and window.skip_ws() == "[":
            streamed = True
            if not (yield from _walk_array(window, decoder, f"/{_pointer_token(key)}")):
                return False
        else:
            window.skip_ws()
            value_line = window.line
            result = _decode_or_error(window, decoder)
            if isinstance(result, str):
                yield JsonRecord(line=value_line, pointer=f"/{_pointer_token(key)}", raw=_tail(window), error=result)
                return False
            members[key], end = result
            window.advance(end)
        separator = window.skip_ws()
        if separator == ",":
            window.advance(window.pos + 1)
        elif separator != "}":
            yield JsonRecord(
                line=window.line,
                pointer="",
                raw=_tail(window),
                error="invalid JSON object: expected ',' or '}'" if separator else "truncated JSON object: missing '}'",
            )
            return False
    yield JsonRecord(line=start_line, pointer="", raw=None, value=members, envelope=streamed)
    return True


def _pointer_token(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


_TAIL_LIMIT = 64 << 20


def _tail(window: _TextWindow) -> str:
    """The unparseable rest of the file, verbatim (capped so quarantine stays bounded)."""
    while len(window.buffer) - window.pos < _TAIL_LIMIT and window.refill():
        pass
    return window.buffer[window.pos : window.pos + _TAIL_LIMIT]


def format_validation_error(error: ValidationError) -> str:
    """One line per problem, each naming the field path."""
    problems = []
    for item in error.errors()[:5]:
        where = ".".join(str(part) for part in item["loc"]) or "(record)"
        problems.append(f"{where}: {item['msg']}")
    more = error.error_count() - len(problems)
    if more > 0:
        problems.append(f"... and {more} more")
    return "; ".join(problems)


def safe_records(
    path: Path,
    convert: Callable[[JsonRecord], Iterator[_Item]],
    records: Iterable[JsonRecord] | None = None,
) -> Iterator[_Item | Reject]:
    """Run `convert` on every record; parse errors and conversion failures become rejects."""
    source = str(path)
    for record in records if records is not None else iter_json_records(path):
        if record.error is not None:
            yield record.reject(source)
            continue
        try:
            yield from convert(record)
        except ValidationError as error:
            yield record.reject(source, f"invalid record: {format_validation_error(error)}")
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            yield record.reject(source, f"invalid record: {error}")
