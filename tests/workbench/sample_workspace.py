"""The workspace a newcomer has after a first start and one tool-API import: what the every-page test and
`benchmarks/page_load.py` open each page on.

Dataset `samples` (the bundled traces, split train/validation/test) and worldbook `alfworld` built from its train
split, exactly as the workbench's first start makes them; dataset `shop` (the recorded toolshop runs) split
train/test and the tool-API worldbook `shop` built on its train split; one finished next-obs evaluation of each
book on its test split, so the Evaluate page has results to show. Importable by name (conftest modules are not).
"""

from __future__ import annotations

from pathlib import Path

from workbench_support import REPO

SAMPLES = "samples"
SAMPLE_BOOK = "alfworld"
TOOL_DATASET = "shop"
TOOL_BOOK = "shop"
TOOLSHOP = REPO / "data_samples" / "toolshop" / "expert.jsonl"
RUNS = {"alf": (SAMPLE_BOOK, SAMPLES, "alfworld"), "shop": (TOOL_BOOK, TOOL_DATASET, None)}


def sample_workspace(root: Path) -> Path:
    """Fill the empty folder `root` as described above (about 5 s on one core); returns it."""
    from workbench.common.bootstrap import import_samples
    from workbench.common.paths import samples_dir
    from worldsmith.evals import EvalConfig, run_eval
    from worldsmith.sim import SIMULATOR_STAGES
    from worldsmith.workspace import Workspace
    from worldsmith.worldbook.build import build_dataset

    workspace = Workspace(root)
    folder = samples_dir()
    summary = import_samples(workspace, folder)
    if summary is None or summary.get("worldbook") is None:
        raise AssertionError(f"the first-start import of {folder} made no worldbook: {summary}")
    assert workspace.ingest([TOOLSHOP], TOOL_DATASET).committed
    workspace.split(TOOL_DATASET, {"train": 0.75, "test": 0.25}, seed=0)
    build_dataset(
        workspace,
        TOOL_DATASET,
        out=TOOL_BOOK,
        split="train",
        stages=SIMULATOR_STAGES,
        author="test",
        message="toolshop train split",
    )
    for run, (book, dataset, env) in RUNS.items():
        run_eval(EvalConfig(name=run, book=book, dataset=dataset, split="test", env=env, resamples=200), workspace)
    return root
