"""The bundled files are found through the package, never the working directory: the source checkout when the
package runs from one, else the copy a wheel carries in `worldsmith/_bundled` and the `workbench` package it installs
beside `worldsmith` (tests/workbench/test_wheel_install.py runs the real wheel)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import worldsmith
from worldsmith import _resources
from worldsmith.cli.workbench import app_path
from worldsmith.llm import default_model_spec


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    _resources.source_checkout.cache_clear()
    _resources.bundle_root.cache_clear()
    yield
    _resources.source_checkout.cache_clear()
    _resources.bundle_root.cache_clear()


def _bundle(folder: Path) -> Path:
    (folder / "pages").mkdir(parents=True)
    (folder / "pages" / "home.py").write_text("", encoding="utf-8")
    (folder / "data_samples").mkdir()
    return folder


def _workbench(folder: Path) -> Path:
    (folder / "workbench").mkdir(parents=True)
    (folder / "workbench" / "app.py").write_text("", encoding="utf-8")
    return folder / "workbench" / "app.py"


def test_a_checkout_finds_its_own_folders(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # nothing is looked up from here
    monkeypatch.delenv("WORLDSMITH_MODEL", raising=False)
    checkout = Path(worldsmith.__file__).resolve().parents[2]
    assert _resources.source_checkout() == checkout
    assert _resources.workbench_app() == checkout / "workbench" / "app.py"
    assert _resources.pages_root() == checkout / "pages"
    assert _resources.tiny_model_dir() == checkout / "data_samples" / "models" / "tiny"
    assert default_model_spec() == f"tiny:{checkout / 'data_samples' / 'models' / 'tiny'}"
    assert app_path(None) == checkout / "workbench" / "app.py"


def test_an_installed_package_reads_its_bundled_copy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                     fresh_cache: None) -> None:
    package = tmp_path / "site-packages" / "worldsmith"
    _bundle(package / "_bundled")
    app = _workbench(tmp_path / "site-packages")
    _workbench(_bundle(tmp_path / "decoy"))  # a checkout-shaped folder that is not where the package sits
    monkeypatch.chdir(tmp_path / "decoy")
    monkeypatch.setattr(_resources, "_PACKAGE", package)
    assert _resources.source_checkout() is None
    assert _resources.bundle_root() == package / "_bundled"
    assert _resources.samples_root() == package / "_bundled" / "data_samples"
    assert _resources.pages_root() == package / "_bundled" / "pages"
    assert _resources.workbench_app() == app
    assert app_path(None) == app


def test_an_install_without_the_workbench_package_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          fresh_cache: None) -> None:
    package = tmp_path / "site-packages" / "worldsmith"
    _bundle(package / "_bundled")
    monkeypatch.setattr(_resources, "_PACKAGE", package)
    with pytest.raises(FileNotFoundError, match=r"workbench package is missing.*site-packages/workbench/app\.py"):
        _resources.workbench_app()
    with pytest.raises(SystemExit, match="workbench package is missing"):
        app_path(None)


def test_a_broken_install_says_what_is_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                               fresh_cache: None) -> None:
    package = tmp_path / "site-packages" / "worldsmith"
    package.mkdir(parents=True)
    monkeypatch.setattr(_resources, "_PACKAGE", package)
    with pytest.raises(FileNotFoundError, match=r"bundled files are missing.*_bundled"):
        _resources.bundle_root()
    with pytest.raises(SystemExit, match="bundled files are missing"):
        app_path(None)


def test_workbench_app_option_must_name_a_file(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"--app .*nope\.py: no such file"):
        app_path(str(tmp_path / "nope.py"))
