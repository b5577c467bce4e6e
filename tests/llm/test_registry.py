"""The LLM backend registry: specs, `make_llm` and `worldsmith llm models` follow what is registered."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from worldsmith.cli.main import main
from worldsmith.llm import BackendSpec, backend, backends, make_llm, parse_spec, register_backend, resolve_spec
from worldsmith.llm import registry as backend_registry

HERE = __name__  # this module, as pytest imported it (make_llm finds it in sys.modules)


class EchoLLM:
    """Built by the plugin backend below; only its spec matters to these tests."""

    def __init__(self, spec: object) -> None:
        self.spec = spec


def from_spec(spec: object) -> EchoLLM:
    return EchoLLM(spec)


@pytest.fixture
def plugin() -> Iterator[BackendSpec]:
    spec = register_backend(BackendSpec("echotest", f"{HERE}:from_spec", "orjson", "echotest:NAME"))
    yield spec
    backend_registry._REGISTRY.unregister("echotest")


def test_the_built_in_backends_are_registered() -> None:
    assert list(backends()) == ["tiny", "hf", "vllm", "openai"]
    assert backend("tiny").local_folder and backend("openai").base_url and not backend("vllm").local_folder
    assert backend("openai").entry_point == "worldsmith.llm.openai_backend:from_spec"


def test_a_registered_backend_is_parsed_built_and_listed(plugin: BackendSpec, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    parsed = parse_spec("echotest:some-model?temperature=0.5")
    assert (parsed.kind, parsed.model, parsed.options) == ("echotest", "some-model", {"temperature": 0.5})
    llm = make_llm("echotest:some-model")
    assert isinstance(llm, EchoLLM) and llm.spec.model == "some-model"
    assert resolve_spec("echotest:relative/name", tmp_path) == "echotest:relative/name"  # not a local folder kind
    assert main(["llm", "models", "--workspace", str(tmp_path / "ws"), "--json"]) == 0
    listed = {b["kind"]: b for b in orjson.loads(capsys.readouterr().out)["backends"]}
    assert listed["echotest"] == {"kind": "echotest", "spec": "echotest:NAME", "available": True, "package": "orjson"}
    assert set(listed) == {"tiny", "hf", "vllm", "openai", "echotest"}


def test_a_taken_or_malformed_kind_is_refused(plugin: BackendSpec) -> None:
    for kind in ("echotest", "openai"):
        with pytest.raises(ValueError, match=f"backend '{kind}' is already registered"):
            register_backend(BackendSpec(kind, f"{HERE}:from_spec", "orjson", "x"))
    with pytest.raises(ValueError, match="lower-case identifier"):
        register_backend(BackendSpec("Bad:Kind", f"{HERE}:from_spec", "orjson", "x"))
    assert backend("openai").package == "openai"  # the refused registration changed nothing


def test_an_unknown_backend_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"model spec 'foo:bar': unknown backend 'foo' \(choose from hf, openai, "):
        parse_spec("foo:bar")
    with pytest.raises(ValueError, match="unknown backend 'foo'"):
        backend("foo")
