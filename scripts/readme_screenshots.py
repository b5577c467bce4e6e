"""Regenerate the README's workbench screenshots (docs/screenshots/*.png) from a fresh workspace.

The workbench starts on an empty workspace, so its first-start bootstrap imports the bundled samples, splits
them and builds worldbook `alfworld` on the train split. The script then walks the curation loop in headless
Chromium: the Worldbook page with the held-out `test` split chosen, a rule's template edited (the evidence
guard), the held-out delta with its flipped turns, proposed fixes on a rule card, and the results of a first
evaluation (`worldsmith eval` on the held-out `test` split).

    .venv/bin/python scripts/readme_screenshots.py [--out docs/screenshots]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("WORLDSMITH_CHROMIUM", "/usr/bin/chromium")
WAIT_MS = 60_000


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_healthy(url: str, process: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"streamlit exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.read().decode().strip() == "ok":
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"the workbench did not answer within {timeout:.0f} s")


def _best_rule(workspace: Path, action: str) -> str:
    """The best-supported rule of `action` in the bootstrap's book (the one an edit visibly breaks)."""
    sys.path.insert(0, str(REPO / "lib"))
    from worldsmith.worldbook import WorldbookStore

    book = WorldbookStore(workspace / "worldbooks").load("alfworld")
    return max((rule for rule in book.rules if rule.action == action), key=lambda rule: rule.support).id


def _rule_with_proposals(workspace: Path) -> str | None:
    """A rule of the book's HEAD for which fixes are proposed (one whose replay fails some turns)."""
    from worldsmith.worldbook import WorldbookStore, propose_patches

    store = WorldbookStore(workspace / "worldbooks")
    head = store.head("alfworld")
    book = store.load("alfworld", head)
    return next((rule.id for rule in book.rules if propose_patches(book, rule.id, version=head, limit=1)), None)


def _shoot(page, out: Path, name: str) -> None:
    page.wait_for_timeout(800)  # let the last rerun settle
    page.screenshot(path=str(out / f"{name}.png"), full_page=False)
    print(f"wrote {out / name}.png")


def walk(url: str, workspace: Path, out: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(WAIT_MS)
        page.goto(url)  # the first start: samples imported, split, book built
        expect(page.get_by_role("heading", name="worldsmith").first).to_be_visible()
        deadline = time.monotonic() + 120
        while not (workspace / "worldbooks" / "alfworld").exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        rule = _best_rule(workspace, "go")
        # the first evaluation, on the book as first built (before the edits below)
        subprocess.run([sys.executable, "-m", "worldsmith", "eval", "--workspace", str(workspace), "--book",
                        "alfworld", "--dataset", "samples", "--split", "test", "--env", "alfworld", "--methods",
                        "harness,nearest", "--out", "first"], check=True, cwd=REPO, capture_output=True)
        page.goto(f"{url}/worldbook?book=alfworld&rule={rule}&heldout_dataset=samples&heldout_split=test")
        expect(page.get_by_text("This is the book's first version")).to_be_visible()
        template = page.get_by_role("textbox", name="Observation template").filter(visible=True).first
        template.fill("You go nowhere.")
        template.press("Control+Enter")
        page.get_by_role("button", name="Save rule").click()
        expect(page.get_by_text("fail its own evidence")).to_be_visible()
        page.get_by_text("fail its own evidence").first.scroll_into_view_if_needed()
        _shoot(page, out, "loop-guard")
        page.get_by_role("button", name="Save anyway").click()
        expect(page.get_by_text("Held-out delta of")).to_be_visible()
        page.get_by_text("Held-out delta of").first.scroll_into_view_if_needed()
        _shoot(page, out, "loop-delta")

        proposed = _rule_with_proposals(workspace)
        if proposed is not None:
            page.goto(f"{url}/worldbook?book=alfworld&rule={proposed}&heldout_dataset=samples&heldout_split=test")
            page.get_by_role("button", name="Propose fixes for its failed turns").first.click()
            expect(page.get_by_role("button", name="Apply").first).to_be_visible()
            page.get_by_role("button", name="Apply").first.scroll_into_view_if_needed()
            _shoot(page, out, "loop-proposals")

        page.goto(f"{url}/evaluate")
        expect(page.get_by_role("heading", name="Evaluate").first).to_be_visible()
        expect(page.locator("[data-testid='stDataFrame']").first).to_be_visible()
        _shoot(page, out, "evaluate")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ws-shots-") as folder:
        workspace = Path(folder) / "workspace"
        port = _free_port()
        env = {**os.environ, "WORLDSMITH_WORKSPACE": str(workspace), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
        env.pop("WORLDSMITH_SAMPLES", None)
        log = open(Path(folder) / "streamlit.log", "wb")  # noqa: SIM115 - closed after the server stops
        process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "workbench/app.py", "--server.port", str(port),
             "--server.address", "127.0.0.1", "--server.headless", "true"],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_healthy(url, process)
            walk(url, workspace, args.out)
        finally:
            process.terminate()
            process.wait(timeout=15)
            log.close()


if __name__ == "__main__":
    main()
