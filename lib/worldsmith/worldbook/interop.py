"""Worldbooks to and from a Trace2Env package, the directory layout the Trace2Env tool reads and writes.

    manifest.json                   {"format": "trace2env", "format_version": 1, "name", "env_id", "counts", ...}
    action_schema.json              {"actions": [ActionSpec, ...]}
    state_schema.json               {"paths": [StatePath, ...]}
    rules/index.jsonl               one Rule per line: the supported (executable) rules
    candidates/rules.jsonl          one Rule per line: tentative, conflicted and deprecated rules
    invariants.json                 {"invariants": [Invariant, ...]}
    renderer/contracts.json         {"contracts": [ObservationContract, ...]}
    demonstrations/transitions.jsonl  one Demonstration per line
    knowledge/notes.jsonl           one Note per line
    evidence/transitions.jsonl      one Evidence per line (ours, beyond the layout; optional on import)

Each item is the JSON of our pydantic model, so an export followed by an import gives back the
same worldbook. No real Trace2Env package was available to check against, so the importer is
tolerant: it accepts obvious alternate field names (`rule_id`, `observation_template`,
`preconditions`, ...), plain lists where we write an object, and drops fields it does not know
(listing them in `ignored` when asked) instead of failing; a rule with no status is supported
in `rules/index.jsonl` and tentative in `candidates/rules.jsonl`. Bad JSON or an invalid item is
an error naming the file, the line (or item) and the field.
"""

from __future__ import annotations

import os
import types
import typing
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from worldsmith.util.dirs import replacing_dir
from worldsmith.worldbook.model import (
    ActionSchema,
    ActionSpec,
    ArgumentSpec,
    Condition,
    Demonstration,
    Effect,
    Evidence,
    Invariant,
    Note,
    ObservationContract,
    Rule,
    RuleProvenance,
    RuleStatus,
    StatePath,
    StateSchema,
    Worldbook,
)
from worldsmith.worldbook.store import VersionInfo, WorldbookError, WorldbookStore

__all__ = ["TRACE2ENV_FILES", "Trace2EnvError", "export_trace2env", "export_version", "import_into_store",
           "import_trace2env"]

FORMAT = "trace2env"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
ACTION_SCHEMA = "action_schema.json"
STATE_SCHEMA = "state_schema.json"
RULES = "rules/index.jsonl"
CANDIDATES = "candidates/rules.jsonl"
INVARIANTS = "invariants.json"
CONTRACTS = "renderer/contracts.json"
DEMONSTRATIONS = "demonstrations/transitions.jsonl"
NOTES = "knowledge/notes.jsonl"
EVIDENCE = "evidence/transitions.jsonl"
TRACE2ENV_FILES = (MANIFEST, ACTION_SCHEMA, STATE_SCHEMA, RULES, CANDIDATES, INVARIANTS, CONTRACTS,
                   DEMONSTRATIONS, NOTES, EVIDENCE)
"""Every file an export writes (the last, evidence, is ours: importers treat it as optional)."""

_DUMP = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS

# Alternate field name -> ours, per model; used only when our name is absent from the item.
_ALTERNATES: dict[type[BaseModel], dict[str, str]] = {
    Rule: {"rule_id": "id", "observation_template": "template", "preconditions": "conditions",
           "action_name": "action", "rule_status": "status"},
    Condition: {"argument": "arg", "operator": "op"},
    Effect: {"operation": "op", "operator": "op"},
    ActionSpec: {"args": "arguments", "parameters": "arguments", "regex": "pattern"},
    ArgumentSpec: {"arg_type": "type"},
    StatePath: {"name": "path"},
    Invariant: {"invariant_id": "id", "text": "description", "preconditions": "conditions"},
    ObservationContract: {"observation_template": "template", "action_name": "action"},
    Note: {"note_id": "id", "content": "text", "body": "text", "evidence": "provenance"},
    Demonstration: {"observation_text": "observation", "action_raw": "action_text", "action_name": "action"},
    Evidence: {"args": "arguments", "observation_text": "observation", "action_raw": "action_text",
               "action_name": "action"},
}


class Trace2EnvError(WorldbookError):
    """A package cannot be read or written (the message names the file, line or item, and field)."""


# ---------------------------------------------------------------------------------------------- export
def _package_files(book: Worldbook, manifest: dict[str, Any] | None) -> dict[str, bytes]:
    """The bytes of every file of the package (items in canonical order, keys sorted)."""
    book = book.canonical()

    def lines(items: list[Rule] | list[Demonstration] | list[Note] | list[Evidence]) -> bytes:
        return b"".join(orjson.dumps(item.model_dump(mode="json"), option=_DUMP) + b"\n" for item in items)

    def document(value: Any) -> bytes:
        return orjson.dumps(value, option=_DUMP | orjson.OPT_INDENT_2) + b"\n"

    supported = [rule for rule in book.rules if rule.status == RuleStatus.SUPPORTED]
    candidates = [rule for rule in book.rules if rule.status != RuleStatus.SUPPORTED]
    ours = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "name": book.name, "env_id": book.env_id,
        "counts": {"actions": len(book.action_schema.actions), "state_paths": len(book.state_schema.paths),
                   "rules": len(supported), "candidates": len(candidates), "invariants": len(book.invariants),
                   "contracts": len(book.contracts), "demonstrations": len(book.demonstrations),
                   "notes": len(book.notes), "evidence": len(book.evidence)},
        "files": list(TRACE2ENV_FILES),
    }
    try:
        manifest_bytes = document({**(manifest or {}), **ours})
    except TypeError as error:
        raise Trace2EnvError(f"manifest: a value is not JSON: {error}") from None
    return {
        MANIFEST: manifest_bytes,
        ACTION_SCHEMA: document(book.action_schema.model_dump(mode="json")),
        STATE_SCHEMA: document(book.state_schema.model_dump(mode="json")),
        RULES: lines(supported),
        CANDIDATES: lines(candidates),
        INVARIANTS: document({"invariants": [item.model_dump(mode="json") for item in book.invariants]}),
        CONTRACTS: document({"contracts": [item.model_dump(mode="json") for item in book.contracts]}),
        DEMONSTRATIONS: lines(book.demonstrations),
        NOTES: lines(book.notes),
        EVIDENCE: lines(book.evidence),
    }


def export_trace2env(book: Worldbook, out_dir: str | Path, *, manifest: dict[str, Any] | None = None,
                     overwrite: bool = False) -> Path:
    """Write `book` as a Trace2Env package at `out_dir` and return its path.

    Written to a temporary folder beside `out_dir` and renamed into place, so a reader sees the
    old package or the new one, never half of one. `manifest` adds fields to manifest.json (ours
    win on a clash). A non-empty `out_dir` is refused unless `overwrite`.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise Trace2EnvError("exists and is not a folder", where=str(out))
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise Trace2EnvError("folder is not empty (pass overwrite=True / --overwrite to replace it)", where=str(out))
    files = _package_files(book, manifest)
    with replacing_dir(out, "export") as staging:
        for relative, data in files.items():
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
    return out


# ---------------------------------------------------------------------------------------------- import
def _nested_model(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """(the model inside a field's annotation, whether the field is a list of it)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _nested_model(arg)
            if found[0] is not None:
                return found
        return None, False
    if origin is list:
        args = typing.get_args(annotation)
        inner, _ = _nested_model(args[0]) if args else (None, False)
        return inner, inner is not None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    return None, False


def _shape(model: type[BaseModel], value: Any) -> Any:
    """Obvious alternate shapes turned into ours (a string for a model with one required text field, ...)."""
    if model is ArgumentSpec and isinstance(value, str):
        return {"name": value}
    if model is StatePath and isinstance(value, str):
        return {"path": value}
    if model is RuleProvenance and isinstance(value, list):
        return {"supporting": value}
    return value


def _normalize(model: type[BaseModel], value: Any, where: str, ignored: list[str]) -> Any:
    """`value` with alternate names mapped to ours and unknown fields dropped, at every level of `model`."""
    value = _shape(model, value)
    if not isinstance(value, dict):
        return value  # validation names the field and says what it should be
    out: dict[str, Any] = {}
    alternates = _ALTERNATES.get(model, {})
    for key, item in value.items():
        name = key if key in model.model_fields else alternates.get(key)
        if name is None or name in out or (name != key and name in value):
            ignored.append(f"{where}: {key}")
            continue
        inner, many = _nested_model(model.model_fields[name].annotation)
        if inner is not None and many and isinstance(item, list):
            item = [_normalize(inner, element, f"{where}: {name}.{index}", ignored)
                    for index, element in enumerate(item)]
        elif inner is not None and not many:
            item = _normalize(inner, item, f"{where}: {name}", ignored)
        out[name] = item
    if model is Rule and isinstance(out.get("status"), str):
        out["status"] = out["status"].strip().lower()
    return out


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"]) or "(item)"
        parts.append(f"field '{field}': {item['msg']}")
    return "; ".join(parts)


def _validate(model: type[BaseModel], value: Any, where: str, ignored: list[str]) -> Any:
    try:
        return model.model_validate(_normalize(model, value, where, ignored))
    except ValidationError as error:
        raise Trace2EnvError(f"{_describe(error)}", where=str(where)) from None


def _read_json(root: Path, relative: str) -> Any:
    path = root / relative
    if not path.is_file():
        return None
    try:
        return orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as error:
        raise Trace2EnvError(f"not JSON: {error.msg} (column {error.colno})", where=f"{path}:{error.lineno}") from None
    except OSError as error:
        raise Trace2EnvError(f"{error}", where=str(path)) from None


def _read_lines(root: Path, relative: str) -> list[tuple[str, Any]]:
    """(where, value) for each non-blank line of a JSONL file; [] when the file is absent."""
    path = root / relative
    if not path.is_file():
        return []
    try:
        data = path.read_bytes()
    except OSError as error:
        raise Trace2EnvError(f"{error}", where=str(path)) from None
    out = []
    for number, line in enumerate(data.splitlines(), 1):
        if line.strip():
            try:
                out.append((f"{path}:{number}", orjson.loads(line)))
            except orjson.JSONDecodeError as error:
                raise Trace2EnvError(f"not JSON: {error.msg}", where=f"{path}:{number}") from None
    return out


def _items(root: Path, relative: str, key: str, name_field: str | None = None) -> list[tuple[str, Any]]:
    """(where, value) for each item of a JSON file holding `{key: [...]}` or a plain list.

    With `name_field`, `{key: {name: spec}}` maps are read too: the map key names the item
    (for state paths a plain string spec is its type).
    """
    path = root / relative
    data = _read_json(root, relative)
    if data is None:
        return []
    if isinstance(data, dict):
        if key not in data:
            raise Trace2EnvError(f"field '{key}' is missing (expected {{\"{key}\": [...]}} or a list)", where=str(path))
        data = data[key]
    if isinstance(data, dict) and name_field is not None:
        out = []
        for name, item in data.items():
            if isinstance(item, dict):
                item = {name_field: name, **item}
            elif isinstance(item, str) and name_field == "path":
                item = {"path": name, "type": item}
            out.append((f"{path}: {key}[{name!r}]", item))
        return out
    if not isinstance(data, list):
        raise Trace2EnvError(f"field '{key}' must be a list", where=str(path))
    return [(f"{path}: {key}[{index}]", item) for index, item in enumerate(data)]


def _rules(root: Path, relative: str, default: RuleStatus, ignored: list[str],
           seen: dict[str, str]) -> list[Rule]:
    """The rules of one JSONL file; a rule that gives no status gets the file's `default`."""
    rules = []
    for where, value in _read_lines(root, relative):
        if isinstance(value, dict) and not any(key in value for key in ("status", "rule_status")):
            value = {**value, "status": default.value}
        rule = _validate(Rule, value, where, ignored)
        if rule.id in seen:
            raise Trace2EnvError(f"field 'id': rule {rule.id!r} is already defined at {seen[rule.id]}",
                                 where=str(where))
        seen[rule.id] = where
        rules.append(rule)
    return rules


def import_trace2env(path: str | Path, *, ignored: list[str] | None = None) -> Worldbook:
    """The worldbook a Trace2Env package holds (name and env id from manifest.json, else the folder name).

    Pass a list as `ignored` to learn which fields were dropped ("<file>:<line>: <field>").
    """
    root = Path(path)
    if not root.is_dir():
        raise Trace2EnvError("not a folder (a Trace2Env package is a directory)", where=str(root))
    if not any((root / relative).is_file() for relative in (MANIFEST, RULES, CANDIDATES, ACTION_SCHEMA)):
        raise Trace2EnvError(f"{root}: not a Trace2Env package (none of {MANIFEST}, {RULES}, {CANDIDATES}, "
                             f"{ACTION_SCHEMA} is there)")
    dropped: list[str] = [] if ignored is None else ignored
    manifest = _read_json(root, MANIFEST) or {}
    if not isinstance(manifest, dict):
        raise Trace2EnvError("must be a JSON object", where=str(root / MANIFEST))
    name = manifest.get("name") or root.resolve().name
    env_id = manifest.get("env_id", manifest.get("environment"))
    for field, value in (("name", name), ("env_id", env_id)):
        if value is not None and not isinstance(value, str):
            raise Trace2EnvError(f"field '{field}' must be a string", where=str(root / MANIFEST))

    actions = _items(root, ACTION_SCHEMA, "actions", "name")
    paths = _items(root, STATE_SCHEMA, "paths", "path")
    seen: dict[str, str] = {}
    try:
        book = Worldbook(
            name=name, env_id=env_id,
            action_schema=ActionSchema(actions=[_validate(ActionSpec, v, w, dropped) for w, v in actions]),
            state_schema=StateSchema(paths=[_validate(StatePath, v, w, dropped) for w, v in paths]),
            rules=_rules(root, RULES, RuleStatus.SUPPORTED, dropped, seen)
            + _rules(root, CANDIDATES, RuleStatus.TENTATIVE, dropped, seen),
            invariants=[_validate(Invariant, v, w, dropped) for w, v in _items(root, INVARIANTS, "invariants")],
            contracts=[_validate(ObservationContract, v, w, dropped)
                       for w, v in _items(root, CONTRACTS, "contracts")],
            notes=[_validate(Note, v, w, dropped) for w, v in _read_lines(root, NOTES)],
            demonstrations=[_validate(Demonstration, v, w, dropped) for w, v in _read_lines(root, DEMONSTRATIONS)],
            evidence=[_validate(Evidence, v, w, dropped) for w, v in _read_lines(root, EVIDENCE)],
        )
    except ValidationError as error:  # across items: duplicate note or invariant ids, an empty name
        raise Trace2EnvError(f"{_describe(error)}", where=str(root)) from None
    return book


def export_version(store: WorldbookStore, name: str, out_dir: str | Path, *, version: str | None = None,
                   overwrite: bool = False) -> Path:
    """Export a stored version as a Trace2Env package; its manifest says which book and version it came from."""
    version = version or store.head(name)
    book, info = store.load(name, version), store.info(name, version)
    origin = {"book": name, "version": version, "parent": info.parent, "created": info.created}
    return export_trace2env(book, out_dir, manifest={"worldsmith": origin}, overwrite=overwrite)


def import_into_store(store: WorldbookStore, package: str | Path, *, name: str | None = None,
                      author: str = "unknown") -> tuple[Worldbook, VersionInfo, list[str]]:
    """Read a Trace2Env package and save it as a new version (HEAD is the parent when the name exists);
    returns the worldbook, its version and the fields the import ignored."""
    ignored: list[str] = []
    book = import_trace2env(package, ignored=ignored)
    if name:
        book = book.model_copy(update={"name": name})
    parent = store.head(book.name) if book.name in store.names() else None
    info = store.save(book, parent=parent, author=author, message=f"imported from {package}",
                      sources=[{"kind": "trace2env", "path": str(Path(package).resolve())}])
    return book, info, ignored
