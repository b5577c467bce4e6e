"""One name rule for every named thing; no name escapes its folder or ends in a newline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from worldsmith.envace.config import ConfigError, EnvACEConfig
from worldsmith.evals.run import EvalConfig
from worldsmith.util.names import InvalidName, check_name
from worldsmith.workspace import Workspace
from worldsmith.worldbook import Worldbook, WorldbookError, WorldbookStore

BAD = ["abc\n", "../../../../X", "..", ".", ".hidden", "a/b", "a\\b", "", " a", "x" * 121, "naïve"]
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", BAD)
def test_bad_names_are_refused_with_the_rule(name: str) -> None:
    with pytest.raises(InvalidName, match="use 1-120 letters, digits"):
        check_name(name, "dataset")


def test_good_names_pass() -> None:
    for name in ("alf", "run-1", "v1.2_final", "A" * 120):
        assert check_name(name) == name


@pytest.mark.parametrize("name", ["abc\n", "../escape"])
def test_every_named_thing_uses_the_rule(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="dataset name"):
        Workspace(tmp_path).ingest([REPO / "data_samples" / "collected" / "shell.jsonl"], name)
    with pytest.raises(WorldbookError, match="worldbook name"):
        WorldbookStore(tmp_path / "worldbooks").save(Worldbook(name=name))
    with pytest.raises(ValueError, match="run name"):
        EvalConfig(name=name, dataset="d")
    with pytest.raises(ConfigError, match="run name"):
        EnvACEConfig.from_dict({"name": name, "data": {"dataset": "d"}}, source="test")
    from worldsmith.util.jobs import plain_run_name

    if name.strip() != name:
        assert plain_run_name(name) == name.strip()  # a typed field: trimmed, then the same rule
    else:
        with pytest.raises(ValueError, match="run name"):
            plain_run_name(name)
    assert not any(path.name.endswith("\n") for path in tmp_path.rglob("*"))


def test_an_envace_run_name_cannot_escape_the_workspace(tmp_path: Path) -> None:
    outside = tmp_path / "X"
    workspace = tmp_path / "deep" / "a" / "b" / "ws"
    done = subprocess.run([sys.executable, "-m", "worldsmith", "envace", "train", "--config",
                           str(REPO / "configs" / "envace_tiny.yaml"), "--set", "name=../../../../X", "--json"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "WORLDSMITH_WORKSPACE": str(workspace)})
    assert done.returncode != 0 and "run name '../../../../X'" in done.stderr + done.stdout
    assert not outside.exists() and not (workspace / "runs").exists()
