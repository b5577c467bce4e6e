"""Worldbook model and store: validation, immutable versions, patches, conflicts, diff, undo."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from worldsmith.worldbook import (
    Condition,
    Effect,
    Evidence,
    Note,
    Patch,
    PatchConflictError,
    PatchOp,
    Rule,
    RuleProvenance,
    RuleStatus,
    StatePath,
    StateSchema,
    Worldbook,
    WorldbookError,
    WorldbookStore,
    diff_worldbooks,
)
from worldsmith.worldbook.store import iter_rule_turns


def book() -> Worldbook:
    take = Rule(
        id="take-success",
        action="take",
        conditions=[Condition(path="world.location.{arg.object}", op="eq", value="{arg.source}")],
        effects=[
            Effect(op="remove", path="world.contents.{arg.source}", value="{arg.object}"),
            Effect(op="append", path="world.inventory", value="{arg.object}"),
        ],
        template="You pick up the {arg.object} from the {arg.source}.",
        status=RuleStatus.SUPPORTED,
        confidence=0.9,
        support=12,
        provenance=RuleProvenance(supporting=["ep1#3", "ep2#0"], contradicting=[]),
    )
    nothing = Rule(
        id="take-fail",
        action="take",
        outcome="failure:absent",
        template="Nothing happens.",
        status=RuleStatus.TENTATIVE,
        support=1,
        provenance=RuleProvenance(supporting=["ep3#1"]),
    )
    return Worldbook(
        name="kitchen",
        env_id="alfworld",
        state_schema=StateSchema(paths=[StatePath(path="world.inventory", type="set")]),
        rules=[take, nothing],
        notes=[Note(id="n1", kind="convention", text="Receptacles are numbered.", provenance=["ep1#0"])],
        evidence=[
            Evidence(
                turn_id="ep1#3",
                action="take",
                arguments={"object": "apple 1"},
                action_text="take apple 1 from countertop 1",
                observation="You pick up the apple 1 from the countertop 1.",
            )
        ],
    )


def test_model_validation_names_the_field() -> None:
    with pytest.raises(ValidationError, match="must start with one of world, session, surface, epistemic"):
        Effect(op="set", path="inventory")
    with pytest.raises(ValidationError, match="is not a turn id"):
        RuleProvenance(supporting=["ep1-3"])
    with pytest.raises(ValidationError, match="outcome must be 'success' or 'failure:<kind>'"):
        Rule(id="r", action="a", outcome="maybe")
    with pytest.raises(ValidationError, match="exactly one of 'path'"):
        Condition(op="eq", value=1)
    with pytest.raises(ValidationError, match="two rules have the id 'r'"):
        Worldbook(name="x", rules=[Rule(id="r", action="a"), Rule(id="r", action="b")])
    assert [r.id for r in book().supported_rules("take")] == ["take-success"]


def test_save_load_round_trip_is_byte_stable(tmp_path: Path) -> None:
    store = WorldbookStore(tmp_path)
    first = store.save(book(), author="builder", message="built", build={"builder": "deterministic"})
    assert store.head("kitchen") == first.version and first.parent is None
    assert store.load("kitchen") == book().canonical()
    folder = tmp_path / "kitchen" / "versions" / first.version
    assert sorted(p.name for p in folder.iterdir()) == [
        "book.json",
        "demonstrations.jsonl",
        "evidence.jsonl",
        "manifest.json",
        "notes.jsonl",
        "rules.jsonl",
    ]
    ids = [line.split('"id":"')[1].split('"')[0] for line in (folder / "rules.jsonl").read_text().splitlines()]
    assert ids == ["take-fail", "take-success"]  # sorted: stable files that diff well
    again = store.save(book(), parent=first.version)
    assert again.hashes == first.hashes  # same content, same bytes
    assert store.names() == ["kitchen"]
    assert not list((tmp_path / "kitchen" / "versions").glob(".staging-*"))


def test_a_tampered_version_is_refused_with_the_file_named(tmp_path: Path) -> None:
    store = WorldbookStore(tmp_path)
    info = store.save(book())
    rules = tmp_path / "kitchen" / "versions" / info.version / "rules.jsonl"
    rules.write_text(rules.read_text().replace("Nothing happens.", "Something happens."))
    with pytest.raises(WorldbookError, match="files changed after the version was written: rules.jsonl"):
        store.load("kitchen")
    rules.write_text("{not json\n")
    with pytest.raises(WorldbookError, match=r"rules.jsonl:1: not JSON"):
        store.load("kitchen")


@pytest.mark.parametrize("version", ["../../other/versions/v0001", "..", "/etc", "v0001/../..", ".staging-1-x"])
def test_a_version_that_is_a_path_is_refused_before_any_read(tmp_path: Path, version: str) -> None:
    store = WorldbookStore(tmp_path / "books")
    info = store.save(book())
    # a readable version outside the book, where `../../other/versions/v0001` would lead without the check
    shutil.copytree(
        tmp_path / "books" / "kitchen" / "versions" / info.version, tmp_path / "books" / "other" / "versions" / "v0001"
    )
    for read in (store.info, store.load, store.history):
        with pytest.raises(WorldbookError, match="worldbook version name .*: use 1-"):
            read("kitchen", version)
    assert store.load("kitchen", info.version).name == "kitchen"  # a real version id still reads


def test_patch_makes_a_new_version_and_keeps_the_old_one(tmp_path: Path) -> None:
    store = WorldbookStore(tmp_path)
    base = store.save(book()).version
    demoted = store.patch(
        "kitchen",
        Patch(
            base=base,
            author="ana",
            message="counterexample in ep9",
            ops=[
                PatchOp(
                    op="update_rule", id="take-success", fields={"status": "conflicted", "counterexamples": ["ep9#2"]}
                )
            ],
        ),
    )
    assert demoted.parent == base and store.head("kitchen") == demoted.version
    assert store.load("kitchen").rule("take-success").status == RuleStatus.CONFLICTED
    assert store.load("kitchen", base).rule("take-success").status == RuleStatus.SUPPORTED  # intact
    assert [v.version for v in store.history("kitchen")] == [demoted.version, base]
    difference = diff_worldbooks(store.load("kitchen", base), store.load("kitchen"))
    assert difference["rules"]["changed"]["take-success"]["status"] == {"before": "supported", "after": "conflicted"}
    assert difference["rules"]["added"] == [] and difference["notes"]["changed"] == {}
    undone = store.undo("kitchen", author="ana")
    assert undone.parent == demoted.version and store.load("kitchen") == store.load("kitchen", base)


def test_concurrent_edits_of_the_same_rule_conflict_loudly(tmp_path: Path) -> None:
    store = WorldbookStore(tmp_path)
    base = store.save(book()).version
    store.patch(
        "kitchen",
        Patch(base=base, author="ana", ops=[PatchOp(op="update_rule", id="take-fail", fields={"status": "supported"})]),
    )
    with pytest.raises(PatchConflictError, match="rule 'take-fail' changed there too"):
        store.patch(
            "kitchen",
            Patch(base=base, author="ben", ops=[PatchOp(op="update_rule", id="take-fail", fields={"template": "No."})]),
        )
    # Another item edited on the same stale base applies on top of the current version.
    merged = store.patch(
        "kitchen",
        Patch(base=base, author="ben", ops=[PatchOp(op="update_note", id="n1", fields={"text": "Numbered."})]),
    )
    current = store.load("kitchen", merged.version)
    assert current.notes[0].text == "Numbered." and current.rule("take-fail").status == RuleStatus.SUPPORTED


def test_bad_patches_are_refused_and_nothing_is_written(tmp_path: Path) -> None:
    store = WorldbookStore(tmp_path)
    base = store.save(book()).version
    for ops, message in [
        ([PatchOp(op="update_rule", id="nope", fields={"status": "supported"})], "no rule 'nope'"),
        ([PatchOp(op="update_rule", id="take-fail", fields={"colour": "red"})], "unknown fields colour"),
        ([PatchOp(op="update_rule", id="take-fail", fields={"status": "maybe"})], "status"),
        ([PatchOp(op="add_rule", id="take-fail", value={"action": "take"})], "already exists"),
    ]:
        with pytest.raises(WorldbookError, match=message):
            store.patch("kitchen", Patch(base=base, ops=ops))
    assert [v.version for v in store.versions("kitchen")] == [base]
    added = store.patch(
        "kitchen",
        Patch(
            base=base,
            ops=[
                PatchOp(op="add_rule", id="look", value={"action": "look", "template": "You see {surface.room}."}),
                PatchOp(op="remove_note", id="n1"),
            ],
        ),
    )
    assert store.load("kitchen", added.version).rule("look").status == RuleStatus.TENTATIVE
    with pytest.raises(WorldbookError, match="no worldbook 'other'"):
        store.head("other")
    with pytest.raises(WorldbookError, match="worldbook name '../x'"):
        store.head("../x")


def test_provenance_links_are_listed() -> None:
    assert list(iter_rule_turns(book())) == [
        ("take-success", "supporting", "ep1#3"),
        ("take-success", "supporting", "ep2#0"),
        ("take-fail", "supporting", "ep3#1"),
    ]
