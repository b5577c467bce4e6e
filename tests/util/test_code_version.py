"""The code fingerprint covers every module that makes results, and both the evaluator and the builder use it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from worldsmith.evals import run as eval_run
from worldsmith.util.code_version import PACKAGE_ROOT, code_version
from worldsmith.worldbook import pipeline


@pytest.fixture
def package(tmp_path: Path) -> Path:
    copy = tmp_path / "worldsmith"
    shutil.copytree(PACKAGE_ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


@pytest.mark.parametrize("module", ["worldbook/engine.py", "worldbook/rule_replay.py", "worldbook/stages.py",
                                    "sim/sources/scope.py", "envs/base.py"])
def test_a_change_to_any_module_that_makes_predictions_changes_the_fingerprint(package: Path, module: str) -> None:
    before = code_version(package)
    path = package / module
    path.write_text(path.read_text() + "\n# changed\n")
    assert code_version(package) != before


def test_bytecode_caches_do_not_count_and_the_order_of_files_is_fixed(package: Path) -> None:
    before = code_version(package)
    cache = package / "sim" / "__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "harness.cpython-311.py").write_text("stale")
    assert code_version(package) == before


def test_the_evaluator_and_the_builder_share_one_fingerprint_of_the_installed_package() -> None:
    assert pipeline.CODE_VERSION == code_version()
    assert not hasattr(eval_run, "_code_version") and eval_run.code_version is code_version
