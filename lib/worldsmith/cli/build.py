"""`worldsmith build`: build a worldbook from a dataset, validate it on held-out trajectories, save a version."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import orjson

from worldsmith.cli.common import EXIT_OK, add_common, emit_json, workspace_from
from worldsmith.sim.route_learning import ROUTE_TURNS, simulator_stages
from worldsmith.util.errors import BadInputError
from worldsmith.worldbook.build import MODEL_STAGES, BuildConfig, build_dataset
from worldsmith.worldbook.pipeline import StageProgress

__all__ = ["print_validation", "register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "build",
        help="build a worldbook from a dataset's trajectories (Trace2Env offline)",
        description="Build a worldbook (deterministic by default; --llm runs the rules and notes stages on a "
        "model), validate it by replaying held-out trajectories, and save it as a new version.",
    )
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--split", help="build from this split only (e.g. train)")
    parser.add_argument(
        "--validate-split",
        metavar="SPLIT",
        help="validate on this split (default with --split: validation, else test, if present)",
    )
    parser.add_argument("--env", help="only this environment's episodes (e.g. alfworld) of a mixed dataset")
    parser.add_argument("--llm", metavar="SPEC", help="model spec for the model-backed stages")
    parser.add_argument("--model-stages", default="rules,notes", metavar="STAGES",
                        help=f"with --llm: which stages run on the model, comma-separated, of {', '.join(MODEL_STAGES)} "
                        "(default: rules,notes); each falls back to the deterministic stage where the model fails")
    parser.add_argument("--folds", type=int, default=0, help="cross-fit: K folds by trajectory family")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--out", metavar="BOOK", help="worldbook name to save")
    target.add_argument(
        "--update",
        metavar="BOOK",
        help="add --dataset's trajectories to BOOK: a new version built on the union of its sources "
        "and this dataset (only the new episodes are extracted again)",
    )
    parser.add_argument("--min-support", type=int, default=BuildConfig.min_support)
    parser.add_argument("--min-confirmations", type=int, default=BuildConfig.min_confirmations)
    parser.add_argument(
        "--route-folds",
        type=int,
        default=5,
        metavar="K",
        help="cross-fitting folds of the route table (default 5; 0: no table, rules answer first)",
    )
    parser.add_argument(
        "--route-turns",
        type=int,
        default=ROUTE_TURNS,
        metavar="N",
        help=f"the most held-out turns the route table is measured on (default {ROUTE_TURNS}; past 3,000 "
        "construction turns a sample of 40%% of them, within this cap, is held out by trajectory family; 0: every turn)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="processes the route table's folds run in (default 1); the book is the same for any number. Each "
        "worker holds its own copy of the trajectories: N workers take about N+1 times the memory of one",
    )
    parser.add_argument("--message", default="")
    parser.add_argument("--author", default="worldsmith build", help="who the saved version names as its author")
    parser.add_argument(
        "--progress",
        metavar="FILE",
        help="append each stage event to FILE as a JSON line (what a background build's page reads)",
    )
    add_common(parser)
    parser.set_defaults(handler=run_build)


def _progress(quiet: bool, path: str | None = None) -> Any:
    if quiet and path is None:
        return None

    def show(event: StageProgress) -> None:
        if path is not None:  # one line per event, appended whole: a reader never sees half an event
            with open(path, "ab") as out:
                out.write(orjson.dumps({**event.to_json(), "t": time.time()}) + b"\n")
        if not quiet and event.state == "finished":
            print(
                f"  [{event.index + 1}/{event.total}] {event.stage} {event.seconds:.2f}s"
                + (" (cached)" if event.cached else ""),
                file=sys.stderr,
                flush=True,
            )

    return show


def print_validation(report: dict[str, Any]) -> None:
    totals, common = report["totals"], report["common_actions"]
    print(
        f"validation: {totals['turns']} turns; coverage {totals['coverage']:.1%} "
        f"(conditions checked {totals['coverage_verified']:.1%}); exact match {totals['exact_match']:.1%}; "
        f"observations a supported rule explains {totals['explained']:.1%}"
    )
    print(
        f"common actions ({', '.join(common['actions'])}): coverage {common['coverage']:.1%} "
        f"(checked {common['coverage_verified']:.1%}), exact match {common['exact_match']:.1%}"
    )
    print(f"  {'action':<24} {'turns':>6} {'coverage':>9} {'checked':>8} {'exact':>7}")
    for action, row in report["per_action"].items():
        print(
            f"  {action[:24]:<24} {row['turns']:>6} {row['covered_rate']:>9.1%} {row['verified_rate']:>8.1%} "
            f"{row['exact_rate']:>7.1%}"
        )


def run_build(args: argparse.Namespace) -> int:
    if args.workers < 1:
        raise BadInputError(f"--workers must be at least 1, not {args.workers}", where="--workers")
    workspace = workspace_from(args)
    as_json = getattr(args, "json", False)
    stages = tuple(stage.strip() for stage in args.model_stages.split(",") if stage.strip())
    config = BuildConfig(llm=args.llm, min_support=args.min_support, min_confirmations=args.min_confirmations,
                         model_stages=stages)
    outcome = build_dataset(  # a BadInputError (no episodes, too few for the folds ...) is one line, exit 3
        workspace,
        args.dataset,
        out=args.update or args.out,
        update=bool(args.update),
        split=args.split,
        validate_split=args.validate_split,
        env=args.env,
        folds=args.folds,
        config=config,
        message=args.message,
        author=args.author,
        progress=_progress(as_json, args.progress),
        stages=simulator_stages(args.route_folds, args.route_turns or None, args.workers),
    )
    if as_json:
        emit_json(outcome.to_json())
        return EXIT_OK
    result, report = outcome.result, outcome.result.report()
    print(
        f"{'updated' if args.update else 'built'} {args.update or args.out} {outcome.version}: {len(result.book.rules)} rules "
        f"({', '.join(f'{n} {s}' for s, n in sorted(report['statuses'].items()))}) from {outcome.episodes} "
        f"trajectories, {len(result.book.evidence)} transitions"
        + (
            f" ({report['excluded']['dialogue_only']} dialogue-only episodes left out)"
            if report["excluded"].get("dialogue_only")
            else ""
        )
        + (
            f" ({report['excluded']['too_deep']} episodes nested past the depth cap left out)"
            if report["excluded"].get("too_deep")
            else ""
        )
    )
    print("stages: " + ", ".join(f"{stage} {seconds:.2f}s" for stage, seconds in result.timings.items()))
    for warning in outcome.warnings:
        print(f"warning: {warning}")
    if report["validation"]:
        leak_ok = result.leakage is not None and result.leakage.ok
        print(f"held-out split {outcome.validation_split!r}; leakage check {'ok' if leak_ok else 'FAILED'}")
        print_validation(report["validation"])
    if outcome.cross_fit is not None:
        print(f"cross-fitting, {args.folds} folds by trajectory family (pooled over the held-out folds):")
        print_validation(outcome.cross_fit["pooled"])
    if not report["validation"] and outcome.cross_fit is None:
        print("not validated: give --validate-split or --folds K to replay held-out trajectories")
    return EXIT_OK
