"""In-domain models: the tiny model trained on a dataset's own train split, and which model answers by default.

Why: the bundled tiny model learnt from the sample traces (mostly ALFWorld and other text games), so on a
tool-API dataset it answers a tool call with "You arrive at loc 1..." and a model-backed baseline scored with
it is a strawman. A dataset with a train split can have its own tiny model, trained on that split
(`train_on_split`, `worldsmith llm train-tiny --dataset D --split train`) into the conventional folder
`<workspace>/models/tiny-<dataset>` (or named `tiny-<dataset>` in models.toml); `model_for_dataset` then makes it
the default model of that dataset's model-backed methods, and says when the default is the bundled model instead.

    choice = model_for_dataset(root, "shop", split="test")
    print(choice.spec, choice.trained_on_label, choice.warning)
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from worldsmith._resources import tiny_model_dir
from worldsmith.llm.spec import MODEL_ENV_VAR, configured_models, resolve_spec
from worldsmith.llm.tiny import REPORT_FILE, TinyConfig, TinyReport, TrainProgress, train_tiny
from worldsmith.util.errors import BadInputError
from worldsmith.util.jobs import Job, JobFolder, JobState, json_job_outcome, read_json_lines

__all__ = [
    "BUNDLED_TRAINED_ON",
    "ModelChoice",
    "OfferSettings",
    "TrainingStatus",
    "in_domain_dir",
    "in_domain_model",
    "in_domain_name",
    "model_for_dataset",
    "progress_writer",
    "start_training",
    "train_on_split",
    "train_split",
    "trained_on",
    "trained_on_label",
    "training_command",
    "training_status",
]

TRAIN_SPLIT = "train"
BUNDLED_TRAINED_ON: dict[str, Any] = {
    "description": "the bundled sample traces (113 episodes, mostly ALFWorld and other text-game transcripts)",
}


def in_domain_name(dataset: str) -> str:
    """The conventional name of `dataset`'s own tiny model: its folder under `<workspace>/models/` and its
    models.toml entry."""
    return f"tiny-{dataset}"


def in_domain_dir(root: str | Path, dataset: str) -> Path:
    """Where `worldsmith llm train-tiny --dataset D --split train` puts D's model by default."""
    return Path(root).expanduser().resolve() / "models" / in_domain_name(dataset)


def train_split(root: str | Path, dataset: str) -> str | None:
    """`train` when the dataset has a split of that name (the one a model of its own may learn from), else None."""
    from worldsmith.workspace import Workspace

    splits = Workspace(root).dataset(dataset).splits()
    return TRAIN_SPLIT if TRAIN_SPLIT in splits else None


def _model_folder(spec: str) -> Path | None:
    """The local folder a `tiny:`/`hf:` spec names (None for any other spec)."""
    kind, sep, rest = spec.strip().partition(":")
    if not sep or kind.lower() not in ("tiny", "hf"):
        return None
    return Path(rest.partition("?")[0]).expanduser()


def trained_on(spec: str) -> dict[str, Any] | None:
    """What the model `spec` names learnt from, as its training report records it (`dataset`, `split`,
    `revision`, `episodes`); the bundled model's description for the bundled folder; None when unknown (not a
    local folder, or one trained before the source was recorded)."""
    folder = _model_folder(spec)
    if folder is None:
        return None
    try:
        if folder.resolve() == tiny_model_dir().resolve():
            return dict(BUNDLED_TRAINED_ON)
        report = json.loads((folder / REPORT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    source = report.get("trained_on") if isinstance(report, dict) else None
    return dict(source) if isinstance(source, dict) and source else None


def trained_on_label(source: Mapping[str, Any] | None) -> str:
    """One phrase for what a model learnt from: `dataset shop, split train (280 episodes)`, or the description."""
    if not source:
        return "unknown (its folder does not record what it was trained on)"
    if source.get("description"):
        return str(source["description"])
    split = f", split {source['split']}" if source.get("split") else ", every split"
    episodes = f" ({source['episodes']} episodes)" if source.get("episodes") is not None else ""
    return f"dataset {source.get('dataset', '?')}{split}{episodes}"


@dataclass(frozen=True)
class ModelChoice:
    """The model a dataset's model-backed methods use, why it was chosen, and what it learnt from."""

    spec: str
    source: str  # given, WORLDSMITH_MODEL, in-domain, bundled
    trained_on: dict[str, Any] | None
    warning: str | None = None  # said aloud: the bundled out-of-domain model, or one that saw the evaluated split
    offer: str | None = None  # the command that would train the dataset's own model, when it has a train split

    @property
    def trained_on_label(self) -> str:
        return trained_on_label(self.trained_on)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "trained_on_label": self.trained_on_label}


def in_domain_model(root: str | Path, dataset: str) -> str | None:
    """The spec of `dataset`'s own model: a models.toml entry `tiny-<dataset>`, else the conventional folder
    (`in_domain_dir`) when it holds a model; None when it has none."""
    name = in_domain_name(dataset)
    configured = configured_models(root)
    if name in configured:
        return resolve_spec(name, root)
    folder = in_domain_dir(root, dataset)
    return f"tiny:{folder}" if (folder / "config.json").is_file() else None


def _offer(root: str | Path, dataset: str) -> str | None:
    try:
        split = train_split(root, dataset)
    except (LookupError, OSError, ValueError):
        return None
    return f"worldsmith llm train-tiny --dataset {dataset} --split {split}" if split else None


def _seen_warning(source: Mapping[str, Any] | None, dataset: str, split: str | None) -> str | None:
    """A warning when the in-domain model learnt from the episodes it is about to be scored on."""
    if not source or source.get("dataset") != dataset:
        return None
    learnt = source.get("split")
    if learnt is None:
        return (f"the in-domain model was trained on every split of {dataset}"
                + (f", the evaluated split {split} included" if split else "") + ": its scores are not held out")
    if split is None or learnt == split:
        return f"the in-domain model was trained on split {learnt} of {dataset}, which this evaluation scores"
    return None


def model_for_dataset(root: str | Path, dataset: str, *, split: str | None = None,
                      given: str | None = None) -> ModelChoice | None:
    """The model `dataset`'s model-backed methods use when evaluated on `split`: `given` (a spec or models.toml
    name) as it is; else `$WORLDSMITH_MODEL`; else the dataset's own model (`in_domain_model`); else the bundled
    tiny model, with a warning that it was not trained on this data (and, where the dataset has a train split,
    the command that trains one). None when there is no model at all."""
    if given:
        spec = resolve_spec(given, root)
        return ModelChoice(spec=spec, source="given", trained_on=trained_on(spec))
    configured = os.environ.get(MODEL_ENV_VAR)
    if configured:
        spec = resolve_spec(configured, root)
        return ModelChoice(spec=spec, source=MODEL_ENV_VAR, trained_on=trained_on(spec))
    own = in_domain_model(root, dataset)
    if own is not None:
        source = trained_on(own)
        return ModelChoice(spec=own, source="in-domain", trained_on=source,
                           warning=_seen_warning(source, dataset, split))
    bundled = tiny_model_dir()
    if not (bundled / "config.json").is_file():
        return None
    offer = _offer(root, dataset)
    warning = (f"no model of {dataset}'s own: the bundled tiny model answers, and it was trained on "
               f"{BUNDLED_TRAINED_ON['description']}, not on this data, so model-backed scores here are a weak "
               "baseline" + (f"; train one on the dataset's train split: {offer}" if offer else ""))
    return ModelChoice(spec=f"tiny:{bundled}", source="bundled", trained_on=dict(BUNDLED_TRAINED_ON),
                       warning=warning, offer=offer)


def train_on_split(root: str | Path, dataset: str, split: str | None, out: str | Path | None = None, *,
                   config: TinyConfig = TinyConfig(),  # noqa: B008 - frozen dataclass, safe as a default
                   progress: Callable[[TrainProgress], None] | None = None) -> TinyReport:
    """Train the tiny model on `split` of a workspace dataset (None: every episode) into `out` (default: the
    conventional folder, `in_domain_dir`), recording the dataset, split and revision in its report."""
    from worldsmith.workspace import Workspace

    opened = Workspace(root).dataset(dataset)
    if split is not None and split not in opened.splits():
        known = ", ".join(opened.splits()) or "none (assign them with `worldsmith split`)"
        raise BadInputError(f"dataset {dataset!r} has no split {split!r} (its splits: {known})")
    episodes = opened.count_episodes() if split is None else sum(1 for _ in opened.iter_episodes(split))
    source = {"dataset": dataset, "split": split, "revision": opened.revision, "episodes": episodes}
    target = Path(out) if out is not None else in_domain_dir(root, dataset)
    return train_tiny(opened.iter_episodes(split), target, config=config, progress=progress, trained_on=source)


# ---------------------------------------------------------------------------------------------
# Training as a background job (the workbench's offer)


def _jobs(root: str | Path) -> JobFolder:
    return JobFolder(Path(root) / "models" / ".jobs", kind="train-tiny")


def _progress_path(root: str | Path, dataset: str) -> Path:
    return Path(root) / "models" / ".jobs" / f"{in_domain_name(dataset)}.progress.jsonl"


@dataclass(frozen=True)
class OfferSettings:
    """How the offered training run trains: the environment's view only (the model answers for the world in the
    model-backed baselines; not an agent policy), short rows and more steps, which fit ten CPU-minutes better than
    the 4,096-token default (benchmarks/RESULTS.md, issue 42: 500 steps of 1,024 tokens on one core)."""

    steps: int = 500
    seq_len: int = 1024
    roles: tuple[str, ...] = ("environment",)
    max_minutes: float = 10.0


def training_command(root: str | Path, dataset: str, split: str,
                     settings: OfferSettings = OfferSettings()) -> list[str]:  # noqa: B008 - frozen
    """The `worldsmith llm train-tiny` command line that trains `dataset`'s own model on `split`."""
    return [sys.executable, "-m", "worldsmith", "llm", "train-tiny", "--workspace", str(Path(root).resolve()),
            "--dataset", dataset, "--split", split, "--out", str(in_domain_dir(root, dataset)),
            "--progress-file", str(_progress_path(root, dataset).resolve()), "--steps", str(settings.steps),
            "--seq-len", str(settings.seq_len), "--roles", ",".join(settings.roles),
            "--max-minutes", str(settings.max_minutes), "--json"]


@dataclass(frozen=True)
class TrainingStatus:
    """How the background training of a dataset's own model stands."""

    dataset: str
    state: JobState
    step: int
    steps: int | None
    loss: float | None
    elapsed_s: float
    error: str | None
    log_tail: str

    @property
    def fraction(self) -> float:
        return min(1.0, self.step / self.steps) if self.steps else 0.0


def start_training(root: str | Path, dataset: str, split: str | None = None,
                   settings: OfferSettings = OfferSettings()) -> Job:  # noqa: B008 - frozen
    """Start training `dataset`'s own model on `split` (default: its train split) detached; refuses while one
    runs. Progress: `training_status`."""
    split = split or train_split(root, dataset)
    if split is None:
        raise BadInputError(f"dataset {dataset!r} has no train split to learn from: assign one with "
                            f"`worldsmith split --dataset {dataset} --ratios train=0.8,test=0.2`")
    current = _jobs(root).load(in_domain_name(dataset))
    if current is not None and current.alive:
        raise BadInputError(f"the tiny model of {dataset!r} is already training (pid {current.pid})")
    progress = _progress_path(root, dataset)
    progress.parent.mkdir(parents=True, exist_ok=True)
    progress.unlink(missing_ok=True)  # a new run's progress, not the last one's
    command = training_command(root, dataset, split, settings)
    return _jobs(root).start(in_domain_name(dataset), command, workspace=root)


def training_status(root: str | Path, dataset: str) -> TrainingStatus | None:
    """The last background training of `dataset`'s own model (None: never started here)."""
    job = _jobs(root).load(in_domain_name(dataset))
    if job is None:
        return None
    rows = read_json_lines(_progress_path(root, dataset))
    outcome = json_job_outcome(job, rows)
    last = rows[-1] if rows else {}
    error = None
    if outcome.state == "failed":
        error = str((outcome.result or {}).get("error") or (job.log_tail().strip().splitlines() or ["(no output)"])[-1])
    return TrainingStatus(dataset=dataset, state=outcome.state, step=int(last.get("step", 0)),
                          steps=int(last["steps"]) if "steps" in last else None,
                          loss=float(last["loss"]) if "loss" in last else None, elapsed_s=outcome.elapsed_s,
                          error=error, log_tail=job.log_tail(2000))


def progress_writer(path: str | Path) -> Callable[[TrainProgress], None]:
    """A progress callback appending one JSON line per step to `path` (what `training_status` reads)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)

    def write(update: TrainProgress) -> None:
        row = {"step": update.step, "steps": update.steps, "loss": update.loss, "tokens": update.tokens,
               "elapsed_s": round(update.elapsed_s, 2), "t": time.time()}
        with target.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")

    return write
