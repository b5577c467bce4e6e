"""Model-backed stages: a scripted model for the checking logic, the shipped tiny model end to end."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from worldsmith.llm import Completion, GenerationParams, LLMBase, Message, TransientLLMError, open_llm
from worldsmith.llm.calllog import CallLog
from worldsmith.traces import Episode
from worldsmith.worldbook import Evidence, Note, Rule, RuleStatus
from worldsmith.worldbook.induce import induce_rules
from worldsmith.worldbook.model_stages import (
    StageReport,
    compare_stage_outputs,
    model_extract,
    model_notes,
    model_rules,
)
from worldsmith.worldbook.stages import Extraction
from worldsmith.worldbook.templates import evidence_from_episodes

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "data_samples" / "models" / "tiny"
ALFWORLD = REPO / "data_samples" / "collected" / "alfworld.jsonl"


class ScriptedLLM(LLMBase):
    """Answers each conversation with `script(conversation)`; records every batch it was sent."""

    spec = "scripted:test"

    def __init__(self, script: Callable[[list[Message]], str], *, fail: Exception | None = None) -> None:
        self.script = script
        self.fail = fail
        self.batches: list[list[list[Message]]] = []
        self.params: list[GenerationParams] = []

    def generate(self, conversations: list[list[Message]], params: GenerationParams) -> list[list[Completion]]:
        self.batches.append(conversations)
        self.params.append(params)
        if self.fail is not None:
            raise self.fail
        return [[Completion(text=self.script(messages))] for messages in conversations]


def transition(episode: str, index: int, action: str, arguments: dict, text: str, observation: str,
               outcome: str = "success") -> Evidence:
    return Evidence(turn_id=f"{episode}#{index}", action=action, arguments=arguments, action_text=text,
                    observation=observation, outcome=outcome)


EVIDENCE = [
    transition("e1", 0, "take", {"object": "apple 1", "source": "table 1"}, "take apple 1 from table 1",
               "You pick up the apple 1 from the table 1."),
    transition("e1", 1, "take", {"object": "pen 2", "source": "desk 1"}, "take pen 2 from desk 1",
               "You pick up the pen 2 from the desk 1."),
    transition("e2", 0, "take", {"object": "cup 1", "source": "shelf 3"}, "take cup 1 from shelf 3",
               "Nothing happens.", outcome="failure"),
    transition("e2", 1, "open", {"object": "fridge 1"}, "open fridge 1",
               "You open the fridge 1. In it, you see a tomato 1."),
]


def deterministic_extract(items: list[Evidence]) -> list[Extraction]:
    return [Extraction(turn_id=item.turn_id, action=item.action, arguments=item.arguments,
                       outcome=item.outcome or "success") for item in items]


def deterministic_rules(action: str, evidence: list[Evidence]) -> list[Rule]:
    """The product's deterministic rules stage (`worldbook.induce`), narrowed to one action."""
    return [rule for rule in induce_rules(evidence) if rule.action == action]


def deterministic_notes(evidence: list[Evidence]) -> list[Note]:
    return [Note(id="note.d1", kind="fact", text=f"{len(evidence)} transitions were recorded.")]


def user_text(messages: list[Message]) -> str:
    return next(m["content"] for m in messages if m["role"] == "user")


# ------------------------------------------------------------------------------------- extract


def test_extract_uses_valid_answers_in_one_batch_and_keeps_our_turn_ids() -> None:
    def script(messages: list[Message]) -> str:
        if "open fridge 1" in user_text(messages):
            return json.dumps({"turn_id": "invented#99", "arguments": {"object": "fridge 1"}, "outcome": "success",
                               "facts": [{"path": ["world", "contents", "fridge 1"], "value": ["tomato 1"],
                                          "kind": "list"}],
                               "changes": [{"op": "set", "path": "world.status.{arg.object}", "value": "open"}]})
        return "```json\n" + json.dumps({"outcome": "success", "arguments": {}}) + "\n```"

    llm = ScriptedLLM(script)
    report = StageReport()
    out = model_extract(EVIDENCE, llm, fallback=deterministic_extract, report=report)
    assert [e.turn_id for e in out] == [e.turn_id for e in EVIDENCE]  # ours, in evidence order
    assert all(e.source == "model" for e in out)
    opened = out[3]
    assert opened.facts[0].path == ["world", "contents", "fridge 1"] and opened.facts[0].value == ["tomato 1"]
    assert opened.changes[0].path == "world.status.{arg.object}"
    assert out[0].arguments == {"object": "apple 1", "source": "table 1"}  # the evidence's parse is kept
    assert len(llm.batches) == 1 and len(llm.batches[0]) == 4  # one batched call
    assert llm.params[0].json_schema is not None and "facts" in llm.params[0].json_schema["properties"]
    assert (report.stage, report.calls, report.usable, report.fell_back, report.dropped) == ("extract", 4, 4, 0, 0)


def test_extract_falls_back_per_transition_when_the_output_is_not_json() -> None:
    def script(messages: list[Message]) -> str:
        if "take apple 1" in user_text(messages):
            return json.dumps({"outcome": "success", "arguments": {"object": "apple 1"}})
        return "I think the apple is { red"

    llm = ScriptedLLM(script)
    report = StageReport()
    out = model_extract(EVIDENCE, llm, fallback=deterministic_extract, batch_size=3, report=report, retries=1)
    assert [e.turn_id for e in out] == [e.turn_id for e in EVIDENCE]
    assert [e.source for e in out] == ["model", "deterministic", "deterministic", "deterministic"]
    assert out[2].outcome == "failure"  # the fallback's answer, untouched
    # batches of 3 and 1; each failed answer got one repair round, sent as a batch of the failures
    assert [len(batch) for batch in llm.batches] == [3, 2, 1, 1]
    assert "not valid" in llm.batches[1][0][-1]["content"]
    assert (report.calls, report.usable, report.fell_back) == (7, 1, 3)
    assert any("e1#1" in error and "no valid answer" in error for error in report.errors)


def test_extract_repair_round_can_rescue_an_answer() -> None:
    def script(messages: list[Message]) -> str:
        return '{"outcome": "success"}' if len(messages) > 2 else "no json here"

    report = StageReport()
    out = model_extract(EVIDENCE[:2], ScriptedLLM(script), fallback=deterministic_extract, report=report)
    assert [e.source for e in out] == ["model", "model"] and report.calls == 4 and report.fell_back == 0


def test_extract_drops_invalid_and_ungrounded_items_with_reasons() -> None:
    answer = {
        "arguments": {"object": "fridge 1", "colour": "purple"},  # purple is not in the action text
        "outcome": "broken",  # not success / failure:<kind>
        "facts": [
            {"path": ["world", "contents", "fridge 1"], "value": ["tomato 1"], "kind": "list"},
            {"path": ["world"], "value": "x"},  # too short
            {"path": ["world", "contents", "fridge 1"], "value": ["banana 7"], "kind": "list"},  # invented
            {"path": ["kitchen", "fridge 1"], "value": "open"},  # not a namespace
        ],
        "changes": [{"op": "set", "path": "fridge.status", "value": "open"}, {"op": "teleport", "path": "world.x"}],
    }
    report = StageReport()
    [out] = model_extract(EVIDENCE[3:], ScriptedLLM(lambda m: json.dumps(answer)), fallback=deterministic_extract,
                          report=report)
    assert out.source == "model" and out.outcome == "success"  # the evidence's outcome replaces the bad one
    assert [f.value for f in out.facts] == [["tomato 1"]] and out.changes == []
    assert "colour" not in out.arguments and out.arguments["object"] == "fridge 1"
    assert report.dropped == 6 and report.usable == 1
    text = "\n".join(report.errors)
    for reason in ("'colour'", "banana 7", "must start with one of", "fact 1", "change 0", "change 1", "'broken'"):
        assert reason in text


def test_extract_answer_with_nothing_usable_falls_back() -> None:
    answers = {"take apple 1": json.dumps({"unrelated": 1}),
               "take pen 2": json.dumps({"facts": [{"path": ["world", "x"], "value": "made up"}]})}

    def script(messages: list[Message]) -> str:
        return next((a for key, a in answers.items() if key in user_text(messages)), '{"outcome": "success"}')

    report = StageReport()
    out = model_extract(EVIDENCE[:3], ScriptedLLM(script), fallback=deterministic_extract, report=report)
    assert [e.source for e in out] == ["deterministic", "deterministic", "model"]
    assert report.fell_back == 2 and report.usable == 1


def test_extract_model_error_falls_back_for_the_batch() -> None:
    llm = ScriptedLLM(lambda m: "{}", fail=TransientLLMError("server overloaded"))
    report = StageReport()
    out = model_extract(EVIDENCE, llm, fallback=deterministic_extract, batch_size=2, report=report)
    assert out == deterministic_extract(EVIDENCE)
    assert report.fell_back == 4 and report.usable == 0 and report.calls == 4
    assert any("server overloaded" in error for error in report.errors)
    with pytest.raises(ValueError, match="batch_size"):
        model_extract(EVIDENCE, llm, fallback=deterministic_extract, batch_size=0)


# --------------------------------------------------------------------------------------- rules


def test_rules_valid_answer_provenance_comes_from_our_evidence() -> None:
    answer = {"rules": [
        {"template": "You pick up the {arg.object} from the {arg.source}.", "outcome": "success",
         "conditions": [{"arg": "object", "op": "exists"}],
         "effects": [{"op": "remove", "path": "world.contents.{arg.source}", "value": "{arg.object}"}],
         "description": "Taking moves the object into the inventory.",
         "provenance": {"supporting": ["invented#1", "invented#2"]}, "support": 40, "status": "supported"},
        {"template": "Nothing happens.", "outcome": "failure:not_here", "turn_ids": ["e9#9"]},
    ]}
    llm = ScriptedLLM(lambda m: json.dumps(answer))
    report = StageReport()
    rules = model_rules("take", EVIDENCE, llm, fallback=deterministic_rules, report=report)
    assert [r.id for r in rules] == ["take.m1", "take.m2"]
    pick, nothing = rules
    assert pick.status == RuleStatus.TENTATIVE and pick.support == 2 and pick.confidence == 1.0
    assert pick.provenance.supporting == ["e1#0", "e1#1"] and pick.provenance.contradicting == []
    assert pick.effects[0].op == "remove" and pick.conditions[0].arg == "object"
    assert nothing.provenance.supporting == ["e2#0"] and nothing.outcome == "failure:not_here"
    prompt = user_text(llm.batches[0][0])
    assert "Argument names: object, source" in prompt and "open fridge" not in prompt  # only this action's turns
    assert (report.stage, report.calls, report.usable, report.fell_back) == ("rules", 1, 1, 0)


def test_rules_invalid_items_are_dropped_and_a_wholly_invalid_answer_falls_back() -> None:
    answer = {"rules": [
        {"template": "You pick up the {arg.thing}.", "outcome": "success"},  # no such argument
        {"template": "You pick up the {object}.", "outcome": "success"},  # not a slot we know
        {"template": "You pick up the {arg.object}.", "outcome": "maybe"},  # bad outcome
        {"template": "Taken.", "effects": [{"op": "set", "path": "inventory", "value": 1}]},  # bad path
        {"template": "Taken.", "conditions": [{"arg": "colour", "op": "eq", "value": "red"}]},  # unknown arg
        {"outcome": "success"},  # no template
        "not an object",
        {"template": "You pick up the {arg.object} from the {arg.source}."},
        {"template": "You pick up the {arg.object} from the {arg.source}."},  # the same again
    ]}
    report = StageReport()
    rules = model_rules("take", EVIDENCE, ScriptedLLM(lambda m: json.dumps(answer)), fallback=deterministic_rules,
                        report=report)
    assert [(r.id, r.support) for r in rules] == [("take.m1", 2)]
    assert report.dropped == 8 and len(report.errors) == 8
    text = "\n".join(report.errors)
    for reason in ("{arg.thing}", "{object}", "'maybe'", "state path", "'colour'", "template", "the same rule again"):
        assert reason in text

    invalid = {"rules": answer["rules"][:7]}
    report = StageReport()
    rules = model_rules("take", EVIDENCE, ScriptedLLM(lambda m: json.dumps(invalid)), fallback=deterministic_rules,
                        report=report)
    assert rules == deterministic_rules("take", EVIDENCE) and report.fell_back == 1 and report.usable == 0


def test_rules_fall_back_on_model_errors_and_unusable_json_and_report_accumulates() -> None:
    report = StageReport()
    failing = ScriptedLLM(lambda m: "", fail=TransientLLMError("rate limited"))
    assert model_rules("take", EVIDENCE, failing, fallback=deterministic_rules, report=report) \
        == deterministic_rules("take", EVIDENCE)
    garbage = ScriptedLLM(lambda m: '{"rules": "none"')
    assert model_rules("open", EVIDENCE, garbage, fallback=deterministic_rules, report=report, retries=2) \
        == deterministic_rules("open", EVIDENCE)
    assert model_rules("fly", EVIDENCE, garbage, fallback=deterministic_rules, report=report) == []  # no evidence
    assert (report.calls, report.usable, report.fell_back) == (1 + 3, 0, 3)
    assert any("rate limited" in e for e in report.errors) and any("StructuredOutputError" in e for e in report.errors)
    assert len(garbage.batches) == 3  # the 'fly' action never reached the model


# --------------------------------------------------------------------------------------- notes


def test_notes_cite_shown_examples_by_number_and_ignore_invented_turn_ids() -> None:
    answer = {"notes": [
        {"kind": "convention", "text": "Objects are named with a number:  'apple 1'.", "examples": [1, 2, 40],
         "provenance": ["invented#3"]},
        {"kind": "format", "text": "Failed actions say 'Nothing happens.'", "examples": [3]},
        {"kind": "gossip", "text": "The agent is sad."},  # not a kind
        {"kind": "fact", "text": "objects are named with a number: 'apple 1'."},  # the same note
        {"kind": "fact", "text": "   "},
    ]}
    llm = ScriptedLLM(lambda m: json.dumps(answer))
    report = StageReport()
    notes = model_notes(EVIDENCE, llm, fallback=deterministic_notes, max_examples=3, report=report)
    prompt = user_text(llm.batches[0][0])
    shown = [line for line in prompt.splitlines() if line.startswith("[")]
    assert len(shown) == 3 and "open fridge 1" in prompt  # spread over actions: 'open' is shown
    assert [(n.id, n.kind) for n in notes] == [("note.m1", "convention"), ("note.m2", "format")]
    assert notes[0].text == "Objects are named with a number: 'apple 1'."
    assert all(turn in {e.turn_id for e in EVIDENCE} for n in notes for turn in n.provenance)
    assert len(notes[0].provenance) == 2 and "invented#3" not in notes[0].provenance
    assert report.dropped == 3 and report.usable == 1 and any("[40]" in e for e in report.errors)

    report = StageReport()
    assert model_notes(EVIDENCE, ScriptedLLM(lambda m: '{"notes": []}'), fallback=deterministic_notes,
                       report=report) == deterministic_notes(EVIDENCE)
    assert report.fell_back == 1 and report.calls == 1


# ------------------------------------------------------------------------------------- compare


def test_compare_stage_outputs_item_level_agreement() -> None:
    det = deterministic_rules("take", EVIDENCE)
    answer = {"rules": [{"template": "You pick up the {arg.object} from the {arg.source}."},
                        {"template": "You cannot take the {arg.object}.", "outcome": "failure"}]}
    mine = model_rules("take", EVIDENCE, ScriptedLLM(lambda m: json.dumps(answer)), fallback=deterministic_rules)
    result = compare_stage_outputs(det, mine)
    assert result["kind"] == "rules" and result["a"] == len(det) == 2 and result["b"] == 2
    assert result["matched"] == 1 and result["agreement"] == pytest.approx(1 / 3, abs=1e-4)
    assert result["only_b"] == ["take.m2"] and result["per_action"] == {"take": pytest.approx(1 / 3, abs=1e-4)}
    assert result["supporting_turns_jaccard"] == pytest.approx(2 / 3, abs=1e-4)
    assert compare_stage_outputs(det, det)["agreement"] == 1.0

    a = deterministic_extract(EVIDENCE)
    b = [e.model_copy(update={"source": "model"}) for e in a[:3]]
    b[0] = b[0].model_copy(update={"outcome": "failure:x"})
    result = compare_stage_outputs(a, b)
    assert (result["kind"], result["matched"], result["common"], result["only_a"]) == ("extract", 2, 3, ["e2#1"])
    assert result["outcome_agreement"] == pytest.approx(2 / 3, abs=1e-4) and result["differing"] == ["e1#0"]

    notes = compare_stage_outputs(deterministic_notes(EVIDENCE),
                                  [Note(id="n", text="4  transitions were RECORDED.", kind="other")])
    assert notes["matched"] == 1 and notes["mean_best_word_jaccard"] == 1.0
    assert compare_stage_outputs([], [])["kind"] == "empty"
    with pytest.raises(TypeError, match="cannot compare rules with notes"):
        compare_stage_outputs(det, deterministic_notes(EVIDENCE))


# ----------------------------------------------------------------------------- the tiny model


@pytest.mark.integration
def test_stages_run_end_to_end_on_the_tiny_model_and_every_call_is_logged(tmp_path: Path) -> None:
    if not (TINY / "model.safetensors").is_file():
        pytest.fail(f"the bundled tiny model is missing at {TINY}: run data_samples/make_tiny_model.py")
    episodes = [Episode.model_validate({k: v for k, v in orjson.loads(line).items() if k != "format"})
                for line in ALFWORLD.read_bytes().splitlines()]
    evidence = evidence_from_episodes(episodes)[:10]
    llm = open_llm(f"tiny:{TINY}", tmp_path, component="build")
    try:
        reports = {stage: StageReport() for stage in ("extract", "rules", "notes")}
        extractions = model_extract(evidence, llm, fallback=deterministic_extract, batch_size=8, max_tokens=256,
                                    report=reports["extract"])
        rules = model_rules("take", evidence, llm, fallback=deterministic_rules, max_examples=3, max_tokens=256,
                            report=reports["rules"])
        notes = model_notes(evidence, llm, fallback=deterministic_notes, max_examples=4, max_tokens=256,
                            report=reports["notes"])
    finally:
        llm.close()
    assert [e.turn_id for e in extractions] == [e.turn_id for e in evidence]
    for extraction in extractions:  # whatever answered, the objects are valid
        Extraction.model_validate(extraction.model_dump())
    assert rules and all(r.action == "take" for r in rules)
    for rule in rules:
        Rule.model_validate(rule.model_dump())
        assert rule.id.startswith("take.")
    assert notes and all(Note.model_validate(n.model_dump()) for n in notes)
    extract = reports["extract"]
    assert extract.usable + extract.fell_back == len(evidence) and extract.calls >= len(evidence)
    for stage in ("rules", "notes"):
        assert reports[stage].usable + reports[stage].fell_back == 1 and reports[stage].calls >= 1
    if reports["rules"].fell_back:
        assert rules == deterministic_rules("take", evidence)
    else:
        assert all(r.status == RuleStatus.TENTATIVE and ".m" in r.id for r in rules)
    comparison = compare_stage_outputs(deterministic_extract(evidence), extractions)
    assert comparison["kind"] == "extract" and 0.0 <= comparison["agreement"] <= 1.0

    calls = CallLog(tmp_path / "llm" / "calls.sqlite").calls(run=llm.run, component="build", limit=1000)
    assert len(calls) == sum(report.calls for report in reports.values())
    assert any(call.outputs and call.error is None for call in calls)  # the model really generated
    assert all(call.params.get("max_tokens") == 256 for call in calls)


def test_rule_slots_are_read_as_the_engine_renders_them() -> None:
    answer = {"rules": [
        {"template": "{{{arg.thing}}}", "outcome": "success"},  # a brace, a slot of no argument, a brace
        {"template": "You pick up the {arg.object} {{arg.thing}}.", "outcome": "success"},  # escaped: text
    ]}
    report = StageReport()
    rules = model_rules("take", EVIDENCE, ScriptedLLM(lambda m: json.dumps(answer)), fallback=deterministic_rules,
                        report=report)
    assert [r.template for r in rules] == ["You pick up the {arg.object} {{arg.thing}}."]
    assert report.dropped == 1 and "{arg.thing} names no argument" in report.errors[0]
