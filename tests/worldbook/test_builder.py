"""The deterministic builder: facts, the rule engine, induction with state, review, validation, the pipeline."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import sample_episodes
from worldsmith.worldbook import Condition, Effect, Evidence, RuleStatus
from worldsmith.worldbook.build import BuildConfig, build_worldbook, cross_fit, leakage_check, trajectory_family
from worldsmith.worldbook.engine import (
    EffectError,
    apply_effects,
    check_conditions,
    match_template,
    render,
    resolve_path,
)
from worldsmith.worldbook.facts import extract_facts, learn_list_format, render_list
from worldsmith.worldbook.induce import induce_rules
from worldsmith.worldbook.model import ListFormat
from worldsmith.worldbook.rule_replay import ReviewConfig, check_rule, list_formats, replay_evidence, review_rules

episodes = sample_episodes


# ------------------------------------------------------------------------------------------ facts
def test_facts_from_enumerations_properties_and_json() -> None:
    facts = extract_facts("open", {"object": "fridge 1"},
                          "You open the fridge 1. The fridge 1 is open. In it, you see a apple 2, and a cup 1.")
    assert [(f.path, f.value) for f in facts] == [(["world", "contents", "fridge 1"], ["apple 2", "cup 1"]),
                                                  (["world", "status", "fridge 1"], "open")]
    facts = extract_facts("go", {"target": "bed 1"}, "You arrive at loc 3. On the bed 1, you see nothing.")
    assert [(f.path, f.value) for f in facts] == [(["world", "contents", "bed 1"], [])]
    assert extract_facts("inventory", {}, "You are carrying: a fried tomato.")[0].path == ["world", "inventory"]
    json_facts = extract_facts("cd", {"folder": "docs"}, '{"current_working_directory": "docs"}')
    assert [(f.path, f.value, f.kind) for f in json_facts] == [(["world", "current_working_directory"], "docs", "json")]
    assert extract_facts("cd", {}, '{"error": "no such folder"}') == []


def test_list_format_is_learned_and_written_back() -> None:
    fmt = learn_list_format(["On the desk 1, you see a pen 1, a cup 2, and a book 1.",
                             "On the bed 1, you see a pillow 1, and a laptop 1.", "In it, you see nothing."])
    assert fmt == ListFormat(article="a", separator=", ", last_separator=", and ", pair_separator=", and ",
                             empty="nothing")
    assert render_list(["pen 1", "cup 2", "book 1"], fmt) == "a pen 1, a cup 2, and a book 1"
    textworld = learn_list_format(["You see an apple and a key.", "You are carrying: an egg, a pan and a knife."])
    assert render_list(["egg", "pan"], textworld) == "an egg and a pan"


# ----------------------------------------------------------------------------------------- engine
def test_effects_apply_in_order_on_a_copy() -> None:
    state = {"world": {"contents": {"bed 1": ["book 1", "pen 1"]}, "count": 1}}
    args = {"object": "book 1", "source": "bed 1", "target": "desk 1"}
    after = apply_effects(state, [
        Effect(op="remove", path="world.contents.{arg.source}", value="{arg.object}"),
        Effect(op="append", path="world.contents[arg.target]", value="{arg.object}"),
        Effect(op="increment", path="world.count", value=2),
        Effect(op="decrement", path="world.other"),
        Effect(op="set", path="world.status.{arg.target}", value="open"),
        Effect(op="merge", path="world.meta", value={"a": 1}),
        Effect(op="create", path="world.made", value="{arg.object}"),
        Effect(op="delete", path="world.status.{arg.target}"),
    ], args)
    assert after["world"]["contents"] == {"bed 1": ["pen 1"], "desk 1": ["book 1"]}
    assert after["world"]["count"] == 3 and after["world"]["other"] == -1
    assert after["world"]["meta"] == {"a": 1} and after["world"]["made"] == "book 1"
    assert after["world"]["status"] == {}
    assert state["world"]["contents"]["bed 1"] == ["book 1", "pen 1"]  # untouched
    with pytest.raises(EffectError, match="is not a list"):
        apply_effects({"world": {"count": 1}}, [Effect(op="append", path="world.count", value=1)], {})
    with pytest.raises(EffectError, match="already exists"):
        apply_effects(after, [Effect(op="create", path="world.made", value=1)], {})
    assert resolve_path("world.files.{arg.name}", {"name": "report.v2.txt"}) == ["world", "files", "report.v2.txt"]



def test_effects_that_do_not_fit_the_state_raise_and_appends_keep_the_learned_order() -> None:
    state = {"world": {"count": "three", "meta": [1], "contents": {"bed 1": ["cd 2", "pen 1"]}}}
    for effect, message in [(Effect(op="increment", path="world.count"), "is not a number"),
                            (Effect(op="merge", path="world.meta", value={"a": 1}), "must both be objects"),
                            (Effect(op="set", path="world.status.{arg.target}", value="open"), "does not have")]:
        with pytest.raises(EffectError, match=message):
            apply_effects(state, [effect], {})
    append = Effect(op="append", path="world.contents.{arg.target}", value="{arg.object}")
    args = {"object": "book 1", "target": "bed 1"}
    assert apply_effects(state, [append], args)["world"]["contents"]["bed 1"] == ["cd 2", "pen 1", "book 1"]
    ordered = apply_effects(state, [append, append], args, formats={"world.contents": ListFormat(order="text")})
    assert ordered["world"]["contents"]["bed 1"] == ["book 1", "cd 2", "pen 1"]  # once, in its place

def test_conditions_tell_unknown_from_false() -> None:
    state = {"world": {"status": {"fridge 1": "closed"}, "contents": {"bed 1": ["book 1"]}}}
    closed = Condition(path="world.status.{arg.target}", op="eq", value="closed")
    assert check_conditions([closed], {"target": "fridge 1"}, state) is True
    assert check_conditions([closed], {"target": "cabinet 2"}, state) is None  # never seen: unknown
    assert check_conditions([Condition(path="world.status.{arg.target}", op="eq", value="open")],
                            {"target": "fridge 1"}, state) is False
    holds = Condition(path="world.contents.{arg.source}", op="contains", value="{arg.object}")
    assert check_conditions([holds], {"object": "book 1", "source": "bed 1"}, state) is True
    assert check_conditions([holds], {"object": "pen 1", "source": "bed 1"}, state) is False
    assert check_conditions([Condition(arg="object", op="matches", value=r"\d$")], {"object": "pen 1"}, state)


def test_templates_render_and_read_back_state() -> None:
    template = "You arrive at loc {world.go.loc[arg.target]}. On the {arg.target}, you see {world.contents[arg.target]}."
    state = {"world": {"go": {"loc": {"bed 1": "22"}}, "contents": {"bed 1": ["book 1", "pen 1"]}}}
    text = render(template, {"target": "bed 1"}, state)
    assert text == "You arrive at loc 22. On the bed 1, you see a book 1, and a pen 1."
    assert render(template, {"target": "desk 1"}, state) is None  # unknown state: no guess
    read = match_template(template, "You arrive at loc 7. On the desk 1, you see a cup 1.", {"target": "desk 1"})
    assert read == {("world", "go", "loc", "desk 1"): "7", ("world", "contents", "desk 1"): ["cup 1"]}
    assert match_template(template, "You arrive at loc 7. On the bed 1, you see a cup 1.", {"target": "desk 1"}) is None
    assert render("{{literal}} {arg.x}", {"x": "y"}, {}) == "{literal} y"


# ------------------------------------------------------------------------------------- induction
def _turns(episode: str, steps: list[tuple[str, dict[str, str], str]]) -> list[Evidence]:
    return [Evidence(turn_id=f"{episode}#{i}", action=action, arguments=args, action_text=action,
                     observation=observation, outcome="success") for i, (action, args, observation) in enumerate(steps)]


def _room(n: int) -> list[Evidence]:
    """A small world: look at a table, take the cup, check the table again, put the cup on a shelf."""
    return _turns(f"ep{n}", [
        ("go", {"target": "table 1"}, f"You arrive at loc {n}. On the table 1, you see a cup {n}, and a pen 1."),
        ("take", {"object": f"cup {n}", "source": "table 1"}, f"You pick up the cup {n} from the table 1."),
        ("go", {"target": "shelf 1"}, f"You arrive at loc {n + 10}. On the shelf 1, you see nothing."),
        ("put", {"object": f"cup {n}", "target": "shelf 1"}, f"You put the cup {n} in/on the shelf 1."),
        ("go", {"target": "table 1"}, f"You arrive at loc {n}. On the table 1, you see a pen 1."),
        ("go", {"target": "shelf 1"}, f"You arrive at loc {n + 10}. On the shelf 1, you see a cup {n}."),
    ])


def test_effects_on_lists_are_kept_only_when_later_observations_confirm_them() -> None:
    evidence = [item for n in range(1, 5) for item in _room(n)]
    rules = {rule.action: rule for rule in review_rules(induce_rules(evidence), evidence)}
    take, put, go = rules["take"], rules["put"], rules["go"]
    assert take.template == "You pick up the {arg.object} from the {arg.source}."
    assert [(e.op, e.path, e.value) for e in take.effects] == [("remove", "world.contents.{arg.source}", "{arg.object}")]
    assert [(e.op, e.path, e.value) for e in put.effects] == [("append", "world.contents.{arg.target}", "{arg.object}")]
    assert Condition(path="world.contents.{arg.source}", op="contains", value="{arg.object}") in take.conditions
    assert go.template == "You arrive at loc {world.go.loc[arg.target]}. On the {arg.target}, you see " \
                          "{world.contents[arg.target]}."
    assert all(rule.status == RuleStatus.SUPPORTED for rule in rules.values())
    # Replayed with their observed prefixes, the revisits are now predicted exactly.
    report = replay_evidence(list(rules.values()), _room(7))
    revisits = [turn for turn in report.turns if turn.turn_id in ("ep7#4", "ep7#5")]
    assert [turn.exact for turn in revisits] == [True, True], [(t.rendered, t.observed) for t in revisits]


def test_a_counterexample_demotes_a_rule() -> None:
    evidence = [item for n in range(1, 5) for item in _room(n)]
    odd = _turns("odd", [("go", {"target": "table 1"}, "You arrive at loc 1. On the table 1, you see a pen 1."),
                         ("take", {"object": "pen 1", "source": "table 1"}, "The pen 1 is glued down.")])
    rules = {r.id: r for r in review_rules(induce_rules(evidence + odd), evidence + odd)}
    take = next(r for r in rules.values() if r.action == "take" and r.support >= 4)
    assert take.status == RuleStatus.CONFLICTED and take.counterexamples == ["odd#1"]
    assert take.provenance.contradicting == ["odd#1"]


# ----------------------------------------------------------------------------- on the real samples
def test_alfworld_build_has_executable_rules_with_provenance() -> None:
    eps = episodes("alfworld")
    result = build_worldbook(eps, name="alf")
    book = result.book
    turn_ids = {turn.id for episode in eps for turn in episode.turns}
    supported = book.supported_rules()
    assert {r.action for r in supported} >= {"go", "take", "put"}
    for rule in supported:
        assert rule.provenance.supporting and set(rule.provenance.supporting) <= turn_ids
    take = next(r for r in supported if r.action == "take")
    assert take.template == "You pick up the {arg.object} from the {arg.source}."
    go = max((r for r in book.rules if r.action == "go"), key=lambda r: r.support)
    assert "{world.contents[arg.target]}" in go.template
    assert any(p.path == "world.contents.{key}" and p.list_format for p in book.state_schema.paths)
    assert book.action_schema.get("take").pattern == "^take (?P<object>.+?) from (?P<source>.+?)$"
    assert {c.action for c in book.contracts} == {r.action for r in book.rules}
    assert any(note.kind == "format" for note in book.notes) and book.demonstrations
    replay = check_rule(book, take)
    assert replay.applicable == replay.matched > 0 and replay.failed == 0


def test_provenance_keeps_the_first_turns_and_counts_them_all() -> None:
    """A storage cap must not read as a count: where turns were dropped, the totals say how many there were."""
    from worldsmith.worldbook import RuleProvenance

    capped = RuleProvenance.capped([f"e#{i}" for i in range(5)], ["e#9"], cap=2)
    assert (capped.supporting, capped.supporting_total) == (["e#0", "e#1"], 5)
    assert (capped.contradicting, capped.contradicting_total) == (["e#9"], None)
    assert (capped.count("supporting"), capped.count("contradicting")) == (5, 1)
    assert capped.model_dump() == {"supporting": ["e#0", "e#1"], "contradicting": ["e#9"], "supporting_total": 5}
    assert RuleProvenance(supporting=["e#0"]).model_dump() == {"supporting": ["e#0"], "contradicting": []}
    with pytest.raises(ValueError, match="less than the 2 turns listed"):
        RuleProvenance(supporting=["e#0", "e#1"], supporting_total=1)
    book = build_worldbook(episodes("alfworld"), name="alf").book
    reviewed = review_rules(book.rules, book.evidence, ReviewConfig(max_provenance=2), formats=list_formats(book))
    take = max((r for r in reviewed if r.action == "take"), key=lambda r: r.support)
    assert len(take.provenance.supporting) == 2 and take.provenance.count("supporting") == take.support > 2


def test_cross_fitting_holds_families_out_and_reports_validation() -> None:
    eps = episodes("alfworld")
    folds = cross_fit(eps, name="alf", folds=3)
    summary = folds.summary()
    assert summary["folds"] == 3 and summary["pooled"]["totals"]["turns"] == sum(len(e.turns) for e in eps)
    assert all(fold["leakage_ok"] for fold in summary["per_fold"])
    assert summary["pooled"]["common_actions"]["coverage"] > 0.5
    held = [e for e in eps if trajectory_family(e) == trajectory_family(eps[0])]
    leak = leakage_check(eps, held)
    assert not leak.ok and leak.shared_episodes == [eps[0].id] and leak.against == "construction"


@pytest.mark.parametrize("env", ["textworld", "bfcl", "shell", "scienceworld"])
def test_builds_on_other_environments(env: str) -> None:
    eps = episodes(env)
    book = build_worldbook(eps, name=env).book
    turn_ids = {turn.id for episode in eps for turn in episode.turns}
    assert book.rules and all(set(r.provenance.supporting) <= turn_ids for r in book.rules)
    assert len(book.evidence) == len(turn_ids)
    if env == "bfcl":
        json_paths = {p.path for p in book.state_schema.paths}
        assert "world.current_working_directory" in json_paths


def test_stages_resume_from_their_cache(tmp_path: Path) -> None:
    eps = episodes("alfworld")
    first = build_worldbook(eps, name="alf", cache_dir=tmp_path)
    assert not any(report["cached"] for report in first.stage_reports.values())
    second = build_worldbook(eps, name="alf", cache_dir=tmp_path)
    assert all(report["cached"] for report in second.stage_reports.values())
    assert second.book == first.book
    (next(tmp_path.glob("review-*.json"))).write_text("{broken")  # a damaged entry is recomputed
    assert build_worldbook(eps, name="alf", cache_dir=tmp_path).book == first.book


def test_model_backed_stages_run_on_the_tiny_model_and_fall_back(tmp_path: Path) -> None:
    eps = episodes("alfworld")[:2]
    result = build_worldbook(eps, name="alf", workspace_root=tmp_path,
                             config=BuildConfig(llm="tiny:data_samples/models/tiny"))
    rules_report = result.stage_reports["rules"]["model"]
    assert rules_report["calls"] > 0 and rules_report["usable"] + rules_report["fell_back"] > 0
    assert "compared_with_deterministic" in result.stage_reports["rules"]
    # the deterministic fallback keeps the review usable (two families: `worldbook.holdout` keeps none supported)
    assert any(rule.executable for rule in result.artifacts["reviewed"])
    assert (tmp_path / "llm" / "calls.sqlite").exists()


def test_the_extract_stage_runs_on_a_model_when_asked(tmp_path: Path) -> None:
    eps = episodes("alfworld")[:1]
    result = build_worldbook(eps, name="alf", workspace_root=tmp_path,
                             config=BuildConfig(llm="tiny:data_samples/models/tiny", model_stages=("extract",)))
    extract_report = result.stage_reports["extract"]["model"]
    assert extract_report["calls"] > 0 and extract_report["usable"] + extract_report["fell_back"] > 0
    assert "model" not in result.stage_reports["rules"]  # only the stages asked for run on the model
    assert result.book.rules  # transitions the model gets wrong fall back to the deterministic extract
    with pytest.raises(ValueError, match="'review' cannot run on a model"):
        BuildConfig(llm="tiny:m", model_stages=("rules", "review"))


def test_extract_stage_reports_candidate_changes_and_concrete_paths_keep_their_keys() -> None:
    from worldsmith.worldbook.build import deterministic_extract

    evidence = _room(1)
    extractions = {x.turn_id: x for x in deterministic_extract(evidence)}
    first, revisit = extractions["ep1#0"], extractions["ep1#4"]
    assert [(c.op, c.path, c.value) for c in first.changes] == [("set", "world.contents[table 1]", ["cup 1", "pen 1"])]
    assert [(c.path, c.value) for c in revisit.changes] == [("world.contents[table 1]", ["pen 1"])]
    assert extractions["ep1#1"].changes == []  # "You pick up ..." shows no state
    after = apply_effects({}, [Effect(op="set", path="world.files[report.v2.txt]", value=1)], {})
    assert after == {"world": {"files": {"report.v2.txt": 1}}}


def test_review_narrows_a_rule_by_a_contrast_before_demoting_it() -> None:
    evidence = [item for n in range(1, 5) for item in _room(n)]
    stuck = [item for n in (8, 9) for item in _turns(f"stuck{n}", [
        ("go", {"target": "table 1"}, "You arrive at loc 1. On the table 1, you see a vase 1."),
        ("take", {"object": "vase 1", "source": "table 1"}, "The vase 1 is glued down.")])]
    rules = review_rules(induce_rules(evidence + stuck), evidence + stuck)
    take = next(r for r in rules if r.action == "take" and r.support >= 4)
    assert Condition(arg="object", op="ne", value="vase 1") in take.conditions
    assert take.status == RuleStatus.SUPPORTED and take.counterexamples == []
