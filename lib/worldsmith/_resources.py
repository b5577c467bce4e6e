"""Where the files that ship beside the code are: the workbench app, its pages and the bundled samples.

They live in the source checkout (`workbench/`, `pages/`, `data_samples/` beside `lib/`). A wheel installs
the `workbench` package beside `worldsmith` and carries copies of the two data folders in the same layout
under `worldsmith/_bundled/` (see `setup.py`), so the library finds them the same way whether it runs from a
checkout (editable install, `PYTHONPATH=lib`) or from a non-editable `pip install .`; nothing is looked up
relative to the working directory.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

__all__ = ["bundle_root", "pages_root", "samples_root", "source_checkout", "tiny_model_dir", "workbench_app"]

_PACKAGE = Path(__file__).resolve().parent
_MARKERS = ("pages/home.py", "data_samples")  # what a bundle root holds


def _is_bundle(folder: Path) -> bool:
    return all((folder / marker).exists() for marker in _MARKERS)


@cache
def source_checkout() -> Path | None:
    """The source checkout this package runs from (`<checkout>/lib/worldsmith`), or None when installed."""
    candidate = _PACKAGE.parents[1]
    return candidate if _PACKAGE.parent.name == "lib" and _is_bundle(candidate) else None


@cache
def bundle_root() -> Path:
    """The folder laid out as the checkout (`pages/`, `data_samples/`): the checkout itself,
    else the copy inside the installed package. Raises when neither is there (a broken install)."""
    checkout = source_checkout()
    if checkout is not None:
        return checkout
    installed = _PACKAGE / "_bundled"
    if _is_bundle(installed):
        return installed
    raise FileNotFoundError(
        f"worldsmith's bundled files are missing: no source checkout at {_PACKAGE.parents[1]} and no "
        f"{installed} (reinstall with `pip install .` from the repository)"
    )


def samples_root() -> Path:
    """The bundled `data_samples/` folder (sample traces, ALFWorld games, the tiny models)."""
    return bundle_root() / "data_samples"


def tiny_model_dir() -> Path:
    """The small default model trained by `worldsmith llm train-tiny` on the bundled samples."""
    return samples_root() / "models" / "tiny"


def pages_root() -> Path:
    """The workbench's page scripts (`pages/`), which Streamlit runs as files."""
    return bundle_root() / "pages"


def workbench_app() -> Path:
    """The Streamlit script `worldsmith workbench` runs: `app.py` of the `workbench` package, which sits beside
    `lib/` in a checkout and beside this package in an install (its pages are `pages_root()`)."""
    checkout = source_checkout()
    # Installed, the bundle is <site-packages>/worldsmith/_bundled (bundle_root raises when the install is broken).
    root = checkout if checkout is not None else bundle_root().parents[1]
    app = root / "workbench" / "app.py"
    if not app.is_file():
        raise FileNotFoundError(f"the workbench package is missing: no {app} (reinstall with `pip install .`)")
    return app
