"""The Traces page's "Relabel environment" tab: a train and a test file of one API imported under two environment
ids are joined under one id, and the page shows it."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest
from workbench_support import TRACES_PAGE

from helpers import toolshop_files
from worldsmith.workspace import Workspace


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_relabel_a_datasets_environment_on_the_traces_page(empty_root: Path, tmp_path: Path) -> None:
    workspace = Workspace(empty_root)
    train, test = toolshop_files(tmp_path, declared=False)
    train_env = workspace.ingest([train], "shop").files[0].derived_env
    test_env = "shop-test"  # imported apart (without the id, the test file would join the train file's environment)
    report = workspace.ingest([test], "shop", env=test_env)
    at = AppTest.from_file(str(TRACES_PAGE), default_timeout=60)
    at.query_params["dataset"] = "shop"
    no_exception(at.run())
    assert set(at.selectbox(key="tr_f_env").options) >= {train_env, test_env}

    assert set(at.multiselect(key="rl_from").options) == {train_env, test_env, "(no environment)"}
    at.multiselect(key="rl_from").set_value([test_env])
    at.text_input(key="rl_env").input("  ")
    no_exception(at.button(key="FormSubmitter:rl_form-Relabel").click().run())
    assert any("environment id is empty" in str(e.value) for e in at.error)
    assert workspace.dataset("shop").environments() == sorted([train_env, test_env])

    at.multiselect(key="rl_from").set_value([test_env])
    at.text_input(key="rl_env").input(train_env)
    no_exception(at.button(key="FormSubmitter:rl_form-Relabel").click().run())
    moved = report.files[0].episodes
    assert any(f"{moved} episodes now have environment" in str(s.value) for s in at.success)
    assert workspace.dataset("shop").environments() == [train_env]
    assert at.selectbox(key="tr_f_env").options[-1] == train_env and test_env not in at.selectbox(key="tr_f_env").options
