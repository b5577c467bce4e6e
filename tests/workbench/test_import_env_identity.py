"""The Traces page's import says which environment a file without tool schemas joined and why, and asks when the
file matches several environments of the workspace (issue 46)."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest
from workbench_support import TRACES_PAGE

from helpers import toolshop_files
from workbench.common.text import md_escape
from worldsmith.workspace import Workspace


def upload(at: AppTest, path: Path, dataset: str) -> AppTest:
    at.file_uploader[0].set_value((path.name, path.read_bytes(), "application/json"))
    at.run()
    at.text_input(key="tr_import_dataset").input(dataset).run()
    at.button(key="tr_import_button").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_report_names_the_environment_a_file_joined_and_why(empty_root: Path, tmp_path: Path) -> None:
    train, test = toolshop_files(tmp_path, declared=False)
    workspace = Workspace(empty_root)
    train_env = workspace.ingest([train], "shop").files[0].derived_env
    at = upload(AppTest.from_file(str(TRACES_PAGE), default_timeout=120).run(), test, "shop_test")
    (file,) = at.session_state["tr_last_report"]["files"]
    assert file["env_decision"] == "joined" and file["derived_env"] == train_env
    table = next(df.value for df in at.dataframe if "environment (derived)" in df.value.columns)
    assert list(table["environment (derived)"]) == [f"{train_env} (joined)"]
    assert any(md_escape(f"joined {train_env} (tools: ") in md.value for md in at.markdown)
    assert not any(w.value and "matches 2 environments" in str(w.value) for w in at.warning)
    assert workspace.dataset("shop_test").environments() == [train_env]


def test_a_file_matching_two_environments_is_asked_about_and_joins_the_chosen_one(empty_root: Path,
                                                                                 tmp_path: Path) -> None:
    train, test = toolshop_files(tmp_path, declared=False)
    workspace = Workspace(empty_root)
    workspace.ingest([train], "shop_a", env="shop-a")
    workspace.ingest([train], "shop_b", env="shop-b")
    at = upload(AppTest.from_file(str(TRACES_PAGE), default_timeout=120).run(), test, "shop_test")
    (file,) = at.session_state["tr_last_report"]["files"]
    own = file["derived_env"]
    assert file["env_decision"] == "ambiguous" and workspace.dataset("shop_test").environments() == [own]
    assert any("matches 2 environments of the workspace" in str(w.value) for w in at.warning)
    choice = at.selectbox(key="tr_env_choice_0")
    assert len(choice.options) == 2 and all("tools shared; system prompt similarity 1.00" in o for o in choice.options)
    choice.set_value("shop-b").run()
    at.button(key="tr_env_join_0").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert workspace.dataset("shop_test").environments() == ["shop-b"]
    (file,) = at.session_state["tr_last_report"]["files"]
    assert file["env_decision"] == "joined" and "your choice" in file["env_reason"]
    assert not any("matches 2 environments" in str(w.value) for w in at.warning)  # asked once, answered
