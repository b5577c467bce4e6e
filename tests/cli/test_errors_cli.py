"""How the `worldsmith` command reports failures: a `WorldsmithError` is one line (or a JSON object) and its kind's
exit code; anything else is a bug and crashes with a traceback. No broad `except ValueError`/`OSError` in the CLI."""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

import worldsmith.cli.traces as traces_cli
from worldsmith.cli.main import main
from worldsmith.util.errors import (
    BadInputError,
    BusyError,
    ConflictError,
    NotFoundError,
    UnavailableError,
    WorldsmithError,
)

CLI = Path(__file__).resolve().parents[2] / "lib" / "worldsmith" / "cli"
BROAD = {"ValueError", "OSError", "Exception", "BaseException", "EnvironmentError", "IOError"}


@pytest.mark.parametrize(("kind", "code"), [(WorldsmithError, 1), (BadInputError, 3), (NotFoundError, 4),
                                            (ConflictError, 5), (BusyError, 6), (UnavailableError, 7)])
def test_each_kind_is_one_line_naming_where_and_its_exit_code(
        kind: type[WorldsmithError], code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    def failing(args: argparse.Namespace) -> int:
        raise kind("must be at least 1, not 0", where="eval.yaml: seeds")

    monkeypatch.setattr(traces_cli, "run_datasets", failing)  # the parser is built in main: it picks this up
    assert main(["datasets", "--workspace", str(tmp_path)]) == code
    captured = capsys.readouterr()
    assert captured.err == "worldsmith: error: eval.yaml: seeds: must be at least 1, not 0\n" and captured.out == ""
    assert main(["datasets", "--workspace", str(tmp_path), "--json"]) == code
    assert orjson.loads(capsys.readouterr().out) == {
        "error": "eval.yaml: seeds: must be at least 1, not 0", "kind": kind.kind, "where": "eval.yaml: seeds"}


def test_real_failures_name_the_thing_with_their_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = str(tmp_path / "ws")
    assert main(["traces", "list", "--dataset", "nope", "--workspace", ws]) == NotFoundError.exit_code
    err = capsys.readouterr().err
    assert err.startswith("worldsmith: error: no dataset 'nope'") and err.count("\n") == 1
    missing = tmp_path / "patch.json"
    assert main(["book", "patch", "doors", "--file", str(missing), "--workspace", ws, "--json"]) == 4
    assert orjson.loads(capsys.readouterr().out) == {
        "error": f"--file {missing}: no such file or folder", "kind": "not_found", "where": f"--file {missing}"}
    assert main(["book", "show", "../up", "--workspace", ws]) == BadInputError.exit_code
    assert "worldbook name '../up'" in capsys.readouterr().err
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["traces", "schema", "--out", str(blocker / "schema.json")]) == 3  # a file where a folder must be
    assert capsys.readouterr().err.startswith(f"worldsmith: error: --out {blocker / 'schema.json'}: ")
    assert main(["serve", "doors", "--mcp", "--describe", "--max-tokens", "0", "--workspace", ws, "--json"]) == 3
    assert orjson.loads(capsys.readouterr().out)["error"] == "--max-tokens: Input should be greater than or equal to 1"


def test_a_bug_in_a_command_crashes_with_a_traceback(tmp_path: Path) -> None:
    script = ("import sys\nimport worldsmith.cli.traces as t\n"
              "def boom(args):\n    raise RuntimeError('a bug, not bad input')\n"
              "t.run_datasets = boom\nfrom worldsmith.cli.main import main\nsys.exit(main(sys.argv[1:]))\n")
    done = subprocess.run([sys.executable, "-c", script, "datasets", "--workspace", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, env={**os.environ})
    assert done.returncode == 1
    assert "Traceback (most recent call last)" in done.stderr and "RuntimeError: a bug, not bad input" in done.stderr
    assert "worldsmith: error:" not in done.stderr


def _caught_names(node: ast.expr | None) -> list[str]:
    if node is None:
        return ["(bare except)"]
    items = node.elts if isinstance(node, ast.Tuple) else [node]
    return [item.id if isinstance(item, ast.Name) else ast.unparse(item) for item in items]


def test_the_cli_catches_no_broad_builtin_errors() -> None:
    found = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ExceptHandler):
                broad = [name for name in _caught_names(node.type) if name in BROAD or name == "(bare except)"]
                if broad:
                    found.append(f"{path.name}:{node.lineno}: except {', '.join(broad)}")
    assert found == []


def test_the_checker_sees_a_broad_catch() -> None:
    tree = ast.parse("try:\n    pass\nexcept (KeyError, ValueError):\n    pass\n")
    handler = next(n for n in ast.walk(tree) if isinstance(n, ast.ExceptHandler))
    assert set(_caught_names(handler.type)) & BROAD == {"ValueError"}
