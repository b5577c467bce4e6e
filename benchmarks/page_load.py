"""Seconds each workbench page takes to load in a real browser, on the bundled samples (issue 34: median <= 2 s).

    OMP_NUM_THREADS=1 python benchmarks/page_load.py [--repeats 5] [--pages traces evaluate ...]
        [--out benchmarks/results/page_load.json]

A real server (`streamlit run workbench/app.py`, as `tests/workbench/browser_support.py` starts it) on the
workspace a newcomer has after the first start plus one tool-API import (`tests/workbench/sample_workspace.py`:
dataset `samples` with worldbook `alfworld`, dataset `shop` with worldbook `shop`, one evaluation run each), and
headless Chromium. A load is a new browser context (a new Streamlit session) opening the page's URL, until its
title is shown and the script reports it is no longer running: the time a user waits for the page with its
defaults. The first load of each page after the server starts is reported apart (it imports the page's modules
and fills the caches); the median and maximum are over the next R loads. Prints a table and writes JSON with the
machine's description. Needs Chromium ($WORLDSMITH_CHROMIUM, default /usr/bin/chromium) and playwright.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "workbench")]  # the test suite's server and workspace

from browser_support import CHROMIUM, CHROMIUM_ARGS, streamlit_server  # noqa: E402
from sample_workspace import sample_workspace  # noqa: E402

# url_path of each page in workbench/app.py ("": Home, the default page)
PAGES = ("", "traces", "collect", "play", "build", "worldbook", "simulate", "evaluate", "train", "models")
DONE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
TIMEOUT_MS = 120_000


def _load(context: Any, url: str) -> tuple[float, int]:
    """Seconds until the page at `url` is shown and idle in a new page (a new Streamlit session) of `context`; and
    how many tracebacks it shows."""
    page = context.new_page()
    try:
        started = time.perf_counter()
        page.goto(url)
        page.locator("h1").first.wait_for(timeout=TIMEOUT_MS)
        page.locator(DONE).wait_for(timeout=TIMEOUT_MS)
        seconds = time.perf_counter() - started
        return seconds, page.locator('[data-testid="stException"]').count()
    finally:
        page.close()


def _script_seconds(root: Path, path: str, repeats: int) -> list[float]:
    """The page script's own run (no browser), under AppTest through the app's navigation: the server's share."""
    from streamlit.testing.v1 import AppTest

    from workbench.common.paths import PAGE_FILES

    seconds = []
    for _ in range(repeats + 1):  # the first fills the caches, as the browser's first load does
        at = AppTest.from_file(str(REPO / "workbench" / "app.py"), default_timeout=TIMEOUT_MS / 1000).run()
        started = time.perf_counter()
        at.switch_page(str(PAGE_FILES[path or "home"])).run()
        seconds.append(time.perf_counter() - started)
        if at.exception:
            raise RuntimeError(f"page {path or 'home'}: {[e.value for e in at.exception]}")
    return seconds[1:]


def measure(pages: list[str], repeats: int) -> list[dict[str, Any]]:
    """One row per page: the first load in a fresh browser (nothing cached), the median and maximum of `repeats`
    later loads (the browser's cache warm, each a new session), the script's own median, tracebacks seen."""
    from playwright.sync_api import sync_playwright

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        root = sample_workspace(Path(folder) / "ws")
        os.environ.update({"WORLDSMITH_WORKSPACE": str(root), "WORLDSMITH_SAMPLES": ""})
        log = Path(folder) / "streamlit.log"
        with streamlit_server(root, log, {"WORLDSMITH_SAMPLES": ""}) as url, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                warm = browser.new_context(viewport={"width": 1400, "height": 1200})
                _load(warm, url)  # the server's own first start (the app's imports), counted on no page
                for path in pages:
                    fresh = browser.new_context(viewport={"width": 1400, "height": 1200})
                    first, errors = _load(fresh, f"{url}/{path}")
                    fresh.close()
                    loads = [_load(warm, f"{url}/{path}") for _ in range(repeats)]
                    seconds = [s for s, _ in loads]
                    script = _script_seconds(root, path, repeats)
                    rows.append(
                        {
                            "page": path or "home",
                            "first_s": round(first, 3),
                            "median_s": round(statistics.median(seconds), 3),
                            "max_s": round(max(seconds), 3),
                            "script_median_s": round(statistics.median(script), 3),
                            "loads": [round(s, 3) for s in seconds],
                            "tracebacks": errors + sum(e for _, e in loads),
                            "load_average": round(os.getloadavg()[0], 2),
                        }
                    )
            finally:
                browser.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", nargs="+", default=[p or "home" for p in PAGES])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "page_load.json")
    args = parser.parse_args()
    pages = ["" if p == "home" else p for p in args.pages]
    unknown = sorted(set(pages) - set(PAGES))
    if unknown:
        parser.error(f"unknown pages {unknown}; choose from {[p or 'home' for p in PAGES]}")
    rows = measure(pages, args.repeats)
    print(f"{'page':<12}{'first s':>9}{'median s':>10}{'max s':>8}{'script s':>10}{'tracebacks':>12}{'load':>7}")
    for row in rows:
        print(
            f"{row['page']:<12}{row['first_s']:>9.2f}{row['median_s']:>10.2f}{row['max_s']:>8.2f}"
            f"{row['script_median_s']:>10.2f}{row['tracebacks']:>12}{row['load_average']:>7.1f}"
        )
    result = {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "repeats": args.repeats,
        "method": "real server (streamlit run) + headless Chromium; first: a fresh browser context; "
        "repeats: a new page (Streamlit session) each, one context (browser cache warm)",
        "machine": {
            "python": platform.python_version(),
            "processor": platform.machine(),
            "cpus": os.cpu_count(),
            "omp_threads": os.environ.get("OMP_NUM_THREADS"),
        },
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    temporary = args.out.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(result, indent=2) + "\n")
    temporary.replace(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
