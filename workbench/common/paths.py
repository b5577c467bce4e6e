"""Where things are: the page scripts and the bundled sample traces."""

from __future__ import annotations

import os
from pathlib import Path

from worldsmith._resources import pages_root, samples_root

PAGES_DIR = pages_root()  # the checkout's pages/, or the installed wheel's copy
SAMPLES_ENV = "WORLDSMITH_SAMPLES"
SAMPLES_DATASET = "samples"

# url_path of each page, as registered with st.navigation in workbench/app.py.
PAGE_FILES = {
    "home": PAGES_DIR / "home.py",
    "traces": PAGES_DIR / "traces.py",
    "collect": PAGES_DIR / "collect.py",
    "play": PAGES_DIR / "play.py",
    "models": PAGES_DIR / "models.py",
    "worldbook": PAGES_DIR / "worldbook.py",
    "build": PAGES_DIR / "build.py",
    "simulate": PAGES_DIR / "simulate.py",
    "evaluate": PAGES_DIR / "evaluate.py",
    "train": PAGES_DIR / "train.py",
}


def page_file(name: str) -> str:
    """Absolute path of a page script (what st.page_link / st.switch_page accept)."""
    return str(PAGE_FILES[name])


def samples_dir() -> Path | None:
    """The folder imported on first start: `$WORLDSMITH_SAMPLES` (empty disables), else the bundled
    `data_samples/` (the checkout's, or the installed wheel's copy)."""
    value = os.environ.get(SAMPLES_ENV)
    if value is not None:
        return Path(value) if value.strip() else None
    return samples_root()


def sample_files(folder: Path | None) -> list[Path]:
    """The trace files of the samples folder, as ingest would pick them (no docs, code, hidden files or assets)."""
    if folder is None or not folder.is_dir():
        return []
    from worldsmith.traces.files import sample_trace_files

    return sample_trace_files(folder)
