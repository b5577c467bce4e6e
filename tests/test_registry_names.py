"""Every kind users add is looked up the same way: a misspelt name says 'did you mean', and each kind's error keeps
the base its callers always caught (KeyError for environments, ValueError for formats, backends and world models)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from worldsmith.envs import UnknownEnvError, spec
from worldsmith.evals.metrics import METRIC_REGISTRY
from worldsmith.llm import backend
from worldsmith.sim import world_model_spec
from worldsmith.sim.sources.registry import ANSWER_SOURCES
from worldsmith.traces import EXPORTERS, Episode, Observation, export_episodes, get_importer, register_exporter
from worldsmith.util.registry import NotRegisteredError

CASES: list[tuple[Callable[[str], object], str, type[Exception], str]] = [
    (spec, "alfwrld", KeyError, "unknown environment 'alfwrld' (known: "),
    (get_importer, "opnai", ValueError, "unknown trace format 'opnai' (known: "),
    (lambda name: export_episodes([], name, Path("unused.jsonl")), "trace2evn", ValueError,
     "unknown export format 'trace2evn' (choose one of: "),
    (backend, "opeani", ValueError, "unknown backend 'opeani' (choose from hf, openai, "),
    (world_model_spec, "nearst", ValueError, "unknown world model 'nearst' (choose from harness, "),
    (METRIC_REGISTRY.get, "token_f", KeyError, "unknown metric 'token_f' (known: "),
    (ANSWER_SOURCES.get, "rule", KeyError, "unknown answer source 'rule' (known: "),
]
SUGGESTED = {"alfwrld": "alfworld", "opnai": "openai", "trace2evn": "trace2env", "opeani": "openai",
             "nearst": "nearest", "token_f": "token_f1", "rule": "rules"}


@pytest.mark.parametrize(("lookup", "name", "base", "start"), CASES, ids=[case[1] for case in CASES])
def test_a_misspelt_name_says_did_you_mean(lookup: Callable[[str], object], name: str, base: type[Exception],
                                          start: str) -> None:
    with pytest.raises(NotRegisteredError) as caught:
        lookup(name)
    assert isinstance(caught.value, base) and isinstance(caught.value, LookupError)
    message = str(caught.value)
    assert message.startswith(start), message
    assert f"did you mean {SUGGESTED[name]!r}" in message, message


def test_an_unknown_environment_is_still_an_unknown_env_error() -> None:
    with pytest.raises(UnknownEnvError):
        spec("nope")


def test_a_registered_exporter_writes_its_format(tmp_path: Path) -> None:
    @register_exporter("shout")
    def shout(episode: Episode) -> dict[str, object]:
        return {"id": episode.id, "opening": (episode.initial_observation.text or "").upper()}

    try:
        assert "shout" in EXPORTERS
        episode = Episode(id="e1", task="t", initial_observation=Observation(text="hello"), turns=[])
        assert export_episodes([episode], "shout", tmp_path / "out.jsonl") == 1
        assert orjson.loads((tmp_path / "out.jsonl").read_bytes()) == {"id": "e1", "opening": "HELLO"}
        with pytest.raises(ValueError, match="export format 'shout' is already registered"):
            register_exporter("shout", shout)
    finally:
        EXPORTERS.unregister("shout")
