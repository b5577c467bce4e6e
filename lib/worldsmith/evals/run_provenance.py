"""What produced an evaluation run's numbers: one `NumberProvenance` per method and protocol, from the run's own record.

    eval_provenance("alf", config, "harness", "drift", model="none", n=120, episodes=8)
    eval_command(config)   # "worldsmith eval --book alfworld --version v3 --dataset alfworld --split test ... --out alf"

`report.build_report` writes these into every protocol block of report.json (`provenance`), and `EvalReport` infers
them for a report written before (from its configuration and counts: `recorded` False). The command is rebuilt from
the configuration the run stored, so a reader can rerun exactly that run.
"""

from __future__ import annotations

import shlex
from typing import Any

from worldsmith.llm.provenance import NumberProvenance

__all__ = ["PROTOCOL_LABELS", "eval_command", "eval_provenance"]

PROTOCOL_LABELS = {"live": "open loop, live (real environment)", "drift": "open loop (drift)",
                   "next-obs": "teacher forced (next-obs)", "w2r": "world to real (w2r)"}

# `worldsmith eval` flags for the configuration fields that choose what is scored, in the order the CLI lists them;
# a list is joined with commas, a default value is left out.
_FLAGS = (("book", "--book", None), ("book_version", "--version", None), ("dataset", "--dataset", None),
          ("split", "--split", None), ("env", "--env", None), ("folds", "--folds", 0),
          ("drop_leaked", "--drop-leaked", False), ("methods", "--methods", None), ("protocols", "--protocols", None),
          ("policy", "--policy", "expert"), ("llm", "--llm", None), ("judge", "--judge", None),
          ("seed", "--seed", 0), ("max_episodes", "--max-episodes", None), ("max_turns", "--max-turns", None),
          ("max_steps", "--max-steps", 50), ("real_env", "--real-env", None),
          ("divergence_metric", "--divergence", "exact_match"), ("divergence_threshold", "--divergence-threshold", 1.0))


def eval_command(config: dict[str, Any], run: str | None = None) -> str | None:
    """The `worldsmith eval` command line of a run's stored configuration (None without one): its resolved book
    version and model spec, so it names exactly what was scored."""
    if not config.get("dataset"):
        return None
    words = ["worldsmith", "eval"]
    for key, flag, default in _FLAGS:
        value = (config.get("llm_spec") or config.get(key)) if key == "llm" else config.get(key)
        if value is None or value == default or value == []:
            continue
        if isinstance(value, bool):
            words.append(flag)
            continue
        words += [flag, ",".join(map(str, value)) if isinstance(value, list) else str(value)]
    name = run or config.get("name")
    if name:
        words += ["--out", str(name)]
    return shlex.join(words)


def eval_provenance(run: str, config: dict[str, Any], method: str, protocol: str, *, model: str | None,
                    trained_on: str | None, n: int | None, episodes: int | None, unit: str = "turns",
                    recorded: bool = True) -> NumberProvenance:
    """What produced `method`'s numbers under `protocol` in run `run`: the dataset, its revision and split (all when
    the run chose none) from the run's configuration, `n` records (`unit`) of `episodes` episodes."""
    dataset = config.get("dataset")
    revision = config.get("dataset_revision")
    return NumberProvenance(method=method, model=model, trained_on=trained_on, dataset=dataset,
                            dataset_digest=str(revision) if revision is not None else None,
                            split=config.get("split") or ("all" if dataset else None),
                            protocol=PROTOCOL_LABELS.get(protocol, protocol) or None, n=n,
                            unit="episodes" if protocol == "w2r" else unit, episodes=episodes, run=run or None,
                            command=eval_command(config, run), recorded=recorded)
