"""Relative paths resolve one way in the page, the CLI and a background job: against the workspace root, then
the bundled files (the checkout here); never against the working directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from worldsmith._resources import bundle_root
from worldsmith.llm import parse_spec, resolve_spec
from worldsmith.util.paths import default_workspace_root, resolve_user_path

TINY = "data_samples/models/tiny"


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace, and a working directory that is neither it nor the checkout."""
    cwd = tmp_path / "cwd"
    (cwd / "models" / "mine").mkdir(parents=True)  # a decoy: the same relative path under the working directory
    monkeypatch.chdir(cwd)
    workspace = tmp_path / "ws"
    (workspace / "models" / "mine").mkdir(parents=True)
    return workspace


def test_workspace_first_then_checkout_never_the_working_directory(elsewhere: Path) -> None:
    assert resolve_user_path("models/mine", elsewhere) == (elsewhere / "models" / "mine").resolve()
    assert resolve_user_path(TINY, elsewhere) == bundle_root() / TINY
    assert resolve_user_path("nowhere/x", elsewhere) == (elsewhere / "nowhere" / "x").resolve()
    assert resolve_user_path("/abs/path", elsewhere) == Path("/abs/path")


def test_model_specs_resolve_their_folder_the_same_way(elsewhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLDSMITH_WORKSPACE", str(elsewhere))
    assert resolve_spec("hf:models/mine", elsewhere) == f"hf:{(elsewhere / 'models' / 'mine').resolve()}"
    assert resolve_spec(f"tiny:{TINY}?max_new_tokens=8", elsewhere) == f"tiny:{bundle_root() / TINY}?max_new_tokens=8"
    assert resolve_spec("openai:m@http://127.0.0.1:9/v1", elsewhere) == "openai:m@http://127.0.0.1:9/v1"
    with pytest.raises(ValueError, match=f"no model folder at {(elsewhere / 'gone').resolve()}"):
        parse_spec(resolve_spec("tiny:gone", elsewhere))  # the error names where it looked


def test_envace_config_paths_use_the_same_helper(elsewhere: Path) -> None:
    from worldsmith.envace.config import resolve_path

    assert resolve_path("models/mine", elsewhere) == resolve_user_path("models/mine", elsewhere)
    assert resolve_path(TINY, elsewhere) == bundle_root() / TINY


def test_the_default_workspace_root_is_the_variable_else_workspace(monkeypatch: pytest.MonkeyPatch,
                                                                    elsewhere: Path) -> None:
    from worldsmith.workspace import Workspace
    from worldsmith.workspace import default_workspace_root as from_workspace

    assert from_workspace is default_workspace_root  # the old import path names the same function
    monkeypatch.delenv("WORLDSMITH_WORKSPACE", raising=False)
    assert default_workspace_root() == Path("workspace")
    monkeypatch.setenv("WORLDSMITH_WORKSPACE", str(elsewhere))
    assert default_workspace_root() == elsewhere and Workspace().root == elsewhere
    assert resolve_user_path("models/mine") == (elsewhere / "models" / "mine").resolve()
