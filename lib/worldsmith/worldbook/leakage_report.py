"""`LeakageReport`: the one type both leakage checks return, and the reader of every shape ever stored.

Two checks ask whether evaluated episodes leak: the builder's (`worldbook.build.leakage_check`, against the
construction episodes: `against="construction"`) and the evaluation's (`worldbook.leakage.check_leakage`,
against a book's evidence: `against="evidence"`). Each fills the fields it knows; the others stay None and
are left out of the JSON. `ok` is derived, never stored apart: a report is ok when `leaked_episodes` (each
leaked evaluated episode with why) is empty.

JSON (`to_json()`, and any `model_dump` of a model holding one; keys with no value are left out), version 2:

    version                  2
    ok                       no evaluated episode leaks
    against                  "construction" (builder's check) or "evidence" (a book's evidence)
    leaked_episodes          {episode id: [why, ...]}, sorted by id: every leaked episode, never cut
    shared_episodes          evaluated episode ids also in what was checked against (first 20)
    leaked_turns             target turn ids also in what was checked against (first 20)
    duplicated_trajectories  "evaluated id = id it copies[ (its first N turns)]" (first 20)
    target_turns, evaluation_episodes
    shared_families, families_disjoint, targets_seen_verbatim_in_construction     (construction only)
    evidence_episodes, targets_seen_verbatim_in_evidence, builder_check,
    evidence_families, evidence_episodes_unresolved                                (evidence only)
    dropped                  {count, episodes: {id: [why]}}: left out of a run (`drop_leaked`)
    fold, folds              a cross-fitted run: each fold's report under `folds`, the pooled one on top

Reports stored before the version field (run report.json, book manifests, build reports) are version 1,
in one of two dict shapes: the builder's (`leaked_episodes` a list of ids, or absent in the first builds)
and the evaluation's (`leaked_episodes` a dict, or absent in the first runs). `LeakageReport.read` (and
`model_validate`, which a stored `EvalReport` goes through) upgrades them: missing reasons are rebuilt from
the stored lists, which were cut at 20 (a builder's stored list of ids stays the leaked set; an id with no
example left gets "why was not stored"), and a stored `ok` that contradicts them is refused. A report from a
newer version loads with its unknown keys kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from worldsmith.util.errors import BadInputError

__all__ = ["BUILDER_REASON", "EXAMPLES", "LEAKAGE_REPORT_VERSION", "Dropped", "LeakageReport", "leak_reasons",
           "reasons_by_episode"]

LEAKAGE_REPORT_VERSION = 2
EXAMPLES = 20  # the lists of examples (shared episodes, leaked turns, copies) are cut here

Against = Literal["construction", "evidence"]
_PLACES: dict[str, str] = {"construction": "the construction episodes", "evidence": "the book's evidence"}
BUILDER_REASON = "in the construction episodes (the builder's check)"


class Dropped(BaseModel):
    """Leaked episodes left out of the evaluation set (`drop_leaked`), each with why."""

    model_config = ConfigDict(extra="allow")

    count: int = 0
    episodes: dict[str, list[str]] = Field(default_factory=dict)


def reasons_by_episode(found: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """`(episode id, why)` pairs as `{episode id: [why, ...]}`: ids sorted, reasons in the order found, once each."""
    why: dict[str, list[str]] = {}
    for episode_id, reason in dict.fromkeys(found):
        why.setdefault(episode_id, []).append(reason)
    return dict(sorted(why.items()))


def leak_reasons(against: Against, shared: Iterable[str], leaked_turns: Iterable[tuple[str, str]],
                 duplicated: Mapping[str, str]) -> list[tuple[str, str]]:
    """Why each episode leaks, as both checks word it: `leaked_turns` are `(episode id, turn id)`, `duplicated`
    `{evaluated id: what it copies}`."""
    place = _PLACES[against]
    return [*((e, f"in {place}") for e in shared),
            *((e, f"target turns in {place}") for e, _ in leaked_turns),
            *((e, f"a copy of {copied} in {place}") for e, copied in duplicated.items())]


class LeakageReport(BaseModel):
    """Whether evaluated episodes leak into what a book was built from, and why each leaked one does."""

    model_config = ConfigDict(extra="allow")

    version: int = LEAKAGE_REPORT_VERSION
    against: Against = "evidence"
    leaked_episodes: dict[str, list[str]] = Field(default_factory=dict)
    shared_episodes: list[str] = Field(default_factory=list)
    leaked_turns: list[str] = Field(default_factory=list)
    duplicated_trajectories: list[str] = Field(default_factory=list)
    target_turns: int = 0
    evaluation_episodes: int | None = None
    # the builder's check only
    shared_families: list[str] | None = None
    families_disjoint: bool | None = None
    targets_seen_verbatim_in_construction: int | None = None
    # the evaluation's check only
    evidence_episodes: int | None = None
    targets_seen_verbatim_in_evidence: int | None = None
    builder_check: LeakageReport | None = None
    evidence_families: int | None = None
    evidence_episodes_unresolved: int | None = None
    # a run's: what it dropped, and a cross-fitted run's folds
    dropped: Dropped | None = None
    fold: int | None = None
    folds: list[LeakageReport] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No evaluated episode leaks."""
        return not self.leaked_episodes

    @classmethod
    def read(cls, data: Mapping[str, Any] | LeakageReport) -> LeakageReport:
        """A stored report of any version (see the module docstring); BadInputError names what is wrong."""
        if isinstance(data, LeakageReport):
            return data
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'report'}: {e['msg']}" for e in error.errors())
            raise BadInputError(f"not a leakage report ({problems})", where="leakage") from None

    def to_json(self) -> dict[str, Any]:
        """The stored form (version 2): what report.json, a book's manifest and `--json` hold."""
        return self.model_dump(mode="json")

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        body = {key: value for key, value in data.items() if value is not None and key not in ("version", "ok")}
        if not self.folds:
            body.pop("folds", None)
        return {"version": self.version, "ok": self.ok, **body}

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        version = data.get("version", 1)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise ValueError(f"version must be a positive integer, not {version!r}")
        out = {key: value for key, value in data.items() if key != "ok"}
        if version >= LEAKAGE_REPORT_VERSION:
            return out
        return _from_version_1(out, data.get("ok"))


def _from_version_1(data: dict[str, Any], stored_ok: Any) -> dict[str, Any]:
    """A report stored before `version` in the version-2 shape: `against` from its fields, reasons rebuilt.
    A version-2 report made in code without `version` comes through here unchanged."""
    builder = any(k in data for k in ("shared_families", "families_disjoint", "targets_seen_verbatim_in_construction"))
    against: Against = data.get("against") or ("construction" if builder else "evidence")
    data = {**data, "version": LEAKAGE_REPORT_VERSION, "against": against}
    if isinstance(data.get("builder_check"), Mapping):
        data["builder_check"] = LeakageReport.model_validate(data["builder_check"])
    data["folds"] = [LeakageReport.model_validate(f) if isinstance(f, Mapping) else f for f in data.get("folds") or []]
    stored = data.get("leaked_episodes")
    if isinstance(stored, Mapping):
        return _checked(data, stored_ok)
    turns = [(_episode_of(turn), turn) for turn in data.get("leaked_turns") or []]
    duplicated = dict(_copy_of(pair) for pair in data.get("duplicated_trajectories") or [])
    found = leak_reasons(against, data.get("shared_episodes") or [], turns, duplicated)
    check = data.get("builder_check")
    if isinstance(check, LeakageReport):
        found += [(e, BUILDER_REASON) for e in check.leaked_episodes]
    for fold in data["folds"]:
        if isinstance(fold, LeakageReport):
            found += [(e, why) for e, reasons in fold.leaked_episodes.items() for why in reasons]
    why = reasons_by_episode(found)
    if isinstance(stored, list):  # the builder's list of ids is the leaked set (a copy's turn ids name its original)
        why = {str(e): why.get(str(e)) or [f"in {_PLACES[against]} (why was not stored)"] for e in sorted(stored)}
    data["leaked_episodes"] = why
    return _checked(data, stored_ok)


def _checked(data: dict[str, Any], stored_ok: Any) -> dict[str, Any]:
    """Refuse a stored `ok` that contradicts the episodes it names (no version of the checks wrote one)."""
    if isinstance(stored_ok, bool) and stored_ok == bool(data.get("leaked_episodes")):
        state = "ok" if stored_ok else "not ok"
        raise ValueError(f"the stored report says {state} but names {len(data.get('leaked_episodes') or {})} "
                         "leaked episodes")
    return data


def _episode_of(turn_id: str) -> str:
    episode_id, sep, _ = str(turn_id).rpartition("#")
    return episode_id if sep else str(turn_id)


def _copy_of(pair: str) -> tuple[str, str]:
    copy, _, original = str(pair).partition(" = ")
    return copy, original
