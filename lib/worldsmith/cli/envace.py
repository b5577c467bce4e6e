"""`worldsmith envace train|sweep|eval`: train agents that rehearse their environment, sweep their knobs, evaluate them.

`train --config FILE [--out DIR] [--json]` runs (or resumes) one EnvACE run and prints its summary
(the JSON carries act_loss_first/last, rehearse_loss_first/last, rehearsal_fidelity, probe_source, probe_split,
and data.probe_transitions / probe_skipped_for_length: what the probe scored and what was too long to score);
progress goes to stderr. `sweep --config FILE [--address ADDR] [--num-cpus N]` runs a grid of
trials through Ray Tune. `runs [--json]` lists the workspace's runs with their state (a run whose
process is gone reads `stopped`). `eval` is `worldsmith.cli.envace_eval`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from worldsmith.cli.common import EXIT_ERROR, EXIT_OK, CommandError, add_common, emit_json

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser("envace", help="EnvACE: train, sweep and evaluate agents that rehearse their env")
    actions = group.add_subparsers(dest="envace_command", required=True, metavar="ACTION")

    train = actions.add_parser("train", help="train (or resume) one EnvACE run from a config file")
    train.add_argument("--config", required=True, type=Path, help="EnvACE config (YAML or JSON)")
    train.add_argument("--out", type=Path, help="run folder (default: the config's out, else "
                       "<workspace>/runs/envace/<name>)")
    train.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                       help="override a config field (dotted, YAML value), e.g. --set lam=0 --set grpo.group_size=2")
    train.add_argument("--no-resume", action="store_true", help="start over even if the run folder has checkpoints")
    add_common(train)
    train.set_defaults(handler=run_train)

    sweep = actions.add_parser("sweep", help="run a grid of EnvACE trials through Ray Tune")
    sweep.add_argument("--config", required=True, type=Path, help="sweep config (YAML): base, grid, metric, mode")
    sweep.add_argument("--address", help="Ray cluster address (default: a local Ray on this machine)")
    sweep.add_argument("--num-cpus", type=int, help="CPUs for the local Ray (default: all)")
    sweep.add_argument("--out", type=Path, help="sweep folder (default: <workspace>/runs/envace/sweeps/<name>)")
    add_common(sweep)
    sweep.set_defaults(handler=run_sweep_command)

    runs = actions.add_parser("runs", help="the workspace's EnvACE runs and their state (a killed run: stopped)")
    add_common(runs)
    runs.set_defaults(handler=run_runs)

    try:
        from worldsmith.cli.envace_eval import register_eval
    except ImportError:  # the evaluation action is optional
        return
    register_eval(actions)


def _overrides(items: list[str]) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"--set {item!r}: expected FIELD=VALUE", code=2)
        out[key.strip()] = yaml.safe_load(value) if value.strip() else None
    return out


def run_train(args: argparse.Namespace) -> int:
    from worldsmith.envace.config import EnvACEConfig
    from worldsmith.envace.trainer import Trainer

    overrides = _overrides(args.set)
    if getattr(args, "workspace", None):
        overrides["workspace"] = str(args.workspace)
    config = EnvACEConfig.from_file(args.config, overrides)
    as_json = getattr(args, "json", False)

    def progress(row: dict[str, Any]) -> None:
        shown = {key: row[key] for key in ("act_loss", "rehearse_loss", "reward", "reward_rehearse",
                                           "rehearsal_fidelity", "tokens_per_s") if key in row}
        text = " ".join(f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}"
                        for key, value in shown.items())
        print(f"step {row['step']}/{config.steps} {text}", file=sys.stderr, flush=True)

    trainer = Trainer(config, out=args.out, progress=progress)
    summary = trainer.train(resume=not args.no_resume)
    if not trainer.is_main:  # launched on several processes: the main one reports
        return EXIT_OK
    data = summary.to_json()
    if as_json:
        emit_json(data)
        return EXIT_OK
    print(f"run {data['run_dir']} ({data['objective']}, {data['steps']} steps, {data['time_s']} s)")
    for role in ("act", "rehearse"):
        first, last = data[f"{role}_loss_first"], data[f"{role}_loss_last"]
        if first is not None:
            print(f"  {role:<9} loss {first:.4f} -> {last:.4f}")
    probed = "training episodes" if data["probe_source"] == "train" else f"held-out: {data['probe_split']}"
    counts = data.get("data") or {}
    print(f"  probe on {probed}: {counts.get('probe_transitions', 0)} items used, "
          f"{counts.get('probe_skipped_for_length', 0)} skipped for length (reference longer than max_seq_len)")
    if data["rehearsal_fidelity"] is not None:
        print(f"  rehearsal fidelity ({config.probe.metric}) {data['rehearsal_fidelity']:.4f}"
              + ("  DRIFT" if data["drift"] else ""))
    if data["reward_first"] is not None:
        print(f"  reward {data['reward_first']:.4f} -> {data['reward_last']:.4f}")
    print(f"  {data['tokens_per_s']} tokens/s; checkpoint {data['checkpoint']}")
    return EXIT_OK


def run_runs(args: argparse.Namespace) -> int:
    from worldsmith.cli.common import workspace_from
    from worldsmith.envace.training_runs import run_states, runs_dir

    rows = run_states(runs_dir(workspace_from(args).root))
    if getattr(args, "json", False):
        emit_json({"runs": rows})
        return EXIT_OK
    if not rows:
        print("no EnvACE runs in this workspace")
    for row in rows:
        progress = f"{row.get('step') or 0}/{row.get('steps') or '?'}"
        print(f"{row['name']:<32} {row['state'] or '?':<9} {progress:<9} {row.get('objective') or ''}"
              + (f"  ({row['error']})" if row.get("error") else ""))
    return EXIT_OK


def run_sweep_command(args: argparse.Namespace) -> int:
    from worldsmith.envace.sweep import SweepConfig, run_sweep

    config = SweepConfig.from_file(args.config)
    result = run_sweep(config, address=args.address, num_cpus=args.num_cpus, out=args.out,
                       workspace=getattr(args, "workspace", None))
    data = result.model_dump()
    if getattr(args, "json", False):
        emit_json(data)
    else:
        print(f"sweep {result.name}: {len(result.trials)} trials, {result.failed} failed ({result.seconds} s) "
              f"-> {result.out}/sweep.json")
        for row in result.trials:
            value = row.get(result.metric)
            shown = f"{value:.4f}" if isinstance(value, float) else "-"
            print(f"  {row['trial']:<40} {row['status']:<7} {result.metric} {shown}"
                  + (f"  {row['error'].splitlines()[-1][:120]}" if row.get("error") else ""))
    return EXIT_OK if result.failed < len(result.trials) else EXIT_ERROR
