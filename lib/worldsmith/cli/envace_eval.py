"""`worldsmith envace eval`: a checkpoint in real environments with and without test-time rehearsal.

Registered under the `envace` command group (`worldsmith.cli.envace` calls `register_eval`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from worldsmith.cli.common import EXIT_OK, add_common, emit_json

__all__ = ["register_eval", "run_envace_eval"]


def register_eval(actions: argparse._SubParsersAction) -> None:
    """Add the `eval` action to the `envace` group's sub-parsers."""
    parser = actions.add_parser(
        "eval", help="evaluate a checkpoint in a real environment with and without test-time rehearsal",
        description="Play the same tasks with the plain policy and with rehearsal (K sequential imagined steps "
                    "and/or N parallel continuations); success and score with paired bootstrap intervals.",
    )
    parser.add_argument("--checkpoint", required=True, metavar="DIR",
                        help="checkpoint folder (weights + tokenizer), e.g. <run>/checkpoints/step-40")
    parser.add_argument("--env", default="bfcl", help="registered environment (default: bfcl)")
    parser.add_argument("--rehearse", type=int, default=1, metavar="K", help="sequential imagined steps (default 1)")
    parser.add_argument("--parallel", type=int, default=0, metavar="N", help="parallel imagined continuations")
    parser.add_argument("--depth", type=int, default=1, help="imagined steps per parallel continuation")
    parser.add_argument("--irreversible-only", action="store_true",
                        help="rehearse only before irreversible actions (delete, remove, transfer, submit, ...)")
    parser.add_argument("--tasks", nargs="+", metavar="TASK", help="task ids (default: the first --n-tasks)")
    parser.add_argument("--n-tasks", type=int, default=5, help="tasks when --tasks is not given (default 5)")
    parser.add_argument("--category", action="append", metavar="NAME",
                        help="BFCL category to draw tasks from (repeatable; e.g. multi_turn_base)")
    parser.add_argument("--include-training-tasks", action="store_true",
                        help="also evaluate on tasks the checkpoint's run trained on")
    parser.add_argument("--max-steps", type=int, default=20, help="actions per episode (default 20)")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", help="cpu, cuda, cuda:1 (default: cuda when available)")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument("--out", metavar="DIR", help="run store (default: <run>/evals/... for a run's checkpoint)")
    add_common(parser)
    parser.set_defaults(handler=run_envace_eval)


def _progress(done: int, total: int, message: str) -> None:
    print(f"[{done}/{total}] {message}", file=sys.stderr, flush=True)


def _interval(entry: dict[str, Any] | None, key: str) -> str:
    if not entry or entry.get(key) is None:
        return "-"
    return f"{entry[key]:.3f} [{entry['low']:.3f}, {entry['high']:.3f}]"


def run_envace_eval(args: argparse.Namespace) -> int:
    from worldsmith.envace.evaluate import EvalSettings, evaluate_checkpoint

    options: dict[str, Any] = {
        "tasks": args.tasks or [], "n_tasks": args.n_tasks, "max_steps": args.max_steps,
        "resamples": args.resamples, "seed": args.seed, "device": args.device, "threads": args.threads,
        "exclude_training_tasks": not args.include_training_tasks,
    }
    if args.category:
        options["env_kwargs"] = {"categories": args.category}
    settings = EvalSettings.build(args.checkpoint, env=args.env, rehearse=args.rehearse, parallel=args.parallel,
                                  depth=args.depth, irreversible_only=args.irreversible_only, **options)
    as_json = getattr(args, "json", False)
    result = evaluate_checkpoint(settings, out=args.out, progress=None if as_json else _progress)
    summary = result.summary()
    if as_json:
        emit_json(summary)
        return EXIT_OK
    print(f"checkpoint {settings.checkpoint} on {settings.env}: {len(summary['tasks'])} tasks")
    for method, entry in summary["methods"].items():
        cost = summary["cost"][method]
        print(f"  {method:<12} success {_interval(entry.get('success'), 'mean')}  score "
              f"{_interval(entry.get('score'), 'mean')}  calls/step {cost['model_calls_per_step']}  "
              f"cached {cost['cached_share']:.0%}")
    for pair, entry in summary["pairs"].items():
        print(f"  {pair:<20} success {_interval(entry.get('success'), 'mean_diff')}  score "
              f"{_interval(entry.get('score'), 'mean_diff')}")
    if result.out is not None:
        print(f"written to {result.out}")
    else:
        print(orjson.dumps({"note": "not written: give --out"}).decode())
    return EXIT_OK
