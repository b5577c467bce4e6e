"""Every notebook in notebooks/ runs top to bottom in a real kernel (the interpreter running pytest)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = REPO / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
KERNEL_NAME = "python3"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _ids(paths: list[Path]) -> list[str]:
    return [path.name for path in paths]


@pytest.fixture
def kernel_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A `python3` kernelspec that runs this interpreter, first on JUPYTER_PATH.

    Without it, `python3` may resolve to whichever kernelspec is installed system- or user-wide,
    i.e. another Python without worldsmith.
    """
    from jupyter_client.kernelspec import KernelSpecManager

    spec_dir = tmp_path / "jupyter" / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"Python 3 ({sys.executable})",
        "language": "python",
        "metadata": {"debugger": False},
    }))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    # Keep the kernel away from the user's IPython profile and startup files.
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    spec = KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    assert spec.argv[0] == sys.executable, f"kernelspec {KERNEL_NAME!r} resolves to {spec.argv[0]}"
    return KERNEL_NAME


def test_notebooks_exist() -> None:
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOK_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    stored = [i for i, cell in enumerate(nb.cells)
              if cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count") is not None)]
    assert not stored, f"{path.name}: cells {stored} have stored outputs; clear them before committing"


@pytest.mark.integration
@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_runs(path: Path, kernel_env: str) -> None:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=300, kernel_name=kernel_env, resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
    )
    try:
        client.execute()
    except CellExecutionError as error:
        failing = next(
            (i for i, cell in enumerate(nb.cells)
             if cell.cell_type == "code" and any(o.get("output_type") == "error" for o in cell.get("outputs", []))),
            None,
        )
        where = f"cell {failing}" if failing is not None else "a cell"
        pytest.fail(f"{path.name}: {where} raised:\n{_ANSI.sub('', str(error))}", pytrace=False)
    errors = [i for i, cell in enumerate(nb.cells)
              if cell.cell_type == "code" and any(o.get("output_type") == "error" for o in cell.get("outputs", []))]
    assert not errors, f"{path.name}: cells {errors} produced errors"
