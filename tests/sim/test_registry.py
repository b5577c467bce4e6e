"""The world-model registry: one name per simulator, listed and built the same way by every front end."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sim_support import book_from

from worldsmith.cli.main import build_parser
from worldsmith.evals.protocols import make_method, method_kind, needs_llm
from worldsmith.llm.base import LLM
from worldsmith.sim import NearestEvidence, WorldModel, registry
from worldsmith.sim.registry import (
    PLUGINS_VARIABLE,
    UnknownWorldModelError,
    canonical_world_model,
    make_world_model,
    world_model,
    world_model_names,
    world_model_spec,
    world_models,
)
from worldsmith.traces import Episode
from worldsmith.worldbook import Worldbook

PLUGIN = "test-plugin-nearest"


@pytest.fixture(scope="module")
def book(bfcl: list[Episode]) -> Worldbook:
    return book_from(bfcl, "bfcl")


@pytest.fixture
def plugin() -> Iterator[str]:
    """A world model registered as a researcher's plugin would, removed afterwards."""

    @world_model(PLUGIN, description="nearest evidence under another name", aliases=("test-plugin-old",))
    def _build(book: Worldbook, *, llm: LLM | None = None, **options: Any) -> WorldModel:
        return NearestEvidence(book, **options)

    yield PLUGIN
    registry._REGISTRY.unregister(PLUGIN)
    registry._ALIASES.pop("test-plugin-old", None)


def test_the_built_in_world_models_are_registered_under_one_name_each() -> None:
    harness_kinds = ["harness", "harness-no-book", "harness-no-state", "harness-single-shot", "harness-no-fallback"]
    with_model = [f"{kind}+llm" for kind in harness_kinds]
    assert world_model_names() == [*harness_kinds, *with_model, "nearest", "direct", "rag", "worldbook-prompt"]
    specs = world_models()
    # a method is what it is named: each harness kind without a model, and its `+llm` twin always with one
    assert {name for name, spec in specs.items() if spec.llm == "required"} == {*with_model, "direct", "rag",
                                                                               "worldbook-prompt"}
    assert not [name for name, spec in specs.items() if spec.llm == "optional"]
    assert all(spec.name == name and spec.description for name, spec in specs.items())


def test_old_names_are_aliases_of_the_one_name(book: Worldbook) -> None:
    with pytest.deprecated_call(match="world model name 'book' is deprecated: use 'worldbook-prompt'"):
        assert canonical_world_model("book") == "worldbook-prompt"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the one name warns about nothing
        assert canonical_world_model("worldbook-prompt") == "worldbook-prompt"
        assert canonical_world_model("no-such-model") == "no-such-model"  # other text left for the error to name
    with pytest.deprecated_call():
        assert canonical_world_model("harness-schema") == "harness-no-book"
        assert canonical_world_model("harness_schema_only") == "harness-no-book"
        assert world_model_spec("harness-schema") is world_model_spec("harness-no-book")
        # the evaluation's methods are the same names; its old vocabulary maps onto them
        assert method_kind("book") == "worldbook-prompt" and method_kind("harness-no-book") == "harness-no-book"
        assert needs_llm("book") and not needs_llm("harness-schema")


def test_a_built_model_carries_its_registered_name(book: Worldbook) -> None:
    """Sessions, audits and reports see the one name, whatever the class calls itself or the alias used."""
    assert make_world_model("nearest", book).name == "nearest"
    with pytest.deprecated_call():
        assert make_world_model("harness-schema", book).name == "harness-no-book"
    assert make_world_model("harness-no-state", book).name == "harness-no-state"
    assert make_method("harness-no-book", book).name == "harness-no-book"


def test_an_unknown_name_is_refused_naming_the_known_ones(book: Worldbook) -> None:
    with pytest.raises(UnknownWorldModelError, match=r"unknown world model 'oracle' \(choose from harness, "):
        make_world_model("oracle", book)
    with pytest.raises(ValueError, match="worldbook-prompt"):
        world_model_spec("bok")
    with pytest.raises(ValueError, match="unknown method 'bok'.*worldbook-prompt"):
        method_kind("bok")


def test_a_model_baseline_without_a_model_is_refused(book: Worldbook) -> None:
    with pytest.raises(ValueError, match="world model 'worldbook-prompt' needs a model"):
        with pytest.deprecated_call():
            make_world_model("book", book)


def test_a_taken_name_or_alias_is_refused(plugin: str) -> None:
    def build(book: Worldbook, *, llm: LLM | None = None, **options: Any) -> WorldModel:
        return NearestEvidence(book)

    for name, aliases in ((plugin, ()), ("harness", ()), ("fresh-name", ("book",)), ("test-plugin-old", ())):
        with pytest.raises(ValueError, match="already registered"):
            world_model(name, description="x", aliases=aliases)(build)
    assert "fresh-name" not in world_models()


def test_a_registered_model_reaches_every_front_end(plugin: str, book: Worldbook) -> None:
    """What is registered is what the CLI, the evaluation and the side-by-side view offer (the workbench's
    choices: tests/workbench/test_simulate_page.py and test_eval_components.py)."""
    assert plugin in world_model_names()
    with pytest.deprecated_call():
        model = make_method("test-plugin-old", book)
    assert isinstance(model, NearestEvidence) and model.name == plugin
    assert method_kind(plugin) == plugin and not needs_llm(plugin)

    parser = build_parser()
    assert parser.parse_args(["simulate", "bfcl", "--session", "s1", "--action", "look", "--model", plugin]).model == plugin
    with pytest.deprecated_call():
        old = parser.parse_args(["simulate", "bfcl", "--session", "s1", "--action", "look", "--model", "book"])
    assert old.model == "worldbook-prompt"
    assert parser.parse_args(["serve", "bfcl", "--http", "--method", plugin]).method == plugin
    assert plugin in _help(parser, "eval", "methods")
    with warnings.catch_warnings(), pytest.raises(SystemExit):
        warnings.simplefilter("ignore")
        parser.parse_args(["simulate", "bfcl", "--session", "s1", "--action", "look", "--model", "oracle"])

    from worldsmith.sim.sidebyside import SideBySide

    view = SideBySide.from_kinds(book, [plugin, "nearest"])
    assert list(view.methods) == [plugin, "nearest"]


def _help(parser: argparse.ArgumentParser, command: str, dest: str) -> str:
    """The help text of one option of one command (as given, before argparse wraps it)."""
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return next(a.help or "" for a in subparsers.choices[command]._actions if a.dest == dest)


def _names_in_a_fresh_process(plugins: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, PLUGINS_VARIABLE: plugins,
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    code = "from worldsmith.sim import world_model_names; print(','.join(world_model_names()))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)


def test_plugin_modules_named_in_the_environment_register_their_world_models() -> None:
    """How a researcher's world model reaches the CLI, the workbench and worker processes."""
    listed = _names_in_a_fresh_process("world_model_plugin")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip().split(",")[-2:] == ["worldbook-prompt", "plugin-from-env"]
    missing = _names_in_a_fresh_process("no_such_plugin_module")
    assert missing.returncode != 0
    assert "$WORLDSMITH_WORLD_MODEL_PLUGINS names 'no_such_plugin_module', which cannot be imported" in missing.stderr
