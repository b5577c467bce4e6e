"""No package of the library imports one above it: every `worldsmith.X` import, at module level or inside a
function, goes down `LAYERS`.

A lower layer that reaches up (even lazily, "only when called") makes the two one unit: neither can be read, tested
or reused without the other, and import cycles wait for the next refactor. Lazy imports count the same as
module-level ones, and `TYPE_CHECKING` ones too, because the dependency is the same; only the importing moves.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import worldsmith

LIBRARY = Path(worldsmith.__file__).parent

# Bottom first: each package may import only the ones before it. `_resources` (the bundled files) is the bottom,
# under `util`; the CLI is the top. The workbench and the page scripts sit above the whole list.
LAYERS = ["_resources", "util", "traces", "workspace", "llm", "envs", "worldbook", "sim", "evals", "envace", "serve",
          "cli"]

# The front door (`worldsmith/__init__.py`: names imported on first use) and `python -m worldsmith` stand above
# every layer.
ENTRY_POINTS = {"__init__", "__main__"}

# Upward imports not fixed yet, as (importing file, imported package), each with why; this list may only shrink.
KNOWN_UPWARD: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    file: str  # relative to the library folder
    line: int
    source: str  # the importing package
    target: str  # the imported package


def package_of(relative: Path) -> str:
    """The layer a library file belongs to: its top folder, or its name for a module at the top."""
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def _target(dotted: str, name: str | None) -> str | None:
    """The package `from dotted import name` (or `import dotted`) reaches; None outside the library or for a
    plain attribute of the front door (`__version__`)."""
    parts = dotted.split(".")
    if parts[0] != "worldsmith":
        return None
    if len(parts) > 1:
        return parts[1]
    if name is None or name in LAYERS:
        return name
    front_door = worldsmith._FRONT_DOOR.get(name)  # `from worldsmith import Workspace` imports worldsmith.workspace
    return front_door.split(".")[1] if front_door else None


def _absolute(node: ast.ImportFrom, relative: Path) -> str:
    """The dotted module an import names, relative ones resolved against the importing file's package."""
    if node.level == 0:
        return node.module or ""
    package = ["worldsmith", *relative.parent.parts]
    base = package[:len(package) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_in(source: str, relative: Path) -> list[Import]:
    """Every import of another library package in one file's source, wherever it sits in the file."""
    here = package_of(relative)
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            reached = [_target(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, relative)
            reached = [_target(module, alias.name) for alias in node.names]
        else:
            continue
        found += [Import(relative.as_posix(), node.lineno, here, target)
                  for target in dict.fromkeys(reached) if target is not None and target != here]
    return found


def upward(found: list[Import]) -> list[Import]:
    return [i for i in found if LAYERS.index(i.target) > LAYERS.index(i.source)]


def library_imports() -> list[Import]:
    found = []
    for path in sorted(LIBRARY.rglob("*.py")):
        relative = path.relative_to(LIBRARY)
        if package_of(relative) not in ENTRY_POINTS:
            found += imports_in(path.read_text(encoding="utf-8"), relative)
    return found


def test_every_package_has_a_layer() -> None:
    packages = {package_of(path.relative_to(LIBRARY)) for path in LIBRARY.rglob("*.py")} - ENTRY_POINTS
    assert packages == set(LAYERS), "place a new package in LAYERS"


def test_no_package_imports_one_above_it() -> None:
    found = library_imports()
    assert {i.target for i in found} <= set(LAYERS)
    offending = [i for i in upward(found) if (i.file, i.target) not in KNOWN_UPWARD]
    assert not offending, "\n".join(f"{i.file}:{i.line} ({i.source}) imports worldsmith.{i.target}, a layer above"
                                    for i in offending)


def test_every_known_exception_still_exists() -> None:
    """A fixed exception leaves the list, so it cannot come back unnoticed."""
    assert set(KNOWN_UPWARD) <= {(i.file, i.target) for i in upward(library_imports())}


def test_lazy_relative_front_door_and_type_checking_imports_count() -> None:
    source = """
from typing import TYPE_CHECKING

import worldsmith.traces
from worldsmith import __version__

if TYPE_CHECKING:
    from worldsmith.cli import main

def later():
    from ..sim import routing
    from worldsmith import Workspace
    import worldsmith.envace.config
"""
    found = imports_in(source, Path("worldbook/build.py"))
    assert [(i.line, i.target) for i in found] == [(4, "traces"), (8, "cli"), (11, "sim"), (12, "workspace"),
                                                   (13, "envace")]
    assert [i.target for i in upward(found)] == ["cli", "sim", "envace"]


def test_a_relative_import_inside_the_package_is_not_crossing() -> None:
    assert imports_in("from . import model\nfrom .model import Rule\n", Path("worldbook/build.py")) == []
    assert [i.target for i in imports_in("from .. import util\n", Path("sim/harness.py"))] == ["util"]
