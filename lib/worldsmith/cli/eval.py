"""`worldsmith eval`: evaluate simulators on held-out trajectories into the run store.

    worldsmith eval --book alfworld --dataset alfworld --split test --methods harness,nearest \
        [--protocol next-obs|drift|w2r|live | --protocols drift,next-obs] [--policy expert] [--llm SPEC] \
        [--judge SPEC] [--drop-leaked] --out RUN [--json]
    worldsmith eval --book toolshop --dataset toolshop --split test --protocol live --policy probing --out RUN
    worldsmith eval --dataset alfworld --folds 5 --methods harness,nearest --out RUN --json   # cross-fitted
    worldsmith eval --book bfcl --dataset bfcl --methods harness,harness+llm,direct --llm SPEC --out RUN
    worldsmith eval curve --dataset alfworld --split train --test-split test --sizes 1,5,10,20,40 --out NAME
    worldsmith eval awb --book terminal --rows rows.jsonl --method nearest --out predictions.jsonl
    worldsmith eval metrics [--json]   # the per-record metrics every run scores (built-in and `@metric` plug-ins)
    worldsmith eval compare RUN_A RUN_B [--metric exact_match] [--method M] [--json]   # turn by turn, paired
    worldsmith eval tag RUN EPISODE TURN --tag LABEL [--note TEXT] [--method M] [--remove]   # a failure's label
    worldsmith eval tags [--run RUN] [--tag LABEL] [--export FILE.jsonl] [--json]

By default a run scores open loop (drift: the model acts on its own answers, as under an agent) and teacher
forced (next-obs: each turn after the real prefix) together and reports both, open loop first; `--protocol`
picks one. `live` lets a policy act in the real environment (where one is registered for the episodes' tasks)
and scores the model, running open loop on the same actions, against each real observation.

`--llm` reaches only the methods that use a model (`harness+llm`, `direct`, ...): `harness` stays the harness
without one, and the report names each method's model (spec and what it was trained on) or none.

Progress goes to standard error; the result (or with --json one JSON object) to standard output.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from worldsmith.cli.common import EXIT_OK, EXIT_USAGE, CommandError, add_common, emit_json, workspace_from
from worldsmith.evals.bootstrap import small_sample_note
from worldsmith.evals.config import POLICY_CHOICES
from worldsmith.evals.eval_runs import EvalRunStore, RunFolder
from worldsmith.evals.metrics import METRIC_REGISTRY, METRICS
from worldsmith.evals.protocols import DEFAULT_PROTOCOLS, PROTOCOLS, needs_llm
from worldsmith.evals.report import PROTOCOL_LABELS
from worldsmith.evals.report_model import EvalReport, MetricCell, PairCell, ProtocolBlock
from worldsmith.llm import indomain
from worldsmith.sim.registry import world_model_names
from worldsmith.traces.dialogue import exclude_dialogue_only
from worldsmith.util.errors import BadInputError, user_path
from worldsmith.workspace.layout import env_family

__all__ = ["register"]


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _sizes(text: str) -> list[int]:
    parts = _csv(text)
    if not all(re.fullmatch(r"[+-]?\d+", part) for part in parts):
        raise argparse.ArgumentTypeError(f"sizes must be comma-separated integers, not {text!r}")
    return [int(part) for part in parts]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval", help="evaluate world models on held-out trajectories (drift + next-obs; w2r, live)",
        description="Evaluate world models on held-out trajectories with paired bootstrap intervals; writes "
                    "<workspace>/runs/eval/RUN/ (config.json, records.parquet, report.json, report.md, plots/). "
                    "A rerun of the same configuration resumes. Subcommands: curve (construction-size curve), "
                    "awb (AgentWorldBench rows).")
    parser.add_argument("--book", help="worldbook name in the workspace (with --folds: only names the fold books)")
    parser.add_argument("--version", help="worldbook version (default: HEAD)")
    parser.add_argument("--dataset", help="dataset of the held-out episodes")
    parser.add_argument("--split", help="split to evaluate on (e.g. test)")
    parser.add_argument("--env", help="only episodes of this environment (env id prefix, e.g. alfworld)")
    parser.add_argument("--folds", type=int, default=0, metavar="K",
                        help="cross-fit: deal the episodes into K folds by trajectory family (as build --folds), "
                             "evaluate each fold with a book built from the others, pool the records")
    parser.add_argument("--drop-leaked", action="store_true",
                        help="leave leaked episodes out (the report names them and why) instead of refusing the run")
    parser.add_argument("--methods", default="harness,nearest",
                        help="comma-separated: " + ", ".join(world_model_names()) + " (default: harness,nearest; "
                             "`harness` never uses a model: choose `harness+llm` for the harness with the --llm "
                             "model's tool loop)")
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--protocol", choices=PROTOCOLS,
                        help=f"one protocol alone (default: {' and '.join(DEFAULT_PROTOCOLS)} together)")
    chosen.add_argument("--protocols", type=_csv, metavar="P,Q",
                        help="several protocols, each reported apart, open loop first: " + ", ".join(PROTOCOLS))
    parser.add_argument("--policy", default="expert", choices=POLICY_CHOICES, help="W2R and live policy")
    parser.add_argument("--llm", metavar="SPEC", help="model spec (or models.toml name) of the methods that use a model "
                                                      "(direct, rag, worldbook-prompt, harness+llm, ...); the "
                                                      "report names each method's model or none")
    parser.add_argument("--judge", metavar="SPEC", help="model spec of the LLM judge (default: no judge)")
    parser.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-episodes", type=int)
    parser.add_argument("--max-turns", type=int, help="score at most this many turns per episode")
    parser.add_argument("--max-steps", type=int, default=50, help="W2R and live step limit")
    parser.add_argument("--real-env", help="W2R, live: registry name of the real environment (default: from the "
                                           "episodes)")
    parser.add_argument("--divergence", choices=("exact_match", "token_f1"), default="exact_match",
                        help="drift: the metric that marks divergence")
    parser.add_argument("--divergence-threshold", type=float, default=1.0,
                        help="drift: a turn diverges when the metric is below this (default 1.0)")
    parser.add_argument("--out", metavar="RUN", help="run name (folder under <workspace>/runs/eval/)")
    parser.add_argument("--workers", type=int, default=0, metavar="N",
                        help="units at once: N >= 2 local processes; with --ray at most N Ray tasks (default: all CPUs)")
    parser.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                        help="run the units as Ray tasks: a local Ray, or the cluster at ADDRESS (ray://head:10001)")
    add_common(parser)
    parser.set_defaults(handler=run_eval_command)
    commands = parser.add_subparsers(dest="eval_command", metavar="SUBCOMMAND")

    curve = commands.add_parser("curve", help="construction-size curve: books from n trajectories, next-obs each")
    curve.add_argument("--dataset", required=True)
    curve.add_argument("--split", default="train", help="construction split (default train)")
    curve.add_argument("--test-split", default="test", help="held-out split (default test)")
    curve.add_argument("--env", help="only episodes of this environment")
    curve.add_argument("--sizes", type=_sizes, default=[1, 5, 10, 20, 40])
    curve.add_argument("--methods", default="harness,nearest")
    curve.add_argument("--llm", metavar="SPEC")
    curve.add_argument("--max-turns", type=int)
    curve.add_argument("--resamples", type=int, default=10_000)
    curve.add_argument("--seed", type=int, default=0)
    curve.add_argument("--out", required=True, metavar="NAME", help="curve name (runs NAME-n<n>)")
    add_common(curve)
    curve.set_defaults(handler=run_curve_command)

    misses = commands.add_parser(
        "misses", help="why a run's predictions missed: errors by action, answer source, rule and flag",
        description="Read a finished (or running) evaluation run's records and group its wrong predictions by "
                    "action, by the answer source that answered, by rule (a miss no rule answered counts under its "
                    "source) and by flag (unseen action, novel observation, fallback, error), each with its biggest "
                    "cause in one sentence.")
    misses.add_argument("run", help="run name (folder under <workspace>/runs/eval/)")
    misses.add_argument("--method", help="one method (default: each method of the run)")
    misses.add_argument("--metric", default="exact_match", help="the metric a miss is judged on (default exact_match)")
    misses.add_argument("--threshold", type=float, default=1.0,
                        help="a prediction is wrong when the metric is below this (default 1.0)")
    misses.add_argument("--top", type=int, default=8, help="rows shown per breakdown in text output (default 8)")
    misses.add_argument("--resamples", type=int, default=2000,
                        help="bootstrap resamples (over episodes) per breakdown row's interval; 0: no intervals "
                             "(default 2000)")
    misses.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default 0)")
    add_common(misses)
    misses.set_defaults(handler=run_misses_command)

    awb = commands.add_parser("awb", help="predict AgentWorldBench rows with a world model and score them")
    awb.add_argument("--book", required=True)
    awb.add_argument("--version")
    awb.add_argument("--rows", required=True, type=Path, help="AgentWorldBench JSONL rows")
    awb.add_argument("--method", default="harness", help="one method: " + ", ".join(world_model_names()))
    awb.add_argument("--llm", metavar="SPEC")
    awb.add_argument("--out", required=True, type=Path, help="predicted rows (JSONL, the benchmark's layout)")
    add_common(awb)
    awb.set_defaults(handler=run_awb_command)

    metrics = commands.add_parser("metrics", help="the per-record metrics every evaluation scores (with plug-ins)")
    add_common(metrics)
    metrics.set_defaults(handler=run_metrics_command)

    compare = commands.add_parser(
        "compare", help="two runs turn by turn: where they differ, and the paired interval of B - A",
        description="Pair two runs' records by protocol, method, episode and turn; list the turns whose prediction "
                    "or score differs first, and the mean of B - A in the metric over the turns both scored, with "
                    "a 95%% bootstrap interval over episodes (both runs' turns resampled together).")
    compare.add_argument("run_a", metavar="RUN_A")
    compare.add_argument("run_b", metavar="RUN_B")
    compare.add_argument("--metric", default="exact_match", help="the metric compared (default exact_match)")
    compare.add_argument("--method", help="one method (default: every method both runs have)")
    compare.add_argument("--top", type=int, default=10, help="differing turns listed in text output (default 10)")
    compare.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")
    compare.add_argument("--seed", type=int, default=0)
    add_common(compare)
    compare.set_defaults(handler=run_compare_command)

    tag = commands.add_parser("tag", help="label a failure (a run's turn) and note why; kept in the workspace")
    tag.add_argument("run", help="run name")
    tag.add_argument("episode_id", metavar="EPISODE")
    tag.add_argument("turn", type=int)
    tag.add_argument("--method", default="", help="the method whose prediction failed")
    tag.add_argument("--tag", dest="label", help="the label (one line); required unless --remove")
    tag.add_argument("--note", default="", help="why it failed, in a sentence or two")
    tag.add_argument("--remove", action="store_true", help="take the failure's tag and note away")
    add_common(tag)
    tag.set_defaults(handler=run_tag_command)

    tags = commands.add_parser("tags", help="list (or export as JSON lines) the failure tags of the workspace")
    tags.add_argument("--run", help="only this run's")
    tags.add_argument("--tag", dest="label", help="only this label's")
    tags.add_argument("--export", type=Path, metavar="FILE", help="write them to FILE as JSON lines")
    add_common(tags)
    tags.set_defaults(handler=run_tags_command)


def run_metrics_command(args: argparse.Namespace) -> int:
    """List the registered metrics: name, built-in or plug-in, the first line of the function's docstring."""
    listed = [{"name": name, "builtin": name in METRICS, "description": (function.__doc__ or "").strip().split("\n")[0]}
              for name, function in METRIC_REGISTRY.items()]
    if getattr(args, "json", False):
        emit_json({"metrics": listed})
    else:
        for item in listed:
            print(f"{item['name']:<18} {'built-in' if item['builtin'] else 'plug-in':<9} {item['description']}")
    return EXIT_OK


def _stderr_progress(quiet: bool) -> Any:
    def show(done: int, total: int, what: str) -> None:
        print(f"  [{done}/{total}] {what}", file=sys.stderr, flush=True)
    return show


def _with_small_marks(cells: list[str], entries: Sequence[MetricCell | PairCell]) -> str:
    """The cells of one line, each interval over too few trajectories marked `(only N trajectories)`: once at
    the end of the line when every cell has the same mark, else beside each such cell."""
    notes = [small_sample_note(entry.trajectories) for entry in entries]
    if notes and notes[0] and len(set(notes)) == 1:
        return "; ".join(cells) + f" ({notes[0]})"
    return "; ".join(cell + (f" ({note})" if note else "") for cell, note in zip(cells, notes, strict=True))


def _validation_message(error: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'config'}: {e['msg']}" for e in error.errors())


def run_eval_command(args: argparse.Namespace) -> int:
    from worldsmith.evals.run import EvalConfig, run_eval

    missing = [flag for flag, value in (("--book", args.book or args.folds), ("--dataset", args.dataset),
                                        ("--out", args.out)) if not value]
    if missing:
        instead = " (--folds K instead of --book cross-fits)" if "--book" in missing else ""
        raise CommandError(f"worldsmith eval needs {', '.join(missing)}{instead} (or a subcommand: curve, awb)", code=2)
    workspace = workspace_from(args)
    model = _model_choice(args, workspace.root)
    if model is not None and model.warning:
        print(f"warning: {model.warning}", file=sys.stderr, flush=True)
    try:
        config = EvalConfig(
            name=args.out, book=args.book, book_version=args.version, dataset=args.dataset, split=args.split,
            env=args.env, folds=args.folds, drop_leaked=args.drop_leaked, methods=_csv(args.methods), protocol=args.protocol,
            protocols=args.protocols, llm=args.llm or (model.spec if model is not None else None),
            judge=args.judge, policy=args.policy, max_steps=args.max_steps, real_env=args.real_env, max_episodes=args.max_episodes,
            max_turns=args.max_turns, divergence_metric=args.divergence,
            divergence_threshold=args.divergence_threshold, resamples=args.resamples, seed=args.seed,
            workers=args.workers, ray_address=args.ray)
    except ValidationError as error:
        raise CommandError(f"invalid evaluation settings: {_validation_message(error)}", code=2) from None
    as_json = bool(getattr(args, "json", False))
    run = run_eval(config, workspace, progress=_stderr_progress(as_json))
    report = run.report
    if as_json:
        written = report.to_json()
        emit_json({"run": config.name, "directory": str(run.directory), "protocol": config.primary,
                   "protocols": config.protocols, "fingerprint": run.fingerprint, "computed": run.computed,
                   "reused": run.reused, "records": len(run.records), "methods": written["methods"],
                   "models": {m: e.model_dump(mode="json") for m, e in report.method_models().items()},
                   "provenance": {m: report.provenance_of(m).model_dump(mode="json") for m in report.counts},
                   "pairs": written["pairs"], "cost": written["cost"], "w2r": written.get("w2r"),
                   "by_protocol": {p: _protocol_json(report, p) for p in report.protocol_names()},
                   "leakage": written["leakage"],
                   "folds": written.get("folds"), "dropped": written["leakage"].get("dropped"),
                   "excluded": written.get("excluded", {}),
                   "model": model.to_json() if model is not None else None,
                   "report": str(run.report_path), "markdown": str(RunFolder(run.directory).markdown_path)})
        return EXIT_OK
    print(f"run {config.name} ({', '.join(config.protocols or ())}): {len(run.records)} records, {run.computed} units computed, "
          f"{run.reused} reused -> {run.directory}")
    if model is not None:
        print(f"  model: {model.spec} ({model.source}; trained on {model.trained_on_label})")
    _print_report(report)
    print(f"report: {RunFolder(run.directory).markdown_path}")
    return EXIT_OK


def _model_choice(args: argparse.Namespace, root: Path) -> indomain.ModelChoice | None:
    """The model of the run's model-backed methods: `--llm` when given, else the dataset's own tiny model, else
    the bundled one with a warning (`llm.indomain.model_for_dataset`); None when no method needs a model."""
    try:
        wanted = any(needs_llm(method) for method in _csv(args.methods))
    except BadInputError:
        wanted = False  # an unknown method: EvalConfig names it
    if not (wanted or args.llm) or not args.dataset:
        return None
    return indomain.model_for_dataset(root, args.dataset, split=args.split, given=args.llm)


_PROTOCOL_KEYS = ("metrics", "methods", "pairs", "counts", "errors", "cost", "w2r", "done_agreement", "provenance")


def _protocol_json(report: EvalReport, protocol: str) -> dict[str, Any]:
    """One protocol's results in `--json`: labelled (open loop or teacher forced), pooled methods and pairs, and what
    produced each method's numbers."""
    block = report.block(protocol).model_dump(mode="json", exclude_unset=True)
    block["provenance"] = {m: report.provenance_of(m, protocol).model_dump(mode="json") for m in block.get("counts", {})}
    return {"label": PROTOCOL_LABELS.get(protocol, protocol), **{k: block[k] for k in _PROTOCOL_KEYS if k in block}}


def _print_report(report: EvalReport) -> None:
    """The run's excluded and dropped episodes, folds, then per protocol (open loop first) its methods, pairs and
    W2R success, one line each."""
    if report.excluded.get("dialogue_only"):
        print(f"  excluded {report.excluded['dialogue_only']} dialogue-only episodes (no tool turn to predict)")
    dropped = report.leakage.dropped
    if dropped:
        print(f"  dropped {dropped.count} leaked episodes: "
              + "; ".join(f"{episode} ({', '.join(why)})" for episode, why in list(dropped.episodes.items())[:5])
              + (" ..." if dropped.count > 5 else ""))
    for method, used in report.method_models().items():
        print(f"  {method:<20} model {used.model}" + (f" (trained on: {used.trained_on})" if used.trained_on else "")
              + ("" if used.recorded else " (inferred: not recorded by this run)"))
    for fold in report.folds:
        print(f"  fold {fold.fold}: book {fold.book}@{fold.book_version} built from "
              f"{fold.construction_episodes} episodes, evaluated on {fold.episodes}")
    for protocol in report.protocol_names():
        if len(report.protocol_names()) > 1:
            print(f"  {PROTOCOL_LABELS.get(protocol, protocol)}:")
        _print_block(report.block(protocol))


def _print_block(report: ProtocolBlock) -> None:
    for method, metrics in report.methods.items():
        shown = {name: entry for name, entry in metrics.items() if entry.mean is not None}
        cells = [f"{name} {entry.mean:.3f} [{entry.low:.3f}, {entry.high:.3f}]" for name, entry in shown.items()]
        print(f"  {method:<20} " + _with_small_marks(cells, list(shown.values())))
    for pair, differences in report.pairs.items():
        diffs = {name: entry for name, entry in differences.items() if entry.mean_diff is not None}
        cells = [f"{name} {entry.mean_diff:+.3f} [{entry.low:+.3f}, {entry.high:+.3f}]" for name, entry in diffs.items()]
        print(f"  {pair:<28} " + _with_small_marks(cells, list(diffs.values())))
    for policy, entry in report.w2r.items():
        for method, numbers in entry.methods.items():
            print(f"  W2R {policy}/{method}: real {entry.real:.3f}, w2r {numbers.w2r:.3f}, "
                  f"consistency {numbers.consistency if numbers.consistency is not None else float('nan'):.3f}")


def run_curve_command(args: argparse.Namespace) -> int:
    from worldsmith.evals.curves import construction_size_curve

    workspace = workspace_from(args)
    dataset = workspace.dataset(args.dataset)

    def chosen(split: str) -> list[Any]:  # dialogue-only episodes (no tool turn) neither build nor get evaluated
        return exclude_dialogue_only(e for e in dataset.iter_episodes(split)
                                     if not args.env or env_family(e.env_id) == args.env)[0]

    construction, held_out = chosen(args.split), chosen(args.test_split)
    if not construction or not held_out:
        raise CommandError(f"dataset {args.dataset!r} needs episodes in split {args.split!r} "
                           f"({len(construction)}) and {args.test_split!r} ({len(held_out)})")
    as_json = bool(getattr(args, "json", False))

    def show(what: str) -> None:
        print(f"  {what}", file=sys.stderr, flush=True)

    result = construction_size_curve(construction, held_out, workspace, name=args.out, sizes=args.sizes,
                                     methods=_csv(args.methods), dataset=args.dataset, llm=args.llm,
                                     max_turns=args.max_turns, resamples=args.resamples, seed=args.seed,
                                     progress=show)
    if as_json:
        emit_json({**result.to_json(), "directory": str(result.directory)})
        return EXIT_OK
    for point in result.points:
        print(f"  n={point['n']:<3} {point['method']:<18} {point['metric']:<14} {point['mean']:.3f} "
              f"[{point['low']:.3f}, {point['high']:.3f}]")
    if result.skipped:
        print(f"  skipped sizes (more than {len(construction)} construction episodes): {result.skipped}")
    print(f"curve: {result.directory / 'curve.md'}")
    return EXIT_OK


def run_awb_command(args: argparse.Namespace) -> int:
    from worldsmith.evals.agentworldbench import predict_rows, read_rows, score_rows, write_rows
    from worldsmith.evals.protocols import make_method, needs_llm
    from worldsmith.worldbook import WorldbookStore

    workspace = workspace_from(args)
    book = WorldbookStore.of_workspace(workspace).load(args.book, args.version)
    llm = None
    if args.llm:
        from worldsmith.llm import open_llm

        llm = open_llm(args.llm, workspace.root, component="eval")
    elif needs_llm(args.method):
        raise CommandError(f"method {args.method!r} needs --llm SPEC")
    try:
        with user_path(args.rows, "--rows"):
            rows = read_rows(args.rows)
        predicted = predict_rows(rows, make_method(args.method, book, llm=llm), book=book, model_name=args.method)
    finally:
        if llm is not None:
            llm.close()
    with user_path(args.out, "--out"):
        count = write_rows(args.out, predicted)
    scores = score_rows(predicted)
    if getattr(args, "json", False):
        emit_json({"rows": count, "out": str(args.out), "metrics": scores["metrics"]})
        return EXIT_OK
    metrics = ", ".join(f"{k} {v:.3f}" for k, v in scores["metrics"].items() if v is not None)
    print(f"{count} rows predicted with {args.method} -> {args.out}; {metrics}")
    return EXIT_OK


def _bounds(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f" [{low:.0%}, {high:.0%}]"


def run_misses_command(args: argparse.Namespace) -> int:
    from worldsmith.evals.misses import GROUPINGS, differs, paired_miss_differences, why_missed

    run = EvalRunStore(workspace_from(args).root).run(args.run)
    records = run.read_records()
    if records.empty:
        raise CommandError(f"run {args.run!r} has no records (yet) under {run.path}")
    if args.metric not in records.columns:
        raise CommandError(f"no metric {args.metric!r} in the run's records", EXIT_USAGE)
    if args.resamples < 0:
        raise CommandError(f"--resamples must be 0 or more, not {args.resamples}", EXIT_USAGE)
    resamples = args.resamples or None
    every = sorted(records["method"].dropna().unique())
    methods = [args.method] if args.method else every
    results = [why_missed(records, args.metric, args.threshold, method=method, resamples=resamples, seed=args.seed)
               for method in methods]
    pairs = [paired_miss_differences(records, a, b, args.metric, args.threshold, resamples=resamples, seed=args.seed)
             for a in methods for b in every if a != b and (args.method or a < b)] if resamples else []
    if getattr(args, "json", False):
        emit_json({"run": args.run, "methods": results, "pairs": pairs})
        return EXIT_OK
    for result in results:
        print(f"{result['method']}: {result['misses']} of {result['scored']} predictions below "
              f"{result['metric']} {result['threshold']:g}"
              + (f" (95% intervals: {resamples} resamples over episodes)" if resamples else ""))
        if result["headline"]:
            print(f"  {result['headline']}")
        if result["unseen_actions"]:
            print(f"  unseen actions (never in the construction data): {', '.join(result['unseen_actions'])}")
        for by in GROUPINGS:
            if result["causes"][by]:
                print(f"  by {by}: {result['causes'][by]}")
            for row in result["by"][by][: args.top]:
                print(f"    {str(row[by])[:50]:<50} {row['wrong']:>5} of {row['records']:<5} "
                      f"error rate {row['error_rate']:.0%}{_bounds(row.get('error_rate_low'), row.get('error_rate_high'))}"
                      f" ({row['share_of_misses']:.0%}{_bounds(row.get('share_low'), row.get('share_high'))} of misses)")
    for pair in pairs:
        print(f"{pair['pair']}: paired difference in error rate per row ({pair['turns']} turns both scored; "
              "* = the interval excludes 0)")
        for by, rows in pair["by"].items():
            print(f"  by {by}:")
            for row in rows[: args.top]:
                print(f"    {str(row[by])[:50]:<50} {row['turns']:>5} turns  {row['error_rate_a']:.0%} vs "
                      f"{row['error_rate_b']:.0%}  diff {row['mean_diff']:+.0%}{_bounds(row['low'], row['high'])}"
                      f"{' *' if differs(row) else ''}")
    return EXIT_OK


def _short(text: str, width: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def run_compare_command(args: argparse.Namespace) -> int:
    if args.resamples < 1:
        raise CommandError(f"--resamples must be 1 or more, not {args.resamples}", EXIT_USAGE)
    comparison = EvalRunStore(workspace_from(args).root).compare(
        args.run_a, args.run_b, metric=args.metric, method=args.method, resamples=args.resamples, seed=args.seed)
    if getattr(args, "json", False):
        emit_json(comparison.to_json())
        return EXIT_OK
    print(f"{args.run_b} vs {args.run_a}: {len(comparison.turns)} turns paired, {comparison.differing} differ "
          f"({comparison.only_a} only in {args.run_a}, {comparison.only_b} only in {args.run_b})")
    if comparison.interval is not None:
        interval = comparison.interval
        note = small_sample_note(interval.trajectories)
        print(f"{args.metric} B - A: {interval.mean:+.3f} [{interval.low:+.3f}, {interval.high:+.3f}] over "
              f"{interval.n} turns of {interval.trajectories} episodes (95% paired bootstrap)"
              + (f" ({note})" if note else ""))
    for turn in [t for t in comparison.turns if t.differs][: args.top]:
        scores = "" if turn.change is None else f" {turn.score_a:.3f} -> {turn.score_b:.3f}"
        print(f"  {turn.method} {turn.episode_id} turn {turn.turn}{scores}: {_short(turn.action, 40)}")
        print(f"    A: {_short(turn.prediction_a)}")
        print(f"    B: {_short(turn.prediction_b)}")
    return EXIT_OK


def run_tag_command(args: argparse.Namespace) -> int:
    from worldsmith.workspace.failure_tags import FailureKey, FailureTags

    tags = FailureTags(workspace_from(args).root)
    key = FailureKey(args.run, args.episode_id, args.turn, args.method)
    if args.remove:
        removed = tags.remove(key)
        if getattr(args, "json", False):
            emit_json({"removed": removed, **{"run": key.run, "episode_id": key.episode_id, "turn": key.turn,
                                              "method": key.method}})
        else:
            print("removed" if removed else "that failure had no tag")
        return EXIT_OK
    if not args.label:
        raise CommandError("--tag LABEL is required (or --remove)", EXIT_USAGE)
    saved = tags.set(key, tag=args.label, note=args.note)
    if getattr(args, "json", False):
        emit_json(saved.to_json())
    else:
        print(f"tagged {saved.run} {saved.episode_id} turn {saved.turn}"
              + (f" ({saved.method})" if saved.method else "") + f": {saved.tag}")
    return EXIT_OK


def run_tags_command(args: argparse.Namespace) -> int:
    from worldsmith.workspace.failure_tags import FailureTags

    tags = FailureTags(workspace_from(args).root)
    if args.export is not None:
        count = tags.export(args.export, run=args.run, tag=args.label)
        if getattr(args, "json", False):
            emit_json({"exported": count, "path": str(args.export)})
        else:
            print(f"{count} failure tags written to {args.export}")
        return EXIT_OK
    listed = tags.list(run=args.run, tag=args.label)
    if getattr(args, "json", False):
        emit_json({"tags": [item.to_json() for item in listed]})
        return EXIT_OK
    for item in listed:
        print(f"{item.run}  {item.episode_id} turn {item.turn}{f' ({item.method})' if item.method else ''}  "
              f"[{item.tag}] {_short(item.note)}")
    if not listed:
        print("no failure tags")
    return EXIT_OK
