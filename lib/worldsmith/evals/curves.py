"""How much data a worldbook needs: the construction-size curve, and the harness ablations.

    curve = construction_size_curve(train, held_out, workspace, name="alf-curve", sizes=(1, 5, 10, 20, 40))
    curve.points   # [{"n": 5, "method": "harness", "metric": "exact_match", "mean", "low", "high", "records"}]

For each size n a worldbook is built (deterministic builder) from the first n trajectories of a
seeded shuffle of the construction episodes (so the sets are nested: the book of 10 saw the 5 of
the book of 5) and evaluated next-obs on the *same* held-out episodes; each size is an ordinary run
(`<workspace>/runs/eval/<name>-n<n>/`, resumable, leakage-checked), and the curve itself goes to
`<workspace>/runs/curves/<name>/` (curve.json, curve.md, plots). Sizes above the number of
construction episodes are skipped and listed as such.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldsmith.evals.plots import Point, lines_figure
from worldsmith.evals.protocols import ABLATIONS
from worldsmith.evals.run import EvalConfig, run_eval
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.traces.model import Episode
from worldsmith.util.atomic import atomic_write, atomic_write_json
from worldsmith.util.errors import BadInputError
from worldsmith.workspace import Workspace
from worldsmith.worldbook.build import BuildConfig

__all__ = ["DEFAULT_SIZES", "CurveResult", "ablation_methods", "construction_size_curve"]

DEFAULT_SIZES = (1, 5, 10, 20, 40)


def ablation_methods() -> list[str]:
    """The harness and its ablations: no worldbook knowledge, no persistent state, single-shot, no fallback."""
    return list(ABLATIONS)


@dataclass
class CurveResult:
    """The curve's points (one per size, method and metric), the runs behind them and the sizes skipped."""

    name: str
    directory: Path
    points: list[dict[str, Any]] = field(default_factory=list)
    runs: dict[int, str] = field(default_factory=dict)
    skipped: list[int] = field(default_factory=list)
    rules: dict[int, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "points": self.points, "runs": {str(k): v for k, v in self.runs.items()},
                "skipped": self.skipped, "rules": {str(k): v for k, v in self.rules.items()}}


def construction_size_curve(construction: Sequence[Episode], held_out: Sequence[Episode],
                            workspace: Workspace | str | Path, *, name: str, sizes: Sequence[int] = DEFAULT_SIZES,
                            methods: Sequence[str] = ("harness", "nearest"),
                            metrics: Sequence[str] = ("exact_match", "token_f1"), dataset: str = "inline",
                            build_config: BuildConfig | None = None, llm: str | None = None,
                            max_turns: int | None = None, resamples: int = 10_000, seed: int = 0,
                            progress: Callable[[str], None] | None = None) -> CurveResult:
    """Build a book per size from nested subsets of `construction`, evaluate each next-obs on `held_out`."""
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    if not held_out:
        raise BadInputError("the construction-size curve needs held-out episodes")
    order = sorted(construction, key=lambda e: e.id)
    random.Random(seed).shuffle(order)
    result = CurveResult(name=name, directory=ws.layout.run_dir("curves", name))
    for n in sorted(set(sizes)):
        if n < 1 or n > len(order):
            result.skipped.append(n)
            continue
        subset = order[:n]
        if progress:
            progress(f"n={n}: building from {n} trajectories")
        built = build_simulator_book(subset, name=f"{name}-n{n}", config=build_config or BuildConfig())
        result.rules[n] = len(built.book.rules)
        config = EvalConfig(name=f"{name}-n{n}", book=built.book.name, dataset=dataset, methods=list(methods),
                            protocol="next-obs", llm=llm, max_turns=max_turns, resamples=resamples, seed=seed)
        if progress:
            progress(f"n={n}: evaluating on {len(held_out)} held-out episodes")
        run = run_eval(config, ws, book=built.book, episodes=held_out, construction=subset)
        result.runs[n] = str(run.directory)
        for method, entry in run.report.methods.items():
            for metric in metrics:
                if metric in entry:
                    cell = entry[metric]
                    result.points.append({"n": n, "method": method, "metric": metric, "mean": cell.mean,
                                          "low": cell.low, "high": cell.high, "records": cell.n})
    _write(result, metrics)
    return result


def _write(result: CurveResult, metrics: Sequence[str]) -> None:
    folder = result.directory
    folder.mkdir(parents=True, exist_ok=True)
    plots: list[str] = []
    for metric in metrics:
        points = [Point(series=p["method"], x=p["n"], mean=p["mean"], low=p["low"], high=p["high"])
                  for p in result.points if p["metric"] == metric and p["mean"] is not None]
        if points:
            plots += lines_figure(folder / "plots", f"curve_{metric}", points, log_x=True,
                                  title=f"Next-observation {metric} by construction size",
                                  x_label="construction trajectories", y_label=metric)
    atomic_write_json(folder / "curve.json", {**result.to_json(), "plots": [f"plots/{p}" for p in plots]})
    lines = [f"# Construction-size curve `{result.name}`", "",
             "Each size: a worldbook built from that many construction trajectories (nested subsets), evaluated "
             "next-obs on the same held-out episodes (95% paired-bootstrap intervals over episodes).", "",
             "| n | rules | method | metric | mean [low, high] |", "|---|---|---|---|---|"]
    for p in result.points:
        interval = f"[{p['low']:.3f}, {p['high']:.3f}]" if p["low"] is not None else ""
        lines.append(f"| {p['n']} | {result.rules.get(p['n'], '')} | {p['method']} | {p['metric']} | "
                     f"{p['mean']:.3f} {interval} |")
    if result.skipped:
        lines += ["", f"Skipped sizes (more than the construction episodes): {result.skipped}"]
    lines += [""] + [f"![{p}](plots/{p})" for p in plots if p.endswith(".png")]
    with atomic_write(folder / "curve.md", "w") as handle:
        handle.write("\n".join(lines) + "\n")
