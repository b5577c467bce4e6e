"""Worldbooks on disk: immutable versions of diffable files, patches that make new versions, rule-level diffs.

    <root>/<name>/HEAD                       the current version id
    <root>/<name>/versions/<version>/        one immutable version:
        manifest.json                        version, parent, created, author, message, content hashes,
                                             build config, sources, validation status
        book.json                            name, env id, action and state schemas, invariants, contracts
        rules.jsonl  notes.jsonl  demonstrations.jsonl  evidence.jsonl     (sorted, one item per line)
        tool_rules.jsonl                     tool-API rules (worldbook.toolrules); only in books that have some

Files are JSON with sorted keys and items in a stable order, so versions diff well in git. A
version is written to a temporary folder and renamed into place, so a reader never sees half
of one. A patch names the version it was made against: if another patch has since changed the
same rules or notes, it is refused with `PatchConflictError` (never a silent overwrite).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import orjson
from filelock import FileLock, Timeout
from pydantic import BaseModel, Field, ValidationError

from worldsmith.util.atomic import atomic_write_bytes
from worldsmith.util.dirs import publish_dir
from worldsmith.util.errors import BadInputError, BusyError, ConflictError, NotFoundError
from worldsmith.util.names import InvalidName, check_name
from worldsmith.util.staging import make_staging, sweep_stale
from worldsmith.workspace.layout import WorkspaceLayout
from worldsmith.workspace.workspace import Workspace
from worldsmith.worldbook.model import Note, Rule, Worldbook
from worldsmith.worldbook.toolrules import ToolRule

__all__ = [
    "Patch",
    "PatchConflictError",
    "PatchOp",
    "VersionInfo",
    "WorldbookError",
    "WorldbookNotFound",
    "WorldbookStore",
    "apply_ops",
    "check_book_name",
    "check_version_id",
    "diff_worldbooks",
    "iter_rule_turns",
]

_LISTS = ("rules", "notes", "demonstrations", "evidence")
_OPTIONAL_LISTS = ("tool_rules",)  # written only when not empty: a version from before them keeps its hashes
_DUMP = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
LOCK_TIMEOUT_S = 120.0  # how long a writer waits for another's save of the same book


class WorldbookError(BadInputError):
    """A worldbook, version or patch is missing or malformed (the message names the file and field)."""


class PatchConflictError(ConflictError, WorldbookError):
    """The patch's base is not the current version and both changed the same items."""


class WorldbookNotFound(NotFoundError, WorldbookError):
    """No worldbook of this name, or no such version of it."""


class PatchOp(BaseModel):
    """One change: to a rule or a note, by id."""

    op: Literal["update_rule", "add_rule", "remove_rule", "add_note", "update_note", "remove_note",
                "update_tool_rule", "add_tool_rule", "remove_tool_rule"]
    id: str
    fields: dict[str, Any] = Field(default_factory=dict, description="For update_*: the fields to set.")
    value: dict[str, Any] | None = Field(default=None, description="For add_*: the whole rule or note.")

    @property
    def target(self) -> tuple[str, str]:
        kind = "tool_rule" if self.op.endswith("tool_rule") else "rule" if self.op.endswith("rule") else "note"
        return (kind, self.id)


class Patch(BaseModel):
    base: str = Field(description="The version this patch was made against.")
    ops: list[PatchOp] = Field(min_length=1)
    author: str = "unknown"
    message: str = ""


class VersionInfo(BaseModel):
    version: str
    parent: str | None
    created: str
    author: str
    message: str
    hashes: dict[str, str]
    build: dict[str, Any] = Field(default_factory=dict)
    sources: list[dict[str, Any]] = Field(default_factory=list)
    validation: dict[str, Any] = Field(default_factory=dict)
    patch: list[dict[str, Any]] = Field(default_factory=list)


def _lines(items: list[BaseModel]) -> bytes:
    return b"".join(orjson.dumps(item.model_dump(mode="json"), option=_DUMP) + b"\n" for item in items)


def _files(book: Worldbook) -> dict[str, bytes]:
    """The bytes of each file of a version (items in canonical order, keys sorted)."""
    book = book.canonical()
    head = book.model_dump(mode="json", exclude={*_LISTS, *_OPTIONAL_LISTS})
    files = {"book.json": orjson.dumps(head, option=_DUMP | orjson.OPT_INDENT_2) + b"\n"}
    files.update({f"{key}.jsonl": _lines(getattr(book, key)) for key in _LISTS})
    files.update({f"{key}.jsonl": _lines(getattr(book, key)) for key in _OPTIONAL_LISTS if getattr(book, key)})
    return files


def check_book_name(name: str) -> str:
    """The name, if it can name a worldbook (a folder); else a WorldbookError saying what is allowed."""
    try:
        return check_name(name, "worldbook")
    except InvalidName as error:
        raise WorldbookError(str(error)) from None


def check_version_id(version: str) -> str:
    """The version id, if it can name a version folder (`v0003-1a2b3c4d5e`: never a path such as `../x`); else a
    WorldbookError saying what is allowed (a `--version` argument is joined into a path)."""
    try:
        return check_name(version, "worldbook version")
    except InvalidName as error:
        raise WorldbookError(str(error)) from None


class WorldbookStore:
    """The worldbooks of a workspace (`<workspace>/worldbooks`)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @classmethod
    def of_workspace(cls, workspace: str | Path | Workspace) -> WorldbookStore:
        """The store of a workspace, given the workspace or its root folder."""
        root = workspace if isinstance(workspace, str | Path) else workspace.root
        return cls(WorkspaceLayout.of(root).books_dir)

    # ------------------------------------------------------------------ listing
    def names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / "HEAD").is_file())

    def _book_dir(self, name: str) -> Path:
        return self.root / check_book_name(name)

    def head(self, name: str) -> str:
        path = self._book_dir(name) / "HEAD"
        if not path.is_file():
            known = ", ".join(self.names()) or "none"
            raise WorldbookNotFound(f"no worldbook {name!r} in {self.root} (worldbooks: {known})")
        return path.read_text(encoding="utf-8").strip()

    def versions(self, name: str) -> list[VersionInfo]:
        """Every version, oldest first."""
        folder = self._book_dir(name) / "versions"
        sweep_stale(folder)
        infos = [self.info(name, p.name) for p in folder.iterdir()
                 if not p.name.startswith(".") and (p / "manifest.json").is_file()] if folder.is_dir() else []
        return sorted(infos, key=lambda info: (info.created, info.version))

    def history(self, name: str, version: str | None = None) -> list[VersionInfo]:
        """The chain from `version` (default: HEAD) back to the first version."""
        chain: list[VersionInfo] = []
        current: str | None = version or self.head(name)
        while current is not None:
            info = self.info(name, current)
            chain.append(info)
            current = info.parent
        return chain

    # ------------------------------------------------------------------ reading
    def info(self, name: str, version: str) -> VersionInfo:
        path = self._book_dir(name) / "versions" / check_version_id(version) / "manifest.json"
        if not path.is_file():
            raise WorldbookNotFound(f"worldbook {name!r} has no version {version!r}")
        try:
            return VersionInfo.model_validate_json(path.read_bytes())
        except ValidationError as error:
            raise WorldbookError(f"{error}", where=str(path)) from None

    def load(self, name: str, version: str | None = None) -> Worldbook:
        version = check_version_id(version or self.head(name))
        folder = self._book_dir(name) / "versions" / version
        info = self.info(name, version)
        try:
            head = orjson.loads((folder / "book.json").read_bytes())
            lists: dict[str, list[Any]] = {}
            for key in (*_LISTS, *(k for k in _OPTIONAL_LISTS if (folder / f"{k}.jsonl").is_file())):
                items = []
                for number, line in enumerate((folder / f"{key}.jsonl").read_bytes().splitlines(), 1):
                    if line.strip():
                        try:
                            items.append(orjson.loads(line))
                        except orjson.JSONDecodeError as error:
                            raise WorldbookError(f"{folder / f'{key}.jsonl'}:{number}: not JSON: {error}") from None
                lists[key] = items
            book = Worldbook.model_validate({**head, **lists})
        except (OSError, orjson.JSONDecodeError) as error:
            raise WorldbookError(f"{error}", where=str(folder)) from None
        except ValidationError as error:
            raise WorldbookError(f"{error}", where=str(folder)) from None
        actual = {file: hashlib.sha256(data).hexdigest() for file, data in _files(book).items()}
        if actual != info.hashes:
            changed = sorted(file for file in actual if actual[file] != info.hashes.get(file))
            raise WorldbookError(f"files changed after the version was written: {', '.join(changed)}",
                                 where=str(folder))
        return book

    # ------------------------------------------------------------------ writing
    def save(self, book: Worldbook, *, parent: str | None = None, author: str = "unknown", message: str = "",
             build: dict[str, Any] | None = None, sources: list[dict[str, Any]] | None = None,
             validation: dict[str, Any] | None = None, patch: list[dict[str, Any]] | None = None) -> VersionInfo:
        """Write `book` as a new immutable version and make it HEAD: under the book's lock, and only when HEAD is
        still `parent` (compare-and-swap: a writer that read an older HEAD gets a `PatchConflictError`, never
        drops the version written meanwhile)."""
        with self._lock(book.name):
            current = self._current_head(book.name)
            if current != parent:
                raise PatchConflictError(
                    f"worldbook {book.name!r} is at {current} now, not at {parent} as this version's parent says: "
                    "it changed meanwhile; reload the current version and redo the change")
            return self._save(book, parent=parent, author=author, message=message, build=build, sources=sources,
                              validation=validation, patch=patch)

    @contextlib.contextmanager
    def _lock(self, name: str) -> Iterator[None]:
        """The book's writer lock (a file lock: threads of the workbench and other processes alike); a `BusyError`
        when another writer holds it for longer than `LOCK_TIMEOUT_S`."""
        folder = self._book_dir(name)
        folder.mkdir(parents=True, exist_ok=True)
        lock = FileLock(folder / ".lock", timeout=LOCK_TIMEOUT_S)
        try:
            lock.acquire()
        except Timeout as error:
            raise BusyError(f"another writer has held worldbook {name!r} for {LOCK_TIMEOUT_S:.0f} s; try again",
                            where=str(folder / ".lock")) from error
        try:
            yield
        finally:
            lock.release()

    def _current_head(self, name: str) -> str | None:
        path = self._book_dir(name) / "HEAD"
        return path.read_text(encoding="utf-8").strip() if path.is_file() else None

    def _save(self, book: Worldbook, *, parent: str | None, author: str, message: str,
              build: dict[str, Any] | None, sources: list[dict[str, Any]] | None,
              validation: dict[str, Any] | None, patch: list[dict[str, Any]] | None) -> VersionInfo:
        """`save` once the lock is held and HEAD checked."""
        folder = self._book_dir(book.name)
        versions = folder / "versions"
        versions.mkdir(parents=True, exist_ok=True)
        files = _files(book)
        hashes = {file: hashlib.sha256(data).hexdigest() for file, data in files.items()}
        digest = hashlib.sha256(orjson.dumps([parent, hashes], option=_DUMP)).hexdigest()[:10]
        count = sum(1 for p in versions.iterdir() if p.is_dir() and not p.name.startswith("."))
        version = f"v{count + 1:04d}-{digest}"
        info = VersionInfo(
            version=version, parent=parent, created=datetime.now(UTC).isoformat(timespec="microseconds"),
            author=author, message=message, hashes=hashes, build=build or {}, sources=sources or [],
            validation=validation or {}, patch=patch or [],
        )
        sweep_stale(versions)  # a killed writer's half-written version
        staging = make_staging(versions)
        try:
            for file, data in files.items():
                (staging / file).write_bytes(data)
            (staging / "manifest.json").write_bytes(
                orjson.dumps(info.model_dump(mode="json"), option=_DUMP | orjson.OPT_INDENT_2) + b"\n"
            )
            for written in staging.iterdir():
                with open(written, "rb") as handle:
                    os.fsync(handle.fileno())
            if not publish_dir(staging, versions / version):
                raise FileExistsError(f"version {version} of {book.name!r} already exists")
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        atomic_write_bytes(folder / "HEAD", version.encode() + b"\n")
        return info

    def patch(self, name: str, patch: Patch) -> VersionInfo:
        """Apply `patch` and save the result as a new version; refuses conflicting concurrent edits. Under the
        book's lock: an edit made on an older HEAD is rebased onto the current one when the items it touches did
        not change since, else refused (`PatchConflictError`); two edits released together never both win."""
        with self._lock(name):
            return self._patch(name, patch)

    def _patch(self, name: str, patch: Patch) -> VersionInfo:
        head = self.head(name)
        base_book = self.load(name, patch.base)
        target_book = base_book
        if patch.base != head:
            head_book = self.load(name, head)
            touched_since = _changed_items(base_book, head_book)
            clashes = sorted({op.target for op in patch.ops} & touched_since)
            if clashes:
                described = ", ".join(f"{kind} {item!r}" for kind, item in clashes)
                raise PatchConflictError(
                    f"worldbook {name!r} changed since {patch.base} (now {head}): {described} "
                    "changed there too; reload the current version and redo the edit"
                )
            target_book = head_book
        try:
            updated = apply_ops(target_book, patch.ops)
        except ValidationError as error:
            raise WorldbookError(f"patch on {name!r}: {error}") from None
        head_info = self.info(name, head)
        return self._save(updated, parent=head, author=patch.author, message=patch.message,
                          patch=[op.model_dump(mode="json") for op in patch.ops],
                          build=head_info.build, sources=head_info.sources, validation=None)

    def undo(self, name: str, *, author: str = "unknown") -> VersionInfo:
        """A new version equal to HEAD's parent (history is never rewritten)."""
        with self._lock(name):
            info = self.info(name, self.head(name))
            if info.parent is None:
                raise WorldbookError(f"worldbook {name!r} is at its first version: nothing to undo")
            book = self.load(name, info.parent)
            return self._save(book, parent=info.version, author=author, message=f"undo {info.version}",
                              build=info.build, sources=info.sources, validation=None, patch=None)


def apply_ops(book: Worldbook, ops: list[PatchOp]) -> Worldbook:
    """The worldbook after `ops` (validated as a whole)."""
    tables: dict[str, tuple[dict[str, Any], type[Rule] | type[Note] | type[ToolRule]]] = {
        "rule": ({rule.id: rule for rule in book.rules}, Rule),
        "note": ({note.id: note for note in book.notes}, Note),
        "tool_rule": ({rule.id: rule for rule in book.tool_rules}, ToolRule)}
    for op in ops:
        table, model = tables[op.target[0]]
        if op.op.startswith("add_"):
            if op.id in table:
                raise WorldbookError(f"{op.op}: {op.id!r} already exists")
            table[op.id] = model.model_validate({**(op.value or {}), "id": op.id})
        elif op.id not in table:
            raise WorldbookError(f"{op.op}: no {op.target[0]} {op.id!r}")
        elif op.op.startswith("remove_"):
            del table[op.id]
        else:
            unknown = set(op.fields) - set(model.model_fields)
            if unknown:
                raise WorldbookError(f"{op.op} {op.id!r}: unknown fields {', '.join(sorted(unknown))}")
            if "id" in op.fields and op.fields["id"] != op.id:
                raise WorldbookError(f"{op.op} {op.id!r}: the id cannot change")
            table[op.id] = model.model_validate({**table[op.id].model_dump(mode="json"), **op.fields})
    return book.model_copy(update={"rules": list(tables["rule"][0].values()), "notes": list(tables["note"][0].values()),
                                   "tool_rules": list(tables["tool_rule"][0].values())})


def _changed_items(before: Worldbook, after: Worldbook) -> set[tuple[str, str]]:
    changed: set[tuple[str, str]] = set()
    for kind, old, new in (("rule", before.rules, after.rules), ("note", before.notes, after.notes),
                           ("tool_rule", before.tool_rules, after.tool_rules)):
        old_map = {item.id: item for item in old}
        new_map = {item.id: item for item in new}
        for item_id in old_map.keys() | new_map.keys():
            if old_map.get(item_id) != new_map.get(item_id):
                changed.add((kind, item_id))
    return changed


def _field_changes(old: BaseModel, new: BaseModel) -> dict[str, dict[str, Any]]:
    a, b = old.model_dump(mode="json"), new.model_dump(mode="json")
    return {key: {"before": a.get(key), "after": b.get(key)} for key in sorted(a.keys() | b.keys())
            if a.get(key) != b.get(key)}


def diff_worldbooks(old: Worldbook, new: Worldbook) -> dict[str, Any]:
    """Rule-level (and note-level) differences: added, removed, changed with per-field before/after."""
    out: dict[str, Any] = {}
    for kind, a_items, b_items in (("rules", old.rules, new.rules), ("notes", old.notes, new.notes),
                                   ("tool_rules", old.tool_rules, new.tool_rules)):
        a_map = {item.id: item for item in a_items}
        b_map = {item.id: item for item in b_items}
        out[kind] = {
            "added": sorted(b_map.keys() - a_map.keys()),
            "removed": sorted(a_map.keys() - b_map.keys()),
            "changed": {item_id: _field_changes(a_map[item_id], b_map[item_id])
                        for item_id in sorted(a_map.keys() & b_map.keys()) if a_map[item_id] != b_map[item_id]},
        }
    for section in ("action_schema", "state_schema", "invariants", "contracts", "termination"):
        if getattr(old, section) != getattr(new, section):
            out.setdefault("sections_changed", []).append(section)
    return out


def iter_rule_turns(book: Worldbook) -> Iterator[tuple[str, str, str]]:
    """(rule id, 'supporting' | 'contradicting', turn id) for every provenance link."""
    for rule in book.rules:
        for turn in rule.provenance.supporting:
            yield rule.id, "supporting", turn
        for turn in rule.provenance.contradicting:
            yield rule.id, "contradicting", turn
