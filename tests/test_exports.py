"""Each package exports what a user needs, at most `MAX_EXPORTS` names, and the workbench imports only those.

A package's `__all__` is its public surface: the core types and entry points, plus a few public namespace modules
(a submodule with one job and its own `__all__`, e.g. `from worldsmith.worldbook import build_jobs`). Everything else is
imported from its defining module by the library and the tests. The workbench and the page scripts sit on the
public surface only, so a package can reorganise its modules without breaking a page.
"""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path

import pytest

import worldsmith

LIBRARY = Path(worldsmith.__file__).parent
REPO = LIBRARY.parent.parent
MAX_EXPORTS = 40

# Packages that export nothing, with why.
NO_EXPORTS = {"cli": "the command line: commands, not a library API"}

# Modules the workbench may import directly, with why: neither is a package with an `__all__` of its own.
WORKBENCH_MODULES = {
    "worldsmith._resources": "the bundled files' folders (pages, samples): a module at the top, below every layer",
    "worldsmith.cli.extensions": "the Plugins page lists the same extension-point table as `worldsmith plugins`",
}


def packages() -> list[str]:
    return sorted(path.parent.name for path in LIBRARY.glob("*/__init__.py") if path.parent.name not in NO_EXPORTS)


def namespaces(package: types.ModuleType) -> list[str]:
    return [name for name in package.__all__ if isinstance(getattr(package, name), types.ModuleType)]


@pytest.mark.parametrize("name", packages())
def test_a_package_exports_at_most_forty_names_and_each_resolves(name: str) -> None:
    package = importlib.import_module(f"worldsmith.{name}")
    exported = package.__all__
    assert len(exported) <= MAX_EXPORTS, f"worldsmith.{name} exports {len(exported)} names (at most {MAX_EXPORTS})"
    assert len(set(exported)) == len(exported), f"worldsmith.{name}.__all__ repeats a name"
    missing = [n for n in exported if not hasattr(package, n)]
    assert not missing, f"worldsmith.{name}.__all__ names what it does not define: {missing}"


@pytest.mark.parametrize("name", packages())
def test_a_namespace_module_has_its_own_all_and_the_docstring_names_it(name: str) -> None:
    package = importlib.import_module(f"worldsmith.{name}")
    for namespace in namespaces(package):
        module = getattr(package, namespace)
        assert module.__name__ == f"worldsmith.{name}.{namespace}", f"{namespace} is not a submodule of {name}"
        assert isinstance(getattr(module, "__all__", None), list), f"{module.__name__} has no __all__"
        missing = [n for n in module.__all__ if not hasattr(module, n)]
        assert not missing, f"{module.__name__}.__all__ names what it does not define: {missing}"
        assert f"`{namespace}`" in (package.__doc__ or ""), f"the docstring of worldsmith.{name} omits `{namespace}`"


def test_the_packages_without_exports_have_no_all() -> None:
    for name in NO_EXPORTS:
        assert not hasattr(importlib.import_module(f"worldsmith.{name}"), "__all__"), name


def workbench_problems(source: str, where: str) -> list[str]:
    """Each `worldsmith` import in a workbench or page file that reaches past a package's `__all__`."""
    problems = []
    for node in ast.walk(ast.parse(source, where)):
        if isinstance(node, ast.Import):
            problems += [f"{where}:{node.lineno}: import {alias.name}" for alias in node.names
                         if alias.name.startswith("worldsmith.") and alias.name not in WORKBENCH_MODULES]
        if not isinstance(node, ast.ImportFrom) or node.level or not (node.module or "").startswith("worldsmith"):
            continue
        module = node.module or ""
        if module in WORKBENCH_MODULES:
            continue
        if module.count(".") > 1:
            problems.append(f"{where}:{node.lineno}: from {module} import ... (a module inside a package)")
            continue
        exported = set(importlib.import_module(module).__all__) | ({*packages()} if module == "worldsmith" else set())
        problems += [f"{where}:{node.lineno}: {module} does not export {alias.name}" for alias in node.names
                     if alias.name not in exported]
    return problems


def workbench_files() -> list[Path]:
    return sorted([*(REPO / "workbench").rglob("*.py"), *(REPO / "pages").rglob("*.py")])


def test_the_workbench_imports_only_what_the_packages_export() -> None:
    assert workbench_files(), "the workbench sources are not beside the library"
    problems = [p for path in workbench_files()
                for p in workbench_problems(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))]
    assert not problems, "\n".join(problems)


def test_the_workbench_check_catches_a_deep_import_and_an_unexported_name() -> None:
    source = """
from worldsmith.worldbook.build_jobs import launch_build
from worldsmith.sim import Harness, scoring
import worldsmith.evals.plots
from worldsmith import Workspace, sim
from worldsmith.evals import heldout
from worldsmith._resources import samples_root
def later():
    from worldsmith.worldbook import Rule, build_dataset
"""
    assert workbench_problems(source, "page.py") == [
        "page.py:2: from worldsmith.worldbook.build_jobs import ... (a module inside a package)",
        "page.py:3: worldsmith.sim does not export scoring",
        "page.py:4: import worldsmith.evals.plots",
    ]
