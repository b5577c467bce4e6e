"""The Models page under AppTest with the real bundled tiny model: try a prompt, see the run and the call."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from workbench_support import APP, REPO, shown

from worldsmith.llm import BackendSpec, CallLog, default_model_spec, register_backend
from worldsmith.llm import registry as backend_registry

MODELS_PAGE = REPO / "pages" / "models.py"


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.integration
def test_models_page_sends_a_prompt_and_shows_the_call_log(empty_root: Path) -> None:
    if default_model_spec() is None:
        pytest.fail("the bundled tiny model is missing: run data_samples/make_tiny_model.py")
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    at = no_exception(at.switch_page(str(MODELS_PAGE)).run())
    assert any("default" in str(df.value["name"].tolist()) for df in at.dataframe)
    assert any("No model calls" in str(i.value) for i in at.info)
    at.text_area(key="mo_prompt").set_value("You are in a kitchen. > open fridge")
    at.number_input(key="mo_max_tokens").set_value(8)
    no_exception(next(b for b in at.button if b.label == "Send").click().run())
    assert at.code, "the completion is shown"
    calls = CallLog(empty_root / "llm" / "calls.sqlite").calls()
    assert len(calls) == 1 and calls[0].component == "workbench" and calls[0].completion_tokens > 0
    at.text_input(key="mo_log_search").set_value("fridge").run()
    no_exception(at)
    assert any("open fridge" in e.label for e in at.expander)
    at.text_input(key="mo_log_search").set_value("zebra").run()
    assert any("No calls match" in str(c.value) for c in at.caption)


def test_models_page_reports_a_broken_config(empty_root: Path) -> None:
    """... and still lists the registered backends, a plugin's among them."""
    empty_root.mkdir(parents=True, exist_ok=True)
    (empty_root / "models.toml").write_text('[models.x]\nspec = "nope"\n')
    register_backend(BackendSpec("pagetest", "no.such.module:from_spec", "no_such_package", "pagetest:NAME"))
    try:
        at = AppTest.from_file(str(APP), default_timeout=60).run()
        at = no_exception(at.switch_page(str(MODELS_PAGE)).run())
    finally:
        backend_registry._REGISTRY.unregister("pagetest")
    assert any("models.toml: [models.x]" in shown(e.value) for e in at.error)
    listed = next(df.value for df in at.dataframe if "package" in df.value.columns)
    assert listed["kind"].tolist() == ["tiny", "hf", "vllm", "openai", "pagetest"]
    assert listed.set_index("kind").loc["pagetest", "ready"] == False  # noqa: E712  (a numpy bool)
