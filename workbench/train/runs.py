"""EnvACE training runs as the Train page reads them: `<workspace>/runs/envace/<run>/` (J's run store).

The trainer writes `config.json`, `metrics.jsonl`, `probes.jsonl`, `checkpoints/step-<N>/`,
`summary.json` and `status.json`; this module only reads them (through `TrainingRunStore`, which skips a
torn last line of a killed writer). A run whose status says `running` but whose process is gone
(or whose pid now belongs to a process started after the run's last update) is shown as `stopped`:
it was killed and can be resumed by launching the same config again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from worldsmith.envace import TrainingRunStore, training_runs
from worldsmith.util import process_alive

__all__ = [
    "TrainRun",
    "evals_of",
    "list_runs",
    "load_run",
    "metrics_frame",
    "probe_examples",
    "process_alive",
    "runs_root",
]

runs_root = training_runs.runs_dir  # the Train page's name for it

RunState = str  # "running" | "done" | "failed" | "stopped" | "new"


@dataclass
class TrainRun:
    """One run folder: its state, progress, config and summary (whatever of them exists yet)."""

    name: str
    path: Path
    state: RunState
    step: int = 0
    steps: int | None = None
    objective: str | None = None
    updated: float | None = None
    pid: int | None = None
    error: str | None = None
    traceback: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] | None = None
    checkpoints: list[int] = field(default_factory=list)

    @property
    def label(self) -> str:
        progress = f" {self.step}/{self.steps}" if self.steps else ""
        return f"{self.name} · {self.objective or '?'} · {self.state}{progress}"

    @property
    def active(self) -> bool:
        return self.state == "running"

    def age(self) -> str:
        if self.updated is None:
            return "never"
        seconds = max(0.0, time.time() - self.updated)
        return f"{seconds:.0f} s ago" if seconds < 120 else f"{seconds / 60:.0f} min ago"


def load_run(path: Path) -> TrainRun:
    """A run folder's state; unreadable or missing files leave their fields empty rather than failing."""
    store = TrainingRunStore(path)
    try:
        status = store.read_status() or {}
    except (OSError, ValueError):
        status = {}
    try:
        config = store.read_config() or {}
    except (OSError, ValueError):
        config = {}
    try:
        summary = store.read_summary()
    except (OSError, ValueError):
        summary = None
    state = str(status.get("state") or ("done" if summary else "new"))
    updated = status.get("updated")
    pid = status.get("pid")
    # `read_status` already reads a running status whose process is gone as "stopped"
    return TrainRun(
        name=path.name,
        path=path,
        state=state,
        step=int(status.get("step") or (summary or {}).get("steps") or 0),
        steps=status.get("steps") or config.get("steps"),
        objective=config.get("objective") or (summary or {}).get("objective"),
        updated=float(updated) if isinstance(updated, int | float) else None,
        pid=int(pid) if isinstance(pid, int) else None,
        error=status.get("error"),
        traceback=status.get("traceback"),
        config=config,
        summary=summary,
        checkpoints=[step for step, _ in store.checkpoints()],
    )


def list_runs(root: str | Path) -> list[TrainRun]:
    """Every run folder under `<root>/runs/envace` and every training run launched from the page (even before
    it wrote anything), running ones first, then the most recently updated."""
    folder = runs_root(root)
    if not folder.is_dir():
        return []
    runs = [load_run(path) for path in folder.iterdir()
            if path.is_dir() and not path.name.startswith(".") and TrainingRunStore(path).is_run()]
    listed = {run.name for run in runs}
    # launched from the page but nothing written yet (starting, or died at once): listed, so it shows at once
    launched = training_runs.launch_jobs(root)
    for name in launched.runs():
        if name not in listed and (launched.path / f"{name}.json").exists():
            runs.append(load_run(folder / name))
    return sorted(runs, key=lambda run: (not run.active, -(run.updated or 0.0), run.name))


def metrics_frame(path: Path) -> pd.DataFrame:
    """`metrics.jsonl` as a frame indexed by step (the last row of a step wins: a resumed run relogs it)."""
    rows = TrainingRunStore(path).metrics()
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame(rows)
    if "step" in frame:
        frame = frame.drop_duplicates("step", keep="last").sort_values("step").reset_index(drop=True)
    return frame


def probe_examples(path: Path) -> list[dict[str, Any]]:
    """Each probe (step, metric, value, drift) with its examples: action, real and rehearsed responses, scores."""
    return [row for row in TrainingRunStore(path).probes() if isinstance(row, dict)]


def evals_of(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Checkpoint evaluations written inside the run (`<run>/evals/<name>/report.json`), newest first."""
    return TrainingRunStore(path).evaluations()
