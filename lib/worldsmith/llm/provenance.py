"""What produced a reported number (`NumberProvenance`), and what a model was trained on, as its folder says.

    record = NumberProvenance(method="harness", model="none", dataset="shop", split="test", n=120, unit="turns",
                              run="shop-heldout")
    record.line()   # "method harness · model none · dataset shop · split test · n 120 turns · run shop-heldout"

`NumberProvenance` is the one record every report, `--json` output and page uses to say where a number came from:
method, model (spec and what it was trained on, or "none"), dataset (and its revision or content digest), split,
n (the units the number averages over) and the run (with the command or configuration that made it). A field
nobody recorded is None and reads "unknown", never a guess.

A local model folder (`tiny:PATH`, `hf:PATH`, `vllm:PATH`) may carry the record of the run that made it:
`worldsmith_tiny.json` (`worldsmith llm train-tiny`: steps and the data it saw) or `envace_config.json`
(an EnvACE run: its starting model and data). A remote model, or a folder without such a record, says nothing:
`trained_on` is None then, never a guess.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from worldsmith.llm import indomain
from worldsmith.llm.spec import parse_spec

__all__ = ["UNKNOWN", "NumberProvenance", "envace_trained_on", "trained_on"]

UNKNOWN = "unknown"


class NumberProvenance(BaseModel):
    """What produced one reported number (or one row of numbers): method, model, dataset, split, n and the run.

    Unknown keys are kept, so a record written by newer code still loads; None means not recorded ("unknown")."""

    model_config = ConfigDict(extra="allow")

    method: str | None = Field(default=None, description="The method (world model, probe) that made the predictions.")
    model: str | None = Field(default=None, description='Model spec the method used, "none" for no model.')
    trained_on: str | None = Field(default=None, description="What the model was trained on, where its folder says.")
    dataset: str | None = Field(default=None, description="Dataset name (or the files) the numbers were scored on.")
    dataset_digest: str | None = Field(default=None, description="The dataset's revision or content digest.")
    split: str | None = Field(default=None, description='The split (or selection) scored; "all" for the whole set.')
    protocol: str | None = Field(default=None, description="How predictions were made (open loop, teacher forced).")
    n: int | None = Field(default=None, description="How many units the number averages over.")
    unit: str = Field(default="records", description="What n counts (turns, episodes, checks, transitions).")
    episodes: int | None = Field(default=None, description="Episodes the units come from (intervals resample them).")
    run: str | None = Field(default=None, description="The run (or computation) that produced the number.")
    command: str | None = Field(default=None, description="The command or configuration that produced it.")
    recorded: bool = Field(default=True, description="False: read back from an older report that did not record it "
                                                     "(known fields inferred from the report itself).")

    def fields(self) -> dict[str, str]:
        """The six things a reader asks, each as text ("unknown" where not recorded): method, model, dataset, split,
        n and run."""
        model = self.model or UNKNOWN
        if self.trained_on:
            model += f" (trained on: {self.trained_on})"
        dataset = self.dataset or UNKNOWN
        if self.dataset and self.dataset_digest:
            dataset += f" @ {self.dataset_digest}"
        n = UNKNOWN if self.n is None else f"{self.n} {self.unit}" + (
            f" of {self.episodes} episodes" if self.episodes is not None and self.unit != "episodes" else "")
        return {"method": self.method or UNKNOWN, "model": model, "dataset": dataset, "split": self.split or UNKNOWN,
                "n": n, "run": self.run or UNKNOWN}

    def line(self, with_command: bool = True) -> str:
        """One line: `method harness · model none · dataset shop @ 3 · split test · n 120 turns of 8 episodes · run r`,
        then the protocol and (`with_command`) the command where known, and "(inferred)" for an older report's."""
        parts = [f"{name} {value}" for name, value in self.fields().items()]
        if self.protocol:
            parts.append(f"protocol {self.protocol}")
        if self.command and with_command:
            parts.append(f"from `{self.command}`")
        return " · ".join(parts) + ("" if self.recorded else " (inferred: not recorded by this run)")

_LOCAL_KINDS = ("tiny", "hf", "vllm")


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _tiny(record: dict[str, Any], folder: Path) -> str:
    data: dict[str, Any] = record["data"] if isinstance(record.get("data"), dict) else {}
    seen = ", ".join(f"{data[key]} {key}" for key in ("episodes", "turns") if data.get(key) is not None)
    source = indomain.trained_on(f"tiny:{folder}")  # the dataset and split it recorded; the bundled one's samples
    return (f"worldsmith llm train-tiny, {record.get('steps', '?')} steps" + (f" on {seen}" if seen else "")
            + (f" of {indomain.trained_on_label(source)}" if source else ""))


def envace_trained_on(record: dict[str, Any]) -> str:
    """What an EnvACE run trains its model on, from its config (`envace_config.json`, a run's config.json)."""
    data: dict[str, Any] = record["data"] if isinstance(record.get("data"), dict) else {}
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
        return envace_trained_on(record)
    record = _read(folder / "worldsmith_tiny.json")
    return _tiny(record, folder) if record is not None else None
