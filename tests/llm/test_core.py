"""The model layer's logic on a scripted backend: specs, cache, call log, tracking, structured output.

Real backends have their own integration tests (test_hf, test_vllm, test_openai); this one checks
the machinery around every call with a backend whose answers the test chooses.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pydantic import BaseModel

from worldsmith.llm import (
    CallLog,
    Completion,
    GenerationParams,
    LLMBase,
    LLMError,
    ResponseCache,
    StructuredOutputError,
    TrackedLLM,
    chat_structured,
    extract_json,
    load_config,
    parse_spec,
)


class Scripted(LLMBase):
    """Answers from a list, in order; records what it was asked."""

    def __init__(self, answers: list[str]) -> None:
        self.spec, self.backend, self.model = "scripted:x", "scripted", "x"
        self.answers = list(answers)
        self.batches: list[list[list[dict]]] = []

    def generate(self, conversations, params):
        self.batches.append(conversations)
        out = []
        for _ in conversations:
            if not self.answers:
                raise LLMError("out of answers")
            out.append([Completion(text=self.answers.pop(0), prompt_tokens=7, completion_tokens=3, latency_s=0.5,
                                   model="x", backend="scripted") for _ in range(params.n)])
        return out


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_parse_spec_forms_and_errors(tmp_path: Path) -> None:
    spec = parse_spec("openai:gpt-4o-mini@http://127.0.0.1:8000/v1?max_concurrency=4&api_key_env=MY_KEY")
    assert (spec.kind, spec.model, spec.base_url) == ("openai", "gpt-4o-mini", "http://127.0.0.1:8000/v1")
    assert spec.options == {"max_concurrency": 4, "api_key_env": "MY_KEY"}
    assert parse_spec(f"hf:{tmp_path}").model == str(tmp_path)
    assert parse_spec("vllm:Qwen/Qwen2.5-0.5B-Instruct").kind == "vllm"
    for bad, message in [("gpt-4o", "no backend prefix"), ("foo:bar", "unknown backend 'foo'"),
                         ("tiny:/no/such/dir", "no model folder"), ("openai:@http://x", "name the model"),
                         ("openai:m@ftp://x", "must start with http"), ("", "non-empty")]:
        with pytest.raises(ValueError, match=message):
            parse_spec(bad)


def test_load_config_names_the_bad_entry(tmp_path: Path) -> None:
    good = tmp_path / "models.toml"
    good.write_text('[models.local]\nspec = "openai:m@http://127.0.0.1:9/v1"\nmax_concurrency = 2\n')
    assert load_config(good)["local"].options == {"max_concurrency": 2}
    bad = tmp_path / "bad.toml"
    bad.write_text('[models.broken]\nspec = "nope"\n')
    with pytest.raises(ValueError, match=r"bad.toml: \[models.broken\]: .*no backend prefix"):
        load_config(bad)


def test_generation_params_are_checked() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        GenerationParams(max_tokens=0)
    with pytest.raises(ValueError, match="top_p"):
        GenerationParams(top_p=0)
    assert GenerationParams(stop="\n").stop == ("\n",)
    with pytest.raises(ValueError, match="message 1: role"):
        Scripted(["a"]).chat([{"role": "user", "content": "x"}, {"role": "robot", "content": "y"}])


def test_cache_makes_reruns_free_and_is_seed_aware(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite")
    backend = Scripted(["one", "two", "three", "four"])
    llm = TrackedLLM(backend, cache=cache)
    assert llm.chat(user("hi"))[0].text == "one"
    again = llm.chat(user("hi"))[0]
    assert again.text == "one" and again.cached and again.latency_s == 0.0
    assert again.extra["original_latency_s"] == 0.5
    assert llm.model_calls == 1
    assert llm.chat(user("hi"), max_tokens=10)[0].text == "two"  # other parameters, other key
    assert llm.chat(user("hi"), temperature=0.8)[0].text == "three"  # unseeded sampling is not cached
    assert llm.chat(user("hi"), temperature=0.8)[0].text == "four"
    backend.answers = ["five"]
    assert llm.chat(user("hi"), temperature=0.8, seed=1)[0].text == "five"
    assert llm.chat(user("hi"), temperature=0.8, seed=1)[0].text == "five"  # seeded: cached
    # A fresh process (a new cache object on the same file) sees the entries.
    assert TrackedLLM(Scripted([]), cache=ResponseCache(tmp_path / "cache.sqlite")).chat(user("hi"))[0].text == "one"


def test_batches_send_only_the_misses_in_one_call(tmp_path: Path) -> None:
    backend = Scripted(["a", "b", "c"])
    llm = TrackedLLM(backend, cache=ResponseCache(tmp_path / "c.sqlite"))
    llm.chat(user("x"))
    out = llm.chat_many([user("x"), user("y"), user("z")])
    assert [c[0].text for c in out] == ["a", "b", "c"]
    assert [len(batch) for batch in backend.batches] == [1, 2]


def test_call_log_records_component_usage_errors_and_searches(tmp_path: Path) -> None:
    log = CallLog(tmp_path / "calls.sqlite")
    llm = TrackedLLM(Scripted(["the kettle boils", "opened the door"]), log=log, run="r1", component="builder")
    llm.chat(user("heat water"))
    llm.for_component("harness").chat(user("open door"))
    with pytest.raises(LLMError):
        llm.chat(user("one more"))
    runs = log.runs()
    assert runs[0]["run"] == "r1" and runs[0]["calls"] == 3 and runs[0]["errors"] == 1
    assert runs[0]["prompt_tokens"] == 14 and runs[0]["completion_tokens"] == 6
    found = log.calls(run="r1", search="kettle")
    assert [c.component for c in found] == ["builder"] and found[0].output_text == "the kettle boils"
    assert [c.messages[0]["content"] for c in log.calls(search='door "')] == ["open door"]  # quotes are safe
    assert log.calls(component="harness")[0].outputs[0]["text"] == "opened the door"
    assert "out of answers" in log.calls(run="r1")[0].error


def test_call_log_is_safe_across_threads(tmp_path: Path) -> None:
    log = CallLog(tmp_path / "calls.sqlite")
    llm = TrackedLLM(Scripted([f"a{i}" for i in range(40)]), log=log, run="t")
    lock = threading.Lock()

    def work(i: int) -> None:
        with lock:  # the scripted backend is not thread-safe; the log must be
            llm.chat(user(f"q{i}"))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert log.count(run="t") == 40


class Move(BaseModel):
    verb: str
    target: str


def test_extract_json_finds_fenced_and_embedded_values() -> None:
    assert extract_json('{"a": 1}') == {"a": 1}
    assert extract_json('Sure!\n```json\n{"a": 2}\n```') == {"a": 2}
    assert extract_json('The answer is {"a": 3} as requested.') == {"a": 3}
    with pytest.raises(ValueError, match="no JSON value"):
        extract_json("no json here")


def test_structured_output_repairs_then_succeeds() -> None:
    backend = Scripted(['{"verb": "open"', 'here: {"verb": "open", "target": "door"}'])
    move, used = chat_structured(backend, user("what next?"), Move)
    assert move == Move(verb="open", target="door") and len(used) == 2
    repair = backend.batches[1][0]
    assert repair[-2] == {"role": "assistant", "content": '{"verb": "open"'}
    assert "schema" in repair[-1]["content"] and "target" in repair[-1]["content"]


def test_structured_output_gives_up_with_a_typed_error() -> None:
    backend = Scripted(['{"verb": 1}', "nope", '["x"]'])
    with pytest.raises(StructuredOutputError, match="no valid Move after 3 attempts") as caught:
        chat_structured(backend, user("q"), Move, retries=2)
    assert caught.value.last_output == '["x"]'
    assert caught.value.errors


def test_a_models_toml_name_opens_its_model_wherever_a_spec_is_taken(tmp_path: Path) -> None:
    from worldsmith.llm import open_llm, resolve_spec

    tiny = Path(__file__).resolve().parents[2] / "data_samples" / "models" / "tiny"
    (tmp_path / "models.toml").write_text(f'[models.mine]\nspec = "tiny:{tiny}"\n')
    assert resolve_spec("mine", tmp_path) == f"tiny:{tiny}"
    assert resolve_spec("openai:m@http://127.0.0.1:9/v1", tmp_path) == "openai:m@http://127.0.0.1:9/v1"
    llm = open_llm("mine", tmp_path, component="test")  # build --llm, policies, eval awb and pages all call this
    try:
        [completion] = llm.chat(user("> look\n"), max_tokens=4)
        assert isinstance(completion.text, str) and llm.model_calls == 1
    finally:
        llm.close()
    with pytest.raises(ValueError, match="no backend prefix"):
        open_llm("not-configured", tmp_path)


def test_a_model_name_follows_the_one_name_rule(tmp_path: Path) -> None:
    bad = tmp_path / "models.toml"
    bad.write_text('[models."a/b"]\nspec = "openai:m@http://127.0.0.1:9/v1"\n')
    with pytest.raises(ValueError, match=r"models.toml: \[models.a/b\]: model name 'a/b': use 1-120"):
        load_config(bad)
