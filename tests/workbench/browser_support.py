"""The real workbench server for browser tests: `streamlit run workbench/app.py` on a free port, and Chromium.

Importable by name (conftest modules are not), so each browser test module can start a server on the
workspace it needs; the `browser` and `page` fixtures in conftest drive whichever `server` a module defines.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from workbench_support import APP, REPO

from ports import free_port

CHROMIUM = Path(os.environ.get("WORLDSMITH_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
WAIT_MS = 30_000


def require_browser() -> None:
    """Skip (fail on CI) when Chromium or playwright is missing."""
    if not CHROMIUM.exists():
        message = f"Chromium not found at {CHROMIUM} (set WORLDSMITH_CHROMIUM to another binary)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    pytest.importorskip("playwright.sync_api")


def _wait_healthy(url: str, process: subprocess.Popen, log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited with {process.returncode}:\n{log.read_text(errors='replace')}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.read().decode().strip() == "ok":
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"streamlit did not answer /_stcore/health within {timeout:.0f} s:\n"
                       f"{log.read_text(errors='replace')}")


@contextmanager
def streamlit_server(workspace: Path, log: Path, env: dict[str, str]) -> Iterator[str]:
    """The workbench on `workspace` (extra environment `env`) until the block ends; yields its URL."""
    port = free_port()
    environment = {**os.environ, "WORLDSMITH_WORKSPACE": str(workspace), "PYTHONUNBUFFERED": "1", **env}
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(APP.relative_to(REPO)), "--server.port", str(port),
             "--server.address", "127.0.0.1", "--server.headless", "true"],
            cwd=REPO, env=environment, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


def widget_class(key: str) -> str:
    """The CSS class Streamlit gives the element of widget `key`."""
    return ".st-key-" + re.sub(r"[^a-zA-Z0-9_-]", "-", key)


def choose_option(page: Any, key: str, option: str, tries: int = 3) -> None:
    """Pick `option` in the select box with widget key `key`: typed into its search first, since the open list
    renders only the options that fit its height; opened again when a rerun of the page closed it meanwhile."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    box = page.locator(widget_class(key)).get_by_role("combobox")
    for attempt in range(tries):
        box.click()
        box.fill("")
        box.press_sequentially(option)
        try:
            page.get_by_role("option", name=option, exact=True).click(timeout=WAIT_MS // tries)
            return
        except PlaywrightTimeout:
            if attempt == tries - 1:
                raise
            page.keyboard.press("Escape")
