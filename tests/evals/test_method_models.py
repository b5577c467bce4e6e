"""A method is what it is named: a run's model reaches only the methods that declare they use one, and the report
names each method's model (the spec and what it was trained on, or none), old runs included."""

from __future__ import annotations

import json
from pathlib import Path

from worldsmith.evals import EvalConfig, EvalReport, run_eval
from worldsmith.evals.protocols import make_method, method_models, takes_llm
from worldsmith.sim import world_model_spec
from worldsmith.sim.harness import Harness
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.worldbook import Worldbook


def test_harness_is_registered_without_a_model_and_harness_llm_with_one() -> None:
    assert world_model_spec("harness").llm == "never" and not takes_llm("harness")
    assert world_model_spec("harness+llm").llm == "required" and takes_llm("harness+llm")
    for ablation in ("harness-no-book", "harness-no-state", "harness-single-shot", "harness-no-fallback"):
        assert world_model_spec(ablation).llm == "never" and world_model_spec(f"{ablation}+llm").llm == "required"


def test_make_method_never_hands_the_harness_a_model(alfworld_book: Worldbook, tiny_spec: str) -> None:
    from worldsmith.llm import make_llm

    llm = make_llm(tiny_spec)
    try:
        plain = make_method("harness", alfworld_book, llm=llm)
        with_model = make_method("harness+llm", alfworld_book, llm=llm)
    finally:
        llm.close()
    assert isinstance(plain, Harness) and plain.llm is None and plain.name == "harness"
    assert isinstance(with_model, Harness) and with_model.llm is llm and with_model.name == "harness+llm"


def test_an_eval_with_a_model_gives_it_only_to_the_methods_that_use_one(sample, tiny_spec: str,
                                                                         tmp_path: Path) -> None:
    episodes = sample("textworld")
    evaluated = [e for e in episodes if "treasure_hunter" in e.id]  # 2 turns
    built = [e for e in episodes if e not in evaluated]
    book = build_simulator_book(built, name="textworld").book
    config = EvalConfig(name="models", book="textworld", dataset="samples",
                        methods=["harness", "harness+llm", "direct"], protocol="next-obs", llm=tiny_spec,
                        resamples=200)
    run = run_eval(config, tmp_path / "ws", book=book, episodes=evaluated, construction=built)
    records = run.records
    harness = records[records["method"] == "harness"]
    assert len(harness) == len(evaluated[0].turns) and (harness["model_calls"] == 0).all()
    assert (harness["prompt_tokens"] == 0).all()
    assert records[records["method"] == "harness+llm"]["model_calls"].sum() > 0
    assert (records[records["method"] == "direct"]["model_calls"] == 1).all()

    models = run.report.method_models()
    assert models["harness"].model == "none" and models["harness"].trained_on is None
    assert models["direct"].model == tiny_spec and models["harness+llm"].model == tiny_spec
    assert "train-tiny" in (models["direct"].trained_on or "")  # from the model folder's worldsmith_tiny.json
    written = json.loads(run.report_path.read_text(encoding="utf-8"))
    assert written["models"]["harness"] == {"model": "none", "trained_on": None}
    markdown = (run.directory / "report.md").read_text(encoding="utf-8")
    assert "harness `none`" in markdown and f"direct `{tiny_spec}`" in markdown


def test_an_old_report_says_which_model_each_method_had_by_the_rule_of_its_time() -> None:
    """Runs made before reports named each method's model: the harness then ran the run's model."""
    old = EvalReport.model_validate({"config": {"llm_spec": "tiny:/m", "methods": ["harness", "nearest", "direct"]},
                                     "counts": {"harness": 2, "nearest": 2, "direct": 2}})
    models = old.method_models()
    assert {m: e.model for m, e in models.items()} == {"harness": "tiny:/m", "nearest": "none", "direct": "tiny:/m"}
    assert not any(e.recorded for e in models.values())
    without = EvalReport.model_validate({"config": {"llm_spec": None}, "counts": {"harness": 1}})
    assert without.method_models()["harness"].model == "none"


def test_method_models_without_a_model_are_all_none() -> None:
    assert method_models(["harness", "nearest"], None) == {"harness": {"model": "none", "trained_on": None},
                                                           "nearest": {"model": "none", "trained_on": None}}
