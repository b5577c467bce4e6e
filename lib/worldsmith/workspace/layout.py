"""Where everything of a workspace lives: the one place that spells its folders.

    <root>/datasets/<name>/        manifest.json, parts/*.parquet, splits.parquet, search.sqlite
    <root>/worldbooks/<name>/      HEAD and the immutable versions of a worldbook
    <root>/reports/                <ingest_id>.json and <ingest_id>.quarantine.jsonl
    <root>/redaction/              <dataset>.json: a redacted dataset's pseudonym mapping, kept apart from it
    <root>/uploads/                files uploaded through the workbench (sanitised names)
    <root>/recorded/               episodes added from code (played sessions) before their import
    <root>/sessions/               simulator sessions (`worldsmith simulate`, the servers)
    <root>/runs/<kind>/<name>/     runs: collect, build, eval, curves, envace, propose, explore, ...
    <root>/cache/<kind>/           recomputable results (held-out predictions, ...)
    <root>/.staging/               half-written imports, swept when a workspace opens
    <root>/annotations.sqlite      failure tags and notes on evaluation runs' turns

`WorkspaceLayout` has no side effects (building one touches no file), so code that only needs a path
(a workbench page given a root string, a job folder) uses it instead of opening a `Workspace`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["WorkspaceLayout", "env_family"]


@dataclass(frozen=True, slots=True)
class WorkspaceLayout:
    """The paths of one workspace root."""

    root: Path

    @classmethod
    def of(cls, root: str | Path) -> WorkspaceLayout:
        return cls(Path(root))

    @property
    def datasets_dir(self) -> Path:
        return self.root / "datasets"

    @property
    def books_dir(self) -> Path:
        return self.root / "worldbooks"

    @property
    def reports_dir(self) -> Path:
        return self.root / "reports"

    @property
    def redaction_dir(self) -> Path:
        return self.root / "redaction"

    @property
    def uploads_dir(self) -> Path:
        return self.root / "uploads"

    @property
    def recorded_dir(self) -> Path:
        return self.root / "recorded"

    @property
    def sessions_dir(self) -> Path:
        return self.root / "sessions"

    @property
    def staging_dir(self) -> Path:
        return self.root / ".staging"

    @property
    def annotations_path(self) -> Path:
        """Failure tags and notes (`workspace.failure_tags`)."""
        return self.root / "annotations.sqlite"

    def runs_dir(self, kind: str) -> Path:
        """The runs of one kind (`collect`, `build`, `eval`, `curves`, `envace`, `propose`, ...)."""
        return self.root / "runs" / _segment(kind, "run kind")

    def run_dir(self, kind: str, name: str) -> Path:
        return self.runs_dir(kind) / _segment(name, f"{kind} run name")

    def cache_dir(self, kind: str) -> Path:
        return self.root / "cache" / _segment(kind, "cache kind")


def _segment(value: str, what: str) -> str:
    """One path segment: never empty, never a way out of the workspace."""
    if not value or value in (".", "..") or "/" in value or "\\" in value or "\0" in value:
        raise ValueError(f"{what} must be one folder name, not {value!r}")
    return value


def env_family(env_id: str | None) -> str:
    """The environment an env id belongs to: `alfworld/pick_and_place/...` -> `alfworld` ("" for none)."""
    return (env_id or "").split("/", 1)[0]
