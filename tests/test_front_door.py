"""The top-level `worldsmith` package: a small front door, imported lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

import worldsmith


def test_every_front_door_name_resolves_to_its_subpackage_object() -> None:
    from worldsmith import envs, sim, workspace, worldbook

    assert set(worldsmith.__all__) == {"__version__", *worldsmith._FRONT_DOOR}
    for name in worldsmith._FRONT_DOOR:
        assert getattr(worldsmith, name) is getattr(sys.modules[worldsmith._FRONT_DOOR[name]], name), name
    assert worldsmith.Workspace is workspace.Workspace and worldsmith.make is envs.make
    assert worldsmith.build_worldbook is worldbook.build_worldbook and worldsmith.world_models is sim.world_models
    assert "harness" in worldsmith.world_models()
    assert {"Workspace", "make_world_model", "run_eval"} <= set(dir(worldsmith))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'worldsmith' has no attribute 'Harness'"):
        worldsmith.Harness  # noqa: B018  (the subpackages keep their other names: worldsmith.sim.Harness)


def test_import_worldsmith_loads_no_subpackage() -> None:
    """`import worldsmith` imports nothing heavy; the first use of a name imports only its subpackage."""
    code = ("import sys, worldsmith; before = sorted(m for m in sys.modules if m.startswith('worldsmith.') "
            "or m in ('pydantic', 'torch', 'numpy')); worldsmith.Workspace; "
            "print(before, 'worldsmith.workspace' in sys.modules, 'worldsmith.sim' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["[]", "True", "False"]
