"""The EnvACE run store: what a training run leaves on disk for the CLI, the workbench and sweeps.

`<run>/config.json`, `metrics.jsonl` (one object per logged step), `probes.jsonl` (each probe
with real and rehearsed responses side by side), `checkpoints/step-<N>/`, `summary.json` and
`status.json` (`state: running|done|failed`, `pid`, `host`, `updated`, `error`; read back as `stopped`
when it says running but its process is gone: killed, crashed, the machine restarted). JSON files are replaced
atomically; JSONL files are appended and fsynced line by line, and cut back to a checkpoint's
step on resume, so a killed run never leaves a half line or steps its checkpoint does not have.
"""

from __future__ import annotations

import os
import re
import socket
import time
from pathlib import Path
from typing import Any

import orjson

from worldsmith.llm.provenance import NumberProvenance, envace_trained_on
from worldsmith.util.atomic import atomic_write_bytes, atomic_write_json
from worldsmith.util.jobs import JobFolder
from worldsmith.util.processes import process_alive
from worldsmith.workspace.layout import WorkspaceLayout

__all__ = ["TrainingRunStore", "launch_dir", "launch_jobs", "process_alive", "read_jsonl", "run_states", "runs_dir"]

_STEP_DIR = re.compile(r"^step-(\d+)$")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Complete JSON lines of a file (a torn last line from a killed writer is skipped)."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_bytes().splitlines():
        if line.strip():
            try:
                rows.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                continue
    return rows


def runs_dir(workspace_root: str | Path) -> Path:
    """`<workspace>/runs/envace`: the training runs of a workspace, one folder each."""
    return WorkspaceLayout.of(workspace_root).runs_dir("envace")


def launch_dir(workspace_root: str | Path) -> Path:
    """`<workspace>/runs/envace/.launch`: the configs (`<run>.json`) and job records (`<run>.job.json`) of the
    training runs and sweeps started in the background (the Train page)."""
    return runs_dir(workspace_root) / ".launch"


def launch_jobs(workspace_root: str | Path) -> JobFolder:
    """The job records of the training runs and sweeps started in the background, for the page and the CLI."""
    return JobFolder(launch_dir(workspace_root), kind="train", suffix=".job.json")


class TrainingRunStore:
    """One run's folder."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def is_run(self) -> bool:
        """Whether the folder holds a run (it has written its config or status)."""
        return any((self.root / name).exists() for name in ("config.json", "status.json"))

    @property
    def checkpoints_dir(self) -> Path:
        return self.root / "checkpoints"

    def prepare(self) -> None:
        self.checkpoints_dir.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ JSON documents

    def write_config(self, config: dict[str, Any]) -> None:
        atomic_write_json(self.root / "config.json", config)

    def read_config(self) -> dict[str, Any] | None:
        path = self.root / "config.json"
        return orjson.loads(path.read_bytes()) if path.is_file() else None

    def write_summary(self, summary: dict[str, Any]) -> None:
        atomic_write_json(self.root / "summary.json", summary)

    def read_summary(self) -> dict[str, Any] | None:
        path = self.root / "summary.json"
        return orjson.loads(path.read_bytes()) if path.is_file() else None

    def write_status(self, state: str, *, error: str | None = None, **extra: Any) -> None:
        status = {"state": state, "pid": os.getpid(), "host": socket.gethostname(), "updated": time.time(),
                  "error": error, **extra}
        atomic_write_json(self.root / "status.json", status)

    def read_status(self) -> dict[str, Any] | None:
        """The run's status; a `running` one whose process is gone (on this host) reads as `stopped`: nothing
        will write it again, and a resume continues from the last checkpoint."""
        path = self.root / "status.json"
        if not path.is_file():
            return None
        status = orjson.loads(path.read_bytes())
        here = status.get("host") in (None, socket.gethostname())
        if status.get("state") == "running" and here and not process_alive(status.get("pid"), status.get("updated")):
            status = {**status, "state": "stopped",
                      "note": f"process {status.get('pid')} is gone: killed or crashed; resume to continue"}
        return status

    # ------------------------------------------------------------------ JSON lines

    def _append(self, name: str, row: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / name, "ab") as handle:
            handle.write(orjson.dumps(row, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
            handle.flush()
            os.fsync(handle.fileno())

    def append_metrics(self, row: dict[str, Any]) -> None:
        self._append("metrics.jsonl", row)

    def append_probe(self, row: dict[str, Any]) -> None:
        self._append("probes.jsonl", row)

    def metrics(self) -> list[dict[str, Any]]:
        return read_jsonl(self.root / "metrics.jsonl")

    def probes(self) -> list[dict[str, Any]]:
        return read_jsonl(self.root / "probes.jsonl")

    @staticmethod
    def probe_split(source: str | None, split: str | None) -> str:
        """What a probe's episodes were, truthfully: "held-out (split test)", "training episodes", or, for a run that
        did not record it, that it is not known."""
        if source == "train":
            return "training episodes"
        if source == "holdout":
            return f"held-out ({split or 'last episodes by id'})"
        if source == "held-out":  # a split's name, or a description of what was held out ("1 of 6 trajectory families")
            if not split:
                return "held-out (split not recorded)"
            return f"held-out ({split})" if " " in split else f"held-out (split {split})"
        return "probe episodes not recorded"

    def probe_provenance(self, probe: dict[str, Any] | None = None) -> NumberProvenance:
        """What produced a rehearsal-fidelity probe's numbers (default the last probe): the run's model at the probe's
        step, the probe episodes' dataset and split, n transitions scored, the run and the config that made it."""
        config = self.read_config() or {}
        summary = self.read_summary() or {}
        if probe is None:
            probe = next(reversed(self.probes()), None) or {"source": summary.get("probe_source"),
                                                             "split": summary.get("probe_split"), "n": None}
        settings: dict[str, Any] = config["probe"] if isinstance(config.get("probe"), dict) else {}
        data: dict[str, Any] = config["data"] if isinstance(config.get("data"), dict) else {}
        own = settings.get("paths") or settings.get("dataset")  # the probe's own held-out data, else the run's data
        origin = settings if own else data
        dataset = origin.get("dataset") or ", ".join(origin.get("paths") or []) or None
        step = probe.get("step")
        trained = envace_trained_on(config) + (f", to step {step}" if step is not None else "") if config else None
        return NumberProvenance(method=f"EnvACE rehearsal probe ({probe.get('metric') or settings.get('metric') or '?'})",
                                model=config.get("model"), trained_on=trained, dataset=dataset,
                                split=self.probe_split(probe.get("source"), probe.get("split")),
                                protocol="teacher forced (the real prefix, one response rehearsed)", n=probe.get("n"),
                                unit="transitions", run=self.root.name,
                                command=f"worldsmith envace train --config {self.root / 'config.json'}" if config else None)

    def truncate(self, step: int) -> None:
        """Drop logged rows after `step` (what a resumed run will log again)."""
        for name in ("metrics.jsonl", "probes.jsonl"):
            path = self.root / name
            if path.is_file():
                rows = [row for row in read_jsonl(path) if int(row.get("step", 0)) <= step]
                atomic_write_bytes(path, b"".join(orjson.dumps(row) + b"\n" for row in rows))

    # ------------------------------------------------------------------ checkpoints

    def checkpoint_dir(self, step: int) -> Path:
        return self.checkpoints_dir / f"step-{step}"

    def checkpoints(self) -> list[tuple[int, Path]]:
        """Complete checkpoints (those with trainer_state.json), oldest first."""
        if not self.checkpoints_dir.is_dir():
            return []
        found = []
        for path in self.checkpoints_dir.iterdir():
            match = _STEP_DIR.match(path.name)
            if match and (path / "trainer_state.json").is_file():
                found.append((int(match.group(1)), path))
        return sorted(found)

    def latest_checkpoint(self) -> tuple[int, Path] | None:
        found = self.checkpoints()
        return found[-1] if found else None

    # ------------------------------------------------------------------ checkpoint evaluations

    @property
    def evals_dir(self) -> Path:
        """Where checkpoint evaluations of this run are written (`evals/<name>/report.json`)."""
        return self.root / "evals"

    def evaluations(self) -> list[tuple[str, dict[str, Any]]]:
        """Each checkpoint evaluation's name and report, newest (by name) first; unreadable reports are skipped."""
        found = []
        for path in self.evals_dir.glob("*/report.json") if self.evals_dir.is_dir() else []:
            try:
                value = orjson.loads(path.read_bytes())
            except (OSError, orjson.JSONDecodeError):
                continue
            if isinstance(value, dict):
                found.append((path.parent.name, value))
        return sorted(found, key=lambda item: item[0], reverse=True)


def run_states(folder: str | Path) -> list[dict[str, Any]]:
    """One row per run folder under `folder` (`<workspace>/runs/envace`): name, state, step, steps, objective,
    updated, error; what `worldsmith envace runs` lists."""
    rows: list[dict[str, Any]] = []
    root = Path(folder)
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        if not path.is_dir() or path.name.startswith(".") or not (path / "status.json").is_file():
            continue
        store = TrainingRunStore(path)
        try:
            status = store.read_status() or {}
            config = store.read_config() or {}
        except (OSError, ValueError) as error:
            rows.append({"name": path.name, "state": "unreadable", "error": str(error)})
            continue
        rows.append({"name": path.name, "state": status.get("state"), "step": status.get("step"),
                     "steps": status.get("steps") or config.get("steps"), "objective": config.get("objective"),
                     "updated": status.get("updated"), "error": status.get("error") or status.get("note")})
    return rows
