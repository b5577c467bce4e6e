"""The one `Registry`: registering, lookups with close matches, listing, plug-ins by entry point, threads."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from worldsmith.util.registry import AlreadyRegisteredError, NotRegisteredError, Registry


class UnknownColourError(NotRegisteredError, ValueError):
    """A registry's own error that stays a ValueError for callers that always caught that."""


def colours(**options: object) -> Registry[str]:
    registry: Registry[str] = Registry("colour", **options)  # type: ignore[arg-type]
    registry.register("red", "#f00")
    registry.register("green", "#0f0")
    return registry


def write_distribution(root: Path, name: str, entry_points: str) -> None:
    """An installed distribution as importlib.metadata finds it on sys.path: a dist-info with entry points."""
    info = root / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_register_get_list_and_contains() -> None:
    registry = colours()
    assert registry.get("red") == "#f00" and registry["green"] == "#0f0"
    assert registry.names() == ["red", "green"] and list(registry) == ["red", "green"] and len(registry) == 2
    assert registry.items() == [("red", "#f00"), ("green", "#0f0")] and dict(registry) == {"red": "#f00",
                                                                                         "green": "#0f0"}
    assert "red" in registry and "blue" not in registry
    assert registry.get("blue", None) is None and registry.get("blue", "#00f") == "#00f"


def test_register_works_as_a_decorator() -> None:
    registry: Registry[type] = Registry("shape")

    @registry.register("square")
    class Square:
        pass

    assert registry.get("square") is Square


def test_an_unknown_name_is_a_key_and_lookup_error_naming_close_matches() -> None:
    registry = colours()
    with pytest.raises(NotRegisteredError) as caught:
        registry.get("gren")
    assert isinstance(caught.value, KeyError) and isinstance(caught.value, LookupError)
    assert str(caught.value) == "unknown colour 'gren' (known: green, red); did you mean 'green'?"
    with pytest.raises(KeyError, match=r"unknown colour 'purple' \(known: green, red\)$"):
        registry["purple"]


def test_a_registry_raises_its_own_error_class_and_label() -> None:
    registry = colours(not_found=UnknownColourError, known_label="choose from", sort_known=False)
    with pytest.raises(ValueError, match=r"unknown colour 'blue' \(choose from red, green\)"):
        registry.get("blue")
    with pytest.raises(UnknownColourError):
        registry.get("blue")


def test_a_taken_name_is_refused_unless_replaced_and_unregister_removes() -> None:
    registry = colours()
    with pytest.raises(AlreadyRegisteredError, match="colour 'red' is already registered"):
        registry.register("red", "#e00")
    assert isinstance(AlreadyRegisteredError("x"), ValueError)
    registry.register("red", "#e00", replace=True)
    assert registry.get("red") == "#e00"
    assert registry.unregister("red") == "#e00" and registry.unregister("red") is None
    assert registry.names() == ["green"]
    with pytest.raises(ValueError, match="non-empty name"):
        registry.register(" ", "#fff")


def test_the_loader_runs_once_on_first_use_and_may_register_and_look_up() -> None:
    calls: list[int] = []

    def builtins() -> None:
        calls.append(1)
        registry.register("blue", "#00f")
        assert "blue" in registry  # a lookup while loading does not load again

    registry: Registry[str] = Registry("colour", loader=builtins)
    registry.register("red", "#f00")
    assert calls == []  # registering loads nothing
    assert registry.names() == ["red", "blue"] and registry.get("blue") == "#00f"
    assert calls == [1]


def test_check_vets_every_registration() -> None:
    def hex_colour(name: str, item: str) -> None:
        if not item.startswith("#"):
            raise ValueError(f"colour {name!r}: {item!r} is not #rgb")

    registry = colours(check=hex_colour)
    with pytest.raises(ValueError, match="colour 'blue': 'blue' is not #rgb"):
        registry.register("blue", "blue")
    assert "blue" not in registry


def test_on_change_runs_after_register_and_unregister() -> None:
    changes: list[str] = []
    registry: Registry[str] = Registry("colour", on_change=lambda: changes.append("x"))
    registry.register("red", "#f00")
    registry.unregister("red")
    assert changes == ["x", "x"]


def test_entry_points_register_objects_and_modules_and_report_broken_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "colour_plugin.py").write_text(
        "from tests_registry_target import REGISTRY\nREGISTRY.register('teal', '#088')\nPINK = '#fcc'\n"
        "REFUSED = 'not a colour'\n")
    (tmp_path / "tests_registry_target.py").write_text(
        "from worldsmith.util.registry import Registry\n\n\ndef check(name, item):\n"
        "    if not item.startswith('#'):\n        raise ValueError('not #rgb')\n\n\n"
        "REGISTRY = Registry('colour', check=check)\n")
    write_distribution(tmp_path, "colour_plugins", "[worldsmith.test_colours]\n"
                       "teal = colour_plugin\npink = colour_plugin:PINK\nbroken = no_such_module_here:X\n"
                       "refused = colour_plugin:REFUSED\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    target = __import__("tests_registry_target")
    try:
        registry = target.REGISTRY
        registry.entry_point_group = "worldsmith.test_colours"
        with pytest.warns(RuntimeWarning) as caught:
            assert sorted(registry.names()) == ["pink", "teal"]
        assert [str(w.message).split(" was skipped")[0] for w in caught] == [
            "colour plug-in 'broken' (no_such_module_here:X, entry point group 'worldsmith.test_colours')",
            "colour plug-in 'refused' (colour_plugin:REFUSED, entry point group 'worldsmith.test_colours')"]
        assert registry.get("pink") == "#fcc"
        assert [(f.name, f.target) for f in registry.failures] == [("broken", "no_such_module_here:X"),
                                                                   ("refused", "colour_plugin:REFUSED")]
        assert registry.failures[1].error == "ValueError: not #rgb"
        assert "ModuleNotFoundError" in registry.failures[0].error
        assert registry.load_entry_points("worldsmith.test_colours") == []  # once
    finally:
        for module in ("tests_registry_target", "colour_plugin"):
            sys.modules.pop(module, None)


def test_concurrent_readers_wait_for_the_loader() -> None:
    started = threading.Event()
    release = threading.Event()

    def slow_builtins() -> None:
        started.set()
        release.wait(5)
        registry.register("blue", "#00f")

    registry: Registry[str] = Registry("colour", loader=slow_builtins)
    seen: list[list[str]] = []
    first = threading.Thread(target=lambda: seen.append(registry.names()))
    first.start()
    assert started.wait(5)
    second = threading.Thread(target=lambda: seen.append(registry.names()))
    second.start()
    second.join(0.2)
    assert second.is_alive()  # waits for the loading thread instead of seeing a half-loaded registry
    release.set()
    first.join(5)
    second.join(5)
    assert seen == [["blue"], ["blue"]]
