"""`worldsmith build`: build a worldbook from a dataset, validate it on held-out trajectories, save a version."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from worldsmith.cli.common import EXIT_OK, CommandError, add_common, emit_json, workspace_from
from worldsmith.workspace import Workspace
from worldsmith.worldbook import WorldbookStore
from worldsmith.worldbook.build import BuildConfig, BuildResult, build_worldbook, cross_fit

__all__ = ["print_validation", "register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "build", help="build a worldbook from a dataset's trajectories (Trace2Env offline)",
        description="Build a worldbook (deterministic by default; --llm runs the rules and notes stages on a "
                    "model), validate it by replaying held-out trajectories, and save it as a new version.")
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--split", help="build from this split only (e.g. train)")
    parser.add_argument("--validate-split", metavar="SPLIT",
                        help="validate on this split (default with --split train: validation, else test, if present)")
    parser.add_argument("--llm", metavar="SPEC", help="model spec for the model-backed stages")
    parser.add_argument("--folds", type=int, default=0, help="cross-fit: K folds by trajectory family")
    parser.add_argument("--out", required=True, metavar="BOOK", help="worldbook name to save")
    parser.add_argument("--min-support", type=int, default=BuildConfig.min_support)
    parser.add_argument("--min-confirmations", type=int, default=BuildConfig.min_confirmations)
    parser.add_argument("--message", default="")
    add_common(parser)
    parser.set_defaults(handler=run_build)


def _progress(quiet: bool) -> Any:
    if quiet:
        return None

    def show(stage: str, done: int, total: int) -> None:
        print(f"  [{done}/{total}] {stage}", file=sys.stderr, flush=True)
    return show


def _validation_split(workspace: Workspace, args: argparse.Namespace) -> str | None:
    if args.validate_split:
        return args.validate_split
    if args.split:
        splits = workspace.dataset(args.dataset).splits()
        return next((s for s in ("validation", "val", "test") if s in splits and s != args.split), None)
    return None


def print_validation(report: dict[str, Any]) -> None:
    totals, common = report["totals"], report["common_actions"]
    print(f"validation: {totals['turns']} turns; coverage {totals['coverage']:.1%} "
          f"(conditions checked {totals['coverage_verified']:.1%}); exact match {totals['exact_match']:.1%}; "
          f"observations a supported rule explains {totals['explained']:.1%}")
    print(f"common actions ({', '.join(common['actions'])}): coverage {common['coverage']:.1%} "
          f"(checked {common['coverage_verified']:.1%}), exact match {common['exact_match']:.1%}")
    print(f"  {'action':<24} {'turns':>6} {'coverage':>9} {'checked':>8} {'exact':>7}")
    for action, row in report["per_action"].items():
        print(f"  {action[:24]:<24} {row['turns']:>6} {row['covered_rate']:>9.1%} {row['verified_rate']:>8.1%} "
              f"{row['exact_rate']:>7.1%}")


def run_build(args: argparse.Namespace) -> int:
    workspace = workspace_from(args)
    dataset = workspace.dataset(args.dataset)
    as_json = getattr(args, "json", False)
    episodes = list(dataset.iter_episodes(args.split))
    if not episodes:
        raise CommandError(f"dataset {args.dataset!r} has no episodes" + (f" in split {args.split!r}" if args.split
                                                                          else ""))
    config = BuildConfig(llm=args.llm, min_support=args.min_support, min_confirmations=args.min_confirmations)
    held_split = _validation_split(workspace, args)
    held_out = list(dataset.iter_episodes(held_split)) if held_split else None
    cache_dir = workspace.root / "runs" / "build" / args.out / "cache"
    progress = _progress(as_json)
    output: dict[str, Any] = {}
    if args.folds:
        folds = cross_fit(episodes, name=args.out, folds=args.folds, config=config, cache_dir=cache_dir,
                          workspace_root=workspace.root, progress=progress)
        output["cross_fit"] = folds.summary()
    result: BuildResult = build_worldbook(episodes, name=args.out, config=config, validation=held_out,
                                         cache_dir=cache_dir, workspace_root=workspace.root, progress=progress)
    store = WorldbookStore(workspace.root / "worldbooks")
    parent = store.head(args.out) if args.out in store.names() else None
    report = result.report()
    validation = report["validation"] or (output.get("cross_fit") or {}).get("pooled")
    info = store.save(
        result.book, parent=parent, author="worldsmith build",
        message=args.message or f"built from {args.dataset}" + (f" ({args.split})" if args.split else ""),
        build={"builder": "model" if args.llm else "deterministic", "config": config.to_json(),
               "timings_s": result.timings, "folds": args.folds},
        sources=[{"dataset": args.dataset, "split": args.split, "episodes": len(episodes),
                  "validation_split": held_split}],
        validation={"status": "validated" if validation else "not validated",
                    **({"totals": validation["totals"], "common_actions": validation["common_actions"]}
                       if validation else {}),
                    "leakage": result.leakage},
    )
    output.update({"book": args.out, "version": info.version, "parent": parent, **report})
    if as_json:
        emit_json(output)
        return EXIT_OK
    print(f"built {args.out} {info.version}: {len(result.book.rules)} rules "
          f"({', '.join(f'{n} {s}' for s, n in sorted(report['statuses'].items()))}) from {len(episodes)} "
          f"trajectories, {len(result.book.evidence)} transitions")
    if report["validation"]:
        print(f"held-out split {held_split!r}; leakage check {'ok' if result.leakage and result.leakage['ok'] else 'FAILED'}")
        print_validation(report["validation"])
    if "cross_fit" in output:
        print(f"cross-fitting, {args.folds} folds by trajectory family (pooled over the held-out folds):")
        print_validation(output["cross_fit"]["pooled"])
    if not report["validation"] and "cross_fit" not in output:
        print("not validated: give --validate-split or --folds K to replay held-out trajectories")
    return EXIT_OK
