"""`worldsmith explore ENV --book B --budget STEPS`: active collection, the book rebuilt and scored between rounds."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import ValidationError

from worldsmith.cli.common import EXIT_OK, CommandError, add_common, emit_json, workspace_from
from worldsmith.cli.envs import _env_kwargs, add_mcp_options, env_kwargs_from
from worldsmith.envs import EnvError, spec
from worldsmith.evals.explore import STRATEGIES, ExploreConfig, ExploreProgress, ExploreReport, explore
from worldsmith.evals.heldout import HeldOut
from worldsmith.workspace import Workspace


def register(subparsers: argparse._SubParsersAction) -> None:
    fields = {name: field.description or "" for name, field in ExploreConfig.model_fields.items()}
    parser = subparsers.add_parser(
        "explore", help="spend a budget of real steps in rounds, rebuilding the book and scoring it between them",
        description="Active collection: play a strategy in a real environment until BUDGET env.step calls are "
        "spent, in ROUNDS rounds; after each round the episodes are ingested into --dataset, the book is rebuilt "
        "from every episode of it and saved as a new version of --book, and scored on the held-out set. Writes "
        "runs/explore/DATASET/ (config.json, rounds.jsonl, curve.json); a rerun skips finished rounds.",
    )
    parser.add_argument("env", help="environment name (worldsmith envs list)")
    parser.add_argument("--book", required=True, help="the book each round is saved as (when it exists, round 1 "
                        "acts with its current version)")
    parser.add_argument("--budget", type=int, required=True, metavar="STEPS", help=fields["budget"])
    parser.add_argument("--rounds", type=int, default=4, help=fields["rounds"] + " (default 4)")
    parser.add_argument("--strategy", choices=STRATEGIES, default="explore",
                        help="explore: the exploring policy; expert; random: uniform over the same candidates; "
                             "mix: expert with probability --explore, else random (default explore)")
    parser.add_argument("--explore", type=float, default=0.5, help=fields["explore"] + " (default 0.5)")
    parser.add_argument("--explore-schedule", nargs="+", type=float, metavar="WEIGHT",
                        help=fields["explore_schedule"])
    parser.add_argument("--policy-arg", action="append", metavar="KEY=VALUE",
                        help="exploring policy option, e.g. --policy-arg write_weight=1.0 --policy-arg max_detour=3")
    parser.add_argument("--seed", type=int, default=0, help=fields["seed"])
    parser.add_argument("--max-steps", type=int, help=fields["max_steps"])
    parser.add_argument("--held-out", metavar="DATASET[:SPLIT]",
                        help="score each round's book on this dataset's split (without :SPLIT, every episode of it)")
    parser.add_argument("--tasks", nargs="+", metavar="TASK", help=fields["tasks"])
    parser.add_argument("--tasks-file", type=Path, help="a file with one task id per line")
    parser.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                        help="run each round's episodes as Ray tasks: a local Ray, or the cluster at ADDRESS")
    parser.add_argument("--workers", type=int, default=0, help=fields["workers"])
    parser.add_argument("--env-arg", action="append", metavar="KEY=VALUE", help="environment constructor argument")
    parser.add_argument("--dataset", help="where the episodes go (default: explore-ENV-BOOK)")
    add_mcp_options(parser)
    add_common(parser)
    parser.set_defaults(handler=run_explore)


def heldout_from(value: str | None, workspace: Workspace) -> HeldOut | None:
    """`DATASET:SPLIT`, or `DATASET` for every episode of it."""
    if not value:
        return None
    dataset, sep, split = value.partition(":")
    if not dataset or (sep and not split):
        raise CommandError(f"--held-out {value!r}: expected DATASET or DATASET:SPLIT")
    if split:
        return HeldOut(dataset=dataset, split=split)
    ids = tuple(e.id for e in workspace.dataset(dataset).iter_episodes() if e.turns)
    if not ids:
        raise CommandError(f"--held-out {value!r}: dataset {dataset!r} has no episodes with turns")
    return HeldOut(dataset=dataset, episodes=ids)


class _Line:
    """One progress line on stderr (rewritten in place on a terminal)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet, self.tty = quiet, sys.stderr.isatty()

    def __call__(self, event: ExploreProgress) -> None:
        if self.quiet:
            return
        text = f"[{event.steps}/{event.budget} steps] {event.what}"
        if event.finished is not None:
            round_ = event.finished
            score = "n/a" if round_.exact_match is None else f"{round_.exact_match:.3f} [{round_.low:.3f}, {round_.high:.3f}]"
            text = (f"round {round_.round}: {round_.total_steps} steps, {round_.episodes} episodes, "
                    f"{round_.rules} rules ({len(round_.new_rules)} new or changed), held-out exact match {score}")
            sys.stderr.write(("\r" if self.tty else "") + text + "\n")
        elif self.tty:
            sys.stderr.write("\r" + text[:100].ljust(100))
        sys.stderr.flush()


def _print(report: ExploreReport) -> None:
    print(f"{report.config.env} ({report.config.strategy}): {report.steps} real steps in {len(report.rounds)} rounds "
          f"({report.resumed} done earlier); book {report.book}, dataset {report.dataset}")
    for round_ in report.rounds:
        score = "n/a" if round_.exact_match is None else \
            f"{round_.exact_match:.3f} [{round_.low:.3f}, {round_.high:.3f}]"
        print(f"  round {round_.round}: {round_.total_steps:>6} steps  {round_.version}  {round_.rules} rules  "
              f"exact match {score}")
        for change in round_.new_rules[:5]:
            print(f"      {change.kind} {change.id} ({change.action}, {change.status}): {', '.join(change.turns[:3])}")
    skipped = report.skipped_tasks
    if skipped:
        print(f"skipped {len(skipped)} task{'s' if len(skipped) != 1 else ''} that could not load (their budget went "
              "to the others):")
        for task, why in skipped.items():
            print(f"  {task}: {why}")
    print(f"run files in {report.run_dir}")


def run_explore(args: argparse.Namespace) -> int:
    workspace = workspace_from(args)
    spec(args.env)  # unknown names fail before anything starts
    tasks = list(args.tasks or [])
    if args.tasks_file:
        tasks += [line.strip() for line in args.tasks_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    try:
        config = ExploreConfig(env=args.env, budget=args.budget, rounds=args.rounds, strategy=args.strategy,
                               tasks=tasks or None, seed=args.seed, max_steps=args.max_steps, explore=args.explore,
                               book=args.book, heldout=heldout_from(args.held_out, workspace), ray_address=args.ray,
                               workers=args.workers, env_kwargs=env_kwargs_from(args),
                               policy_options=_env_kwargs(args.policy_arg, "--policy-arg"),
                               explore_schedule=args.explore_schedule)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in error.errors())
        raise CommandError(f"explore: {problems}") from None
    dataset = args.dataset or f"explore-{args.env}-{args.book}"
    quiet = getattr(args, "json", False) and not sys.stderr.isatty()
    try:
        report = explore(workspace, dataset, config, progress=_Line(quiet))
    except EnvError as error:
        raise CommandError(str(error)) from None
    if getattr(args, "json", False):
        emit_json({**report.summary(), "rounds_detail": [r.model_dump(mode="json") for r in report.rounds]})
    else:
        _print(report)
    return EXIT_OK
