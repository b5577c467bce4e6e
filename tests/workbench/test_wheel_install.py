"""A non-editable install works without the source checkout: the wheel installs the `workbench` package and carries
its pages, the sample traces and the tiny default model (`worldsmith._resources`).

The wheel is built from a copy of the tracked sources, installed with `--no-deps` into a fresh venv (the
project venv's packages serve as its dependencies, but not its editable worldsmith), and run from a folder
outside the checkout with no PYTHONPATH: `worldsmith llm chat` on the default model, and `worldsmith workbench`,
whose Home page must render in Chromium with the bundled samples imported on first start.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_support import _wait_healthy, require_browser
from workbench_support import REPO

from ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# What `pip wheel .` reads: the build configuration and every folder that lands in the wheel (setup.py).
SOURCES = ("pyproject.toml", "setup.py", "README.md", "lib", "workbench", "pages", "data_samples")
_NOT_SOURCES = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".ipynb_checkpoints")


def _run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, **kwargs)  # type: ignore[call-overload]
    assert result.returncode == 0, f"{command} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A fresh venv with the wheel installed, a working directory outside the checkout, and a clean environment."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "src"
    source.mkdir()
    for name in SOURCES:
        origin = REPO / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=_NOT_SOURCES)
        else:
            shutil.copy2(origin, source / name)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "--no-build-isolation", "-q",
          str(source), "-w", str(base / "dist")])
    (wheel,) = (base / "dist").glob("worldsmith-*.whl")

    venv = base / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)])
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)])
    # The dependencies come from the project venv: its site-packages as a plain path, so the .pth that puts
    # the checkout's lib/ on the path (the editable install) is not processed there.
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    project_sites = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site / "worldsmith_test_deps.pth").write_text("".join(f"{path}\n" for path in project_sites), encoding="utf-8")

    cwd = base / "elsewhere"
    cwd.mkdir()
    env = {key: value for key, value in os.environ.items()
           if key != "PYTHONPATH" and not key.startswith("WORLDSMITH_")}
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    return {"venv": venv, "site": site, "cwd": cwd, "workspace": base / "ws", "env": env}  # type: ignore[dict-item]


def _worldsmith(installed: dict, *args: str) -> list[str]:
    return [str(installed["venv"] / "bin" / "worldsmith"), *args]


def test_the_installed_package_is_the_wheel_not_the_checkout(installed: dict) -> None:
    code = ("import worldsmith, workbench, worldsmith._resources as r; print(worldsmith.__file__); "
            "print(workbench.__file__); print(r.bundle_root()); print(r.workbench_app())")
    module, workbench, bundle, app = _run([str(installed["venv"] / "bin" / "python"), "-c", code],
                                          cwd=installed["cwd"], env=installed["env"]).stdout.split()
    assert Path(module).is_relative_to(installed["site"])
    assert Path(workbench) == installed["site"] / "workbench" / "__init__.py"  # a package of its own, beside worldsmith
    assert Path(app) == installed["site"] / "workbench" / "app.py"
    assert Path(bundle) == installed["site"] / "worldsmith" / "_bundled"


def test_llm_chat_runs_the_bundled_default_model(installed: dict) -> None:
    result = _run(_worldsmith(installed, "llm", "chat", "look", "--max-tokens", "4", "--json",
                              "--workspace", str(installed["workspace"])), cwd=installed["cwd"], env=installed["env"])
    report = json.loads(result.stdout)
    assert report["model"] == f"tiny:{installed['site'] / 'worldsmith' / '_bundled' / 'data_samples' / 'models' / 'tiny'}"
    assert report["completions"][0]["completion_tokens"] > 0


@pytest.fixture(scope="module")
def server(installed: dict) -> Iterator[dict]:
    """`worldsmith workbench` from the installed wheel, on an empty workspace (first start imports the samples)."""
    require_browser()
    port = free_port()
    log = installed["cwd"] / "workbench.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            _worldsmith(installed, "workbench", "--port", str(port), "--workspace", str(installed["workspace"])),
            cwd=installed["cwd"], env=installed["env"], stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process, log)
        yield {"url": url, "log": log}
    finally:
        os.killpg(process.pid, 15)  # the CLI and the streamlit process it started
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait(timeout=15)


def test_workbench_serves_home_with_the_bundled_samples(server: dict, page) -> None:
    from playwright.sync_api import expect

    page.goto(server["url"])
    expect(page.get_by_role("heading", name="worldsmith")).to_be_visible()
    expect(page.get_by_role("heading", name="Datasets (1)")).to_be_visible()  # the samples, imported on first start
    expect(page.get_by_role("heading", name="samples", exact=True)).to_be_visible()
    expect(page.get_by_test_id("stToastText")).to_contain_text("Imported the sample traces")
    assert "Traceback" not in server["log"].read_text(errors="replace")
