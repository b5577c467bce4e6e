"""Where things are: the page scripts and the bundled sample traces."""

from __future__ import annotations

import os
from pathlib import Path

from workbench.common.pages import PAGE_FILES, PAGES
from worldsmith._resources import pages_root, samples_root

PAGES_DIR = pages_root()  # the checkout's pages/, or the installed wheel's copy
SAMPLES_ENV = "WORLDSMITH_SAMPLES"
SAMPLES_DATASET = "samples"
__all__ = ["PAGES_DIR", "PAGE_FILES", "SAMPLES_DATASET", "SAMPLES_ENV", "page_file", "sample_files", "samples_dir"]


def page_file(name: str) -> str:
    """Absolute path of a registered page's script (what st.page_link / st.switch_page accept)."""
    return str(PAGES.get(name).file)


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
    from worldsmith.traces import sample_trace_files

    return sample_trace_files(folder)
