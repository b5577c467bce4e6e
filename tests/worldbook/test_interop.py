"""Trace2Env packages: lossless round trip, tolerant import of alternate names, clear errors on bad input."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from worldsmith.worldbook import (
    Condition,
    Effect,
    Evidence,
    Note,
    Rule,
    RuleProvenance,
    RuleStatus,
    StatePath,
    StateSchema,
    Worldbook,
)
from worldsmith.worldbook.interop import TRACE2ENV_FILES, Trace2EnvError, export_trace2env, import_trace2env
from worldsmith.worldbook.model import (
    ActionSchema,
    ActionSpec,
    ArgumentSpec,
    Demonstration,
    Invariant,
    ObservationContract,
)


def rich_book() -> Worldbook:
    """A worldbook with every field set to something other than its default."""
    take = Rule(
        id="take.ok", action="take", priority=3, scope="kitchen", status=RuleStatus.SUPPORTED, confidence=0.9,
        support=7, counterexamples=["ep2#5"], description="taking moves the object to the inventory",
        conditions=[Condition(path="world.location.{arg.object}", op="eq", value="{arg.source}"),
                    Condition(arg="object", op="matches", value=r"^\w+ \d+$")],
        effects=[Effect(op="remove", path="world.contents.{arg.source}", value="{arg.object}"),
                 Effect(op="append", path="session.inventory", value="{arg.object}")],
        template="You pick up the {arg.object} from the {arg.source}.",
        provenance=RuleProvenance(supporting=["ep1#1", "ep1#4"], contradicting=["ep2#5"]),
    )
    rules = [take,
             take.model_copy(update={"id": "take.full", "status": RuleStatus.TENTATIVE, "outcome": "failure:full",
                                     "template": "Your hands are full."}),
             take.model_copy(update={"id": "take.old", "status": RuleStatus.DEPRECATED}),
             take.model_copy(update={"id": "take.clash", "status": RuleStatus.CONFLICTED, "priority": -1})]
    return Worldbook(
        name="kitchen", env_id="alfworld",
        action_schema=ActionSchema(actions=[ActionSpec(
            name="take", aliases=["pick up", "grab"], pattern=r"^take (?P<object>.+) from (?P<source>.+)$",
            examples=["take apple 1 from countertop 1"], description="pick an object up",
            arguments=[ArgumentSpec(name="object", type="string", description="what"),
                       ArgumentSpec(name="source", type="any", required=False)])]),
        state_schema=StateSchema(paths=[
            StatePath(path="world.contents.{key}", type="set", description="what each receptacle holds"),
            StatePath(path="session.inventory", type="array", mutable=False)]),
        rules=rules,
        invariants=[Invariant(id="one-place", description="an object is in one place",
                              conditions=[Condition(path="world.location", op="exists")]),
                    Invariant(id="a-first", description="kept in its order")],
        contracts=[ObservationContract(action="take", template="You pick up the {arg.object}.",
                                       required_fields=["object"], examples=["You pick up the apple 1."])],
        notes=[Note(id="n2", kind="format", text="Objects are written 'name N'.", provenance=["ep1#0"]),
               Note(id="n1", kind="constraint", text="Hands hold one object.")],
        demonstrations=[Demonstration(action="take", turn_id="ep1#1", outcome="success",
                                      action_text="take apple 1 from countertop 1",
                                      observation="You pick up the apple 1 from the countertop 1.")],
        evidence=[Evidence(turn_id="ep1#1", action="take", arguments={"object": "apple 1", "n": [1, {"x": None}]},
                           action_text="take apple 1 from countertop 1", outcome="success",
                           observation="You pick up the apple 1 from the countertop 1."),
                  Evidence(turn_id="ep1#0", action="look", arguments=[], action_text="look", observation="{odd}")],
    )


def test_round_trip_is_lossless(tmp_path: Path) -> None:
    book = rich_book()
    out = export_trace2env(book, tmp_path / "pkg", manifest={"source": "unit test"})
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert files == sorted(TRACE2ENV_FILES)
    index = [orjson.loads(line)["id"] for line in (out / "rules/index.jsonl").read_bytes().splitlines()]
    candidates = [orjson.loads(line)["status"] for line in (out / "candidates/rules.jsonl").read_bytes().splitlines()]
    assert index == ["take.ok"] and sorted(candidates) == ["conflicted", "deprecated", "tentative"]
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["source"] == "unit test" and manifest["name"] == "kitchen" and manifest["counts"]["candidates"] == 3
    assert orjson.loads((out / "state_schema.json").read_bytes())["paths"][0]["path"] == "world.contents.{key}"
    back = import_trace2env(out)
    assert back.canonical() == book.canonical()
    assert [i.id for i in back.invariants] == ["one-place", "a-first"]


def test_export_is_atomic_and_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    target = tmp_path / "pkg"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(Trace2EnvError, match="not empty"):
        export_trace2env(rich_book(), target)
    assert (target / "keep.txt").read_text() == "mine"
    export_trace2env(rich_book(), target, overwrite=True)
    assert not (target / "keep.txt").exists() and (target / "manifest.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pkg"]  # no staging or old folders left behind
    (tmp_path / "empty").mkdir()
    assert import_trace2env(export_trace2env(rich_book(), tmp_path / "empty")).name == "kitchen"
    with pytest.raises(Trace2EnvError, match="not a folder"):
        export_trace2env(rich_book(), tmp_path / "pkg" / "manifest.json")
    with pytest.raises(Trace2EnvError, match="manifest"):
        export_trace2env(rich_book(), tmp_path / "other", manifest={"bad": object()})
    assert not (tmp_path / "other").exists()


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_hand_written_package_with_alternate_names(tmp_path: Path) -> None:
    package = tmp_path / "doors-pkg"
    write(package, "action_schema.json", orjson.dumps(
        {"actions": {"open": {"parameters": ["target"], "regex": r"^open (?P<target>.+)$", "cost": 1}}}).decode())
    write(package, "state_schema.json", '["world.doors", {"name": "session.turn", "type": "integer"}]')
    write(package, "rules/index.jsonl", "\n".join([
        orjson.dumps({"rule_id": "open-ok", "action": "open", "observation_template": "You open the {arg.target}.",
                      "preconditions": [{"path": "world.doors.{arg.target}", "operator": "eq", "value": "closed",
                                         "weight": 0.5}],
                      "effects": [{"operation": "set", "path": "world.doors.{arg.target}", "value": "open"}],
                      "provenance": ["ep1#2"], "salience": 0.3}).decode(),
        "",
        orjson.dumps({"id": "open-ok-2", "action": "open", "rule_status": "SUPPORTED", "template": "Opened."}).decode(),
    ]) + "\n")
    write(package, "candidates/rules.jsonl",
          orjson.dumps({"id": "open-locked", "action": "open", "outcome": "failure:locked",
                        "template": "It is locked."}).decode() + "\n")
    write(package, "invariants.json", '[{"invariant_id": "inv", "text": "doors are open or closed"}]')
    write(package, "renderer/contracts.json", '{"contracts": [{"action_name": "open", "observation_template": "x"}]}')
    write(package, "knowledge/notes.jsonl", '{"note_id": "n1", "content": "Doors may be locked.", "kind": "fact"}\n')
    write(package, "demonstrations/transitions.jsonl", orjson.dumps(
        {"action": "open", "turn_id": "ep1#2", "action_raw": "open door", "observation_text": "You open the door.",
         "reward": 1}).decode() + "\n")
    ignored: list[str] = []
    book = import_trace2env(package, ignored=ignored)

    assert book.name == "doors-pkg" and book.env_id is None and book.evidence == []
    assert book.action_schema.actions[0].name == "open"
    assert book.action_schema.actions[0].arguments[0].name == "target"
    assert [p.path for p in book.state_schema.paths] == ["world.doors", "session.turn"]
    rules = {rule.id: rule for rule in book.rules}
    assert rules["open-ok"].status == RuleStatus.SUPPORTED  # no status in rules/index.jsonl
    assert rules["open-ok-2"].status == RuleStatus.SUPPORTED
    assert rules["open-locked"].status == RuleStatus.TENTATIVE  # no status in candidates
    assert rules["open-ok"].template == "You open the {arg.target}."
    assert rules["open-ok"].conditions[0].op == "eq" and rules["open-ok"].effects[0].op == "set"
    assert rules["open-ok"].provenance.supporting == ["ep1#2"]
    assert book.invariants[0].id == "inv" and book.contracts[0].template == "x"
    assert book.notes[0].text == "Doors may be locked." and book.demonstrations[0].action_text == "open door"
    assert sorted(field.rsplit(": ", 1)[1] for field in ignored) == ["cost", "reward", "salience", "weight"]
    assert any("rules/index.jsonl:1: conditions.0" in field for field in ignored)


@pytest.mark.parametrize(("relative", "text", "expected"), [
    ("rules/index.jsonl", '{"id": "a", "action": "x"}\n{"id": "b", "action": \n', r"rules/index.jsonl:2: not JSON"),
    ("rules/index.jsonl", '{"id": "a", "action": "x", "outcome": "maybe"}\n',
     r"rules/index.jsonl:1: field 'outcome': .*'success' or 'failure"),
    ("rules/index.jsonl", '{"id": "a", "action": "x", "effects": [{"op": "set", "path": "nowhere"}]}\n',
     r"rules/index.jsonl:1: field 'effects.0.path'"),
    ("candidates/rules.jsonl", '{"id": "a", "action": "x"}\n', r"candidates/rules.jsonl:1: field 'id': rule 'a' is "
     r"already defined at .*rules/index.jsonl:1"),
    ("knowledge/notes.jsonl", '{"id": "n"}\n', r"knowledge/notes.jsonl:1: field 'text': Field required"),
    ("invariants.json", '{"invariants": [{"id": "i", "description": "d"},\n {"id": 5}]}',
     r"invariants.json: invariants\[1\]: field 'id'"),
    ("invariants.json", '{"invariants": [1,\n 2', r"invariants.json:2: not JSON"),
    ("state_schema.json", '{"path": []}', r"state_schema.json: field 'paths' is missing"),
    ("manifest.json", '[1]', r"manifest.json: must be a JSON object"),
])
def test_bad_input_names_file_line_and_field(tmp_path: Path, relative: str, text: str, expected: str) -> None:
    package = tmp_path / "pkg"
    if relative != "rules/index.jsonl":
        write(package, "rules/index.jsonl", '{"id": "a", "action": "x"}\n')
    write(package, relative, text)
    with pytest.raises(Trace2EnvError, match=expected):
        import_trace2env(package)


def test_not_a_package(tmp_path: Path) -> None:
    with pytest.raises(Trace2EnvError, match="not a folder"):
        import_trace2env(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(Trace2EnvError, match="not a Trace2Env package"):
        import_trace2env(tmp_path / "empty")
