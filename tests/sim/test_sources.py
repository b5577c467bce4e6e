"""The answer sources as plug-ins: one registry the harness builds from and routing derives its tables from, a new
source in one file, and every prediction's audit naming the source that answered."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from worldsmith.sim import build_simulator_book, routing
from worldsmith.sim.harness import Harness, HarnessConfig
from worldsmith.sim.routing import choose_route
from worldsmith.sim.sources import (
    SOURCE_PLUGINS_VARIABLE,
    Answer,
    CandidateAnswer,
    SourceSpec,
    answer_source,
    build_order,
    register_source,
    routed_answers,
    source_specs,
    unregister_source,
)
from worldsmith.traces import Action, Episode, Observation, Turn
from worldsmith.worldbook import Worldbook
from worldsmith.worldbook.model import Evidence
from worldsmith.worldbook.route_table import RouteTable

PLUGIN = "last_of_action"


@pytest.fixture
def plugin() -> Iterator[str]:
    """The one-file source of `answer_source_plugin`, registered for one test and removed afterwards."""
    sys.modules.pop("answer_source_plugin", None)
    importlib.import_module("answer_source_plugin")
    yield PLUGIN
    unregister_source(PLUGIN)
    sys.modules.pop("answer_source_plugin", None)


def _book(turns: list[tuple[str, str]], *, episodes: int = 1) -> Worldbook:
    evidence = [Evidence(turn_id=f"e{e}#{i}", action=text.split("(")[0], action_text=text, observation=obs)
                for e in range(episodes) for i, (text, obs) in enumerate(turns)]
    return Worldbook(name="tools", evidence=evidence)


def _call(user: int) -> dict[str, Any]:
    return {"name": "get_user", "arguments": {"id": user}}


def _opening() -> Episode:
    return Episode(id="x", initial_observation=Observation(text="ready"), turns=[])


def test_the_routing_tables_are_derived_from_the_registry_and_keep_their_values() -> None:
    routed = routed_answers()
    assert routing.PRIORITY == tuple(answer.name for answer in routed)
    assert routing.PRIORITY == ("precondition", "precondition_enum", "repeat", "rule", "shell", "record_write", "record_absent",
                                "record_read", "projection", "record_invented", "entity", "query", "query_empty",
                                "query_invented", "fields", "scope", "inventory", "place_memory", "map", "place_view",
                                "place_form", "memory_state", "memory", "scope_form", "record_store", "aligned_evidence",
                                "place_evidence")
    assert routing._TRUSTED_UNMEASURED == {"precondition", "query", "rule", "shell", "record_write", "record_read",
                                           "projection", "entity", "place_memory", "map", "memory"}
    assert routing._PER_ACTION_ONLY == {"place_view", "place_form", "place_evidence", "aligned_evidence",
                                        "scope_form", "inventory", "fields", "precondition", "precondition_enum",
                                        "query", "query_empty", "record_read", "record_store", "projection",
                                        "record_absent", "record_invented", "query_invented", "repeat"}
    assert routing.ROUTE_NAMES["rule"] == "fast_path" and routing.ROUTE_NAMES["memory"] == "fallback:episode_memory"
    assert routing.ROUTE_NAMES["place_evidence"] == "evidence:place" and routing.ROUTE_NAMES["map"] == "state:map"
    specs = source_specs()
    assert [n for n, s in specs.items() if s.stage != "routed"] == ["model", "nearest"]
    built = [spec.name for spec in build_order(specs)]  # each after what it requires
    assert built.index("places") < built.index("inventory") < built.index("scope") < built.index("view_edits")


def test_a_source_in_one_file_answers_is_routed_and_named_in_the_audit(plugin: str) -> None:
    assert routing.PRIORITY[0] == plugin and plugin in routing._TRUSTED_UNMEASURED
    assert routing.ROUTE_NAMES[plugin] == f"state:{plugin}" and plugin not in routing._PER_ACTION_ONLY
    book = _book([("get_user(id=1)", '{"id": 1}'), ("get_user(id=2)", '{"id": 2}')])
    harness = Harness(book)
    harness.start(_opening())
    assert harness.predict(_call(3)).audit.source == "nearest_evidence"  # nothing seen yet in the episode
    harness.observe(_call(1), '{"id": 1, "seen": true}')
    prediction = harness.predict(_call(7))
    assert prediction.observation == '{"id": 1, "seen": true}'
    assert prediction.audit.source == plugin and prediction.audit.route == f"state:{plugin}"
    assert "what 'get_user' got last" in prediction.audit.notes
    assert harness.tracked()["last of action"] == {"actions": ["get_user"]}
    off = Harness(book, config=HarnessConfig(use_memory=False))  # the gate: episode state is not tracked
    off.start(_opening())
    off.observe(_call(1), '{"id": 1, "seen": true}')
    assert off.predict(_call(7)).audit.source == "nearest_evidence"


def test_the_route_table_records_a_new_source_and_routing_follows_its_record(plugin: str) -> None:
    episodes = [Episode(id=f"s{k}", env_id="tools", initial_observation=Observation(text="ready"), turns=[
        Turn(index=i, action=Action(name="get_user", arguments={"id": n + 10 * k}, raw=f"get_user(id={n + 10 * k})"),
             observation=Observation(text=f'{{"id": {n + 10 * k}}}')) for i, n in enumerate((1, 2, 3))])
        for k in range(4)]
    book = build_simulator_book(episodes, name="tools").book
    assert book.routes is not None
    # its every answer is the last user's record, not the asked one's: vetoed (`records`), so never even measured
    assert book.routes.stats("get_user", plugin, pooled=False) is None
    harness = Harness(book)
    harness.start(episodes[0].model_copy(update={"turns": episodes[0].turns[:1]}))
    prediction = harness.predict(episodes[0].turns[1].action)
    assert prediction.audit.source != plugin
    assert any(f"{plugin} not used: it answers about id=1, not the '2' asked" in note
               for note in prediction.audit.notes), prediction.audit.notes
    table = RouteTable(folds=2)
    for _ in range(3):
        table.record("look", plugin, exact=True, nearest_exact=False)
        table.record("look", "rule", exact=False, nearest_exact=False)
    chosen, _ = choose_route(table, "look", [CandidateAnswer("rule", "a"), CandidateAnswer(plugin, "b")])
    assert chosen is not None and chosen.source == plugin


def test_the_audit_names_the_source_on_every_path() -> None:
    book = _book([("look()", "A room."), ("open(door=1)", "Opened."), ("open(door=2)", "Opened.")], episodes=2)
    harness = Harness(book)
    harness.start(_opening())
    first = harness.predict("look()")
    assert (first.audit.source, first.audit.route) == ("nearest_evidence", "fallback:nearest_evidence")
    harness.observe("look()", "A bright room.")
    again = harness.predict("look()")
    assert (again.audit.source, again.audit.route) == ("memory", "fallback:episode_memory")
    none = Harness(Worldbook(name="empty"))
    none.start(_opening())
    nothing = none.predict("look()")
    assert nothing.audit.source is None and nothing.audit.route == "fallback:none"
    ablated = Harness(book, config=HarnessConfig(fallback=False))
    ablated.start(_opening())
    assert ablated.predict("look()").audit.source is None


def test_the_registry_refuses_clashes_and_missing_or_circular_requirements() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_source(SourceSpec("places", source_specs()["places"].factory))
    with pytest.raises(ValueError, match="answer name 'map'"):
        register_source(SourceSpec("atlas", source_specs()["places"].factory, answers=(Answer("map"),)))

    @answer_source("needs_nothing_there", requires=("no_such_source",))
    def _broken(context):  # type: ignore[no-untyped-def]
        raise AssertionError("never built")

    try:
        with pytest.raises(ValueError, match="requires 'no_such_source', which is not registered"):
            Harness(Worldbook(name="empty"))
    finally:
        unregister_source("needs_nothing_there")
    register_source(SourceSpec("loop_a", _broken, requires=("loop_b",)))
    register_source(SourceSpec("loop_b", _broken, requires=("loop_a",)))
    try:
        with pytest.raises(ValueError, match="in a circle: loop_a -> loop_b -> loop_a"):
            Harness(Worldbook(name="empty"))
    finally:
        unregister_source("loop_a")
        unregister_source("loop_b")
    assert "loop_a" not in source_specs() and "atlas" not in source_specs()


def _priority_in_a_fresh_process(plugins: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, SOURCE_PLUGINS_VARIABLE: plugins,
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    code = "from worldsmith.sim.routing import PRIORITY; print(','.join(PRIORITY))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)


def test_plugin_modules_named_in_the_environment_register_their_sources() -> None:
    listed = _priority_in_a_fresh_process("answer_source_plugin")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip().split(",")[:2] == [PLUGIN, "precondition"]
    missing = _priority_in_a_fresh_process("no_such_source_module")
    assert missing.returncode != 0
    assert f"${SOURCE_PLUGINS_VARIABLE} names 'no_such_source_module', which cannot be imported" in missing.stderr
