"""A folder the ingest cannot list is reported like an unreadable file, never skipped in silence."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

_INGEST = """
import json, os, sys
from worldsmith.workspace import Workspace
if sys.argv[3] == "drop":  # root lists anything: warm every import up, then become nobody
    Workspace(sys.argv[4]).ingest([sys.argv[5]], "warm")
    os.setgid(65534)
    os.setuid(65534)
report = Workspace(sys.argv[1]).ingest([sys.argv[2]], "d")
print(json.dumps(report.summary()))
"""


@pytest.mark.skipif(not hasattr(os, "setuid"), reason="POSIX permissions")
def test_an_unlistable_subfolder_is_reported_and_the_rest_imported() -> None:
    root = Path(tempfile.mkdtemp(dir="/tmp"))  # outside pytest's private tmp, so another user can enter it
    try:
        traces = root / "traces"
        (traces / "secret").mkdir(parents=True)
        sample = Path(__file__).resolve().parents[2] / "data_samples" / "collected" / "alfworld_expert.jsonl"
        shutil.copy(sample, traces / "alf.jsonl")
        (traces / "secret" / "hidden.jsonl").write_bytes(sample.read_bytes())
        for path in (root, traces, traces / "alf.jsonl"):
            path.chmod(0o777 if path.is_dir() else 0o644)
        (traces / "secret").chmod(0o000)
        drop = "drop" if os.geteuid() == 0 else "keep"
        done = subprocess.run([sys.executable, "-c", _INGEST, str(root / "ws"), str(traces), drop,
                               str(root / "warm"), str(traces / "alf.jsonl")], capture_output=True, text=True,
                              timeout=300, env={**os.environ, "HOME": str(root)})
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        by_path = {Path(f["path"]).name: f for f in summary["files"]}
        assert by_path["alf.jsonl"]["episodes"] > 0 and summary["committed"]
        assert by_path["secret"]["error"] == "could not list the folder: Permission denied"
        assert summary["rejected"] == 1 and "secret" in summary["rejects"][0]["source"]
    finally:
        (root / "traces" / "secret").chmod(0o755)
        shutil.rmtree(root, ignore_errors=True)
