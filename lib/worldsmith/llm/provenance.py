"""What a model was trained on, as its folder says: a report names the model a number came from, not only its spec.

A local model folder (`tiny:PATH`, `hf:PATH`, `vllm:PATH`) may carry the record of the run that made it:
`worldsmith_tiny.json` (`worldsmith llm train-tiny`: steps and the data it saw) or `envace_config.json`
(an EnvACE run: its starting model and data). A remote model, or a folder without such a record, says nothing:
`trained_on` is None then, never a guess.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from worldsmith.llm import indomain
from worldsmith.llm.spec import parse_spec

__all__ = ["trained_on"]

_LOCAL_KINDS = ("tiny", "hf", "vllm")


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _tiny(record: dict[str, Any], folder: Path) -> str:
    data = record.get("data") if isinstance(record.get("data"), dict) else {}
    seen = ", ".join(f"{data[key]} {key}" for key in ("episodes", "turns") if data.get(key) is not None)
    source = indomain.trained_on(f"tiny:{folder}")  # the dataset and split it recorded; the bundled one's samples
    return (f"worldsmith llm train-tiny, {record.get('steps', '?')} steps" + (f" on {seen}" if seen else "")
            + (f" of {indomain.trained_on_label(source)}" if source else ""))


def _envace(record: dict[str, Any]) -> str:
    data = record.get("data") if isinstance(record.get("data"), dict) else {}
    sources = [*(data.get("paths") or [])]
    if data.get("dataset"):
        sources.append(f"dataset {data['dataset']}" + (f" split {data['split']}" if data.get("split") else ""))
    env = f" (env {data['env']})" if data.get("env") else ""
    objective = f" {record['objective']}" if record.get("objective") else ""
    return f"EnvACE{objective} from {record.get('model', '?')} on {', '.join(sources) or '?'}{env}"


def trained_on(spec: str | None) -> str | None:
    """One line on what the model of `spec` was trained on, from its folder's training record; None when unknown."""
    if not spec:
        return None
    try:
        parsed = parse_spec(spec)
    except ValueError:
        return None
    if parsed.kind not in _LOCAL_KINDS:
        return None
    folder = Path(parsed.model)
    record = _read(folder / "envace_config.json")
    if record is not None:
        return _envace(record)
    record = _read(folder / "worldsmith_tiny.json")
    return _tiny(record, folder) if record is not None else None
