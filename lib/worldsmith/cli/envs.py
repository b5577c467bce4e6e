"""`worldsmith envs list|tasks|check`, `worldsmith collect ENV ...` and `worldsmith replay ENV ...`."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from worldsmith.cli.common import EXIT_ERROR, EXIT_OK, CommandError, add_common, emit_json, workspace_from
from worldsmith.envs import POLICIES, EnvError, check_env, make, registry, spec
from worldsmith.envs.collect import CollectConfig, CollectProgress, collect, list_tasks
from worldsmith.envs.replay import ReplayResult, load_actions, replay, replay_episode
from worldsmith.util.paths import read_user_text


def _env_kwargs(pairs: list[str] | None, flag: str = "--env-arg") -> dict[str, Any]:
    """`--env-arg` (or `--policy-arg`) key=value pairs; values are JSON when they parse (numbers, lists), else text."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CommandError(f"{flag} {pair!r}: expected KEY=VALUE")
        try:
            out[key] = orjson.loads(value)
        except orjson.JSONDecodeError:
            out[key] = value
    return out


MCP_OPTIONS = ("server_command", "server_url", "server_tasks", "server_reset")


def add_mcp_options(parser: argparse.ArgumentParser) -> None:
    """The options that say which MCP server the `mcp` environment is (its constructor's arguments)."""
    group = parser.add_argument_group("MCP server (for the environment mcp)")
    group.add_argument("--server-command", metavar="COMMAND",
                       help="start the server with this command line and talk to it over stdio, e.g. "
                            "'mcp-server-sqlite --db-path work.db' (a new process per episode)")
    group.add_argument("--server-url", metavar="URL", help="the server's streamable HTTP endpoint "
                       "(http://host:port/mcp; a new MCP session per episode)")
    group.add_argument("--server-tasks", type=Path, metavar="FILE",
                       help="the tasks: JSON or JSONL of {id, instruction, ground_truth: [{name, arguments}], answer}"
                            " (default: one open task)")
    group.add_argument("--server-reset", metavar="COMMAND",
                       help="run before each episode, no shell (e.g. 'cp base.db work.db' to restore a database)")


def env_kwargs_from(args: argparse.Namespace) -> dict[str, Any]:
    """The environment's constructor arguments: `--env-arg` pairs, and for `mcp` the `--server-*` options (the
    tasks file as an absolute path: the episodes record it, and W2R rebuilds the server from anywhere)."""
    kwargs = _env_kwargs(getattr(args, "env_arg", None))
    given: dict[str, Any] = {name: getattr(args, name) for name in MCP_OPTIONS if getattr(args, name, None) is not None}
    if given and args.env != "mcp":
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise CommandError(f"{flags}: only for the environment mcp, not {args.env!r}")
    if "server_command" in given:
        kwargs["command"] = given["server_command"]
    if "server_url" in given:
        kwargs["url"] = given["server_url"]
    if "server_tasks" in given:
        kwargs["tasks"] = str(Path(given["server_tasks"]).resolve())
    if "server_reset" in given:
        kwargs["reset"] = given["server_reset"]
    return kwargs


def register(subparsers: argparse._SubParsersAction) -> None:
    envs = subparsers.add_parser("envs", help="list real environments, their tasks; check an adapter")
    actions = envs.add_subparsers(dest="envs_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="registered environments and whether they can run here")
    add_common(listing)
    listing.set_defaults(handler=run_list)
    tasks = actions.add_parser("tasks", help="task ids of an environment")
    tasks.add_argument("env")
    tasks.add_argument("--env-arg", action="append", metavar="KEY=VALUE", help="environment constructor argument")
    tasks.add_argument("--limit", type=int, default=0, help="print at most N ids (0: all)")
    add_mcp_options(tasks)
    add_common(tasks)
    tasks.set_defaults(handler=run_tasks)
    checking = actions.add_parser("check", help="run the environment checker on one task")
    checking.add_argument("env")
    checking.add_argument("--task", help="task id (default: the first task)")
    checking.add_argument("--env-arg", action="append", metavar="KEY=VALUE")
    add_mcp_options(checking)
    add_common(checking)
    checking.set_defaults(handler=run_check)

    parser = subparsers.add_parser(
        "collect", help="play a policy in a real environment and store the episodes as a dataset",
        description="Collect episodes from a real environment into a dataset. Resumable: episodes finished "
        "by an earlier run with the same dataset are not redone. Each episode records its reward and success; "
        "load errors, crashes and timeouts are reported and the run goes on.",
    )
    parser.add_argument("env", help="environment name (worldsmith envs list)")
    parser.add_argument("--tasks", nargs="+", metavar="TASK",
                        help="task ids (for ALFWorld also game directories or game files); default: all tasks")
    parser.add_argument("--tasks-file", type=Path, help="a file with one task id per line")
    parser.add_argument("--policy", choices=POLICIES, default="expert")
    parser.add_argument("--policy-arg", action="append", metavar="KEY=VALUE",
                        help="policy option, e.g. --policy curious --policy-arg min_steps=30 --policy-arg invalid=0.2")
    parser.add_argument("--actions", type=Path, help="action file for --policy replay")
    parser.add_argument("--model", help="model spec for --policy llm (e.g. tiny:data_samples/models/tiny)")
    parser.add_argument("--episodes", type=int, help="number of episodes (default: one per task)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-steps", type=int, help="step cap per episode (default: the environment's)")
    parser.add_argument("--workers", type=int,
                        help="parallel environment processes (default 1; 0: in-process); with --ray at most N Ray "
                             "tasks at once (default: all CPUs)")
    parser.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                        help="run the episodes as Ray tasks: a local Ray, or the cluster at ADDRESS (ray://head:10001)")
    parser.add_argument("--timeout", type=float, default=600.0, help="wall-clock limit per episode, seconds")
    parser.add_argument("--keep", choices=("success", "all"),
                        help="episodes to store (default: success for the expert, all otherwise)")
    parser.add_argument("--no-state", action="store_true", help="do not record ground-truth state snapshots")
    parser.add_argument("--env-arg", action="append", metavar="KEY=VALUE", help="environment constructor argument")
    parser.add_argument("--dataset", required=True)
    add_mcp_options(parser)
    add_common(parser)
    parser.set_defaults(handler=run_collect)

    replaying = subparsers.add_parser(
        "replay", help="replay an action sequence (or a recorded episode) in a real environment",
        description="Replay actions on one task and report every observation, the final reward and success; "
        "with --episode, replay a recorded episode and compare each observation with the recording.",
    )
    replaying.add_argument("env")
    replaying.add_argument("--task", help="task id (required with --actions)")
    replaying.add_argument("--actions", type=Path, help="JSON list, JSONL, or one text command per line")
    replaying.add_argument("--episode", help="episode id of --dataset to replay and compare")
    replaying.add_argument("--dataset", help="dataset holding --episode")
    replaying.add_argument("--seed", type=int)
    replaying.add_argument("--env-arg", action="append", metavar="KEY=VALUE")
    add_mcp_options(replaying)
    add_common(replaying)
    replaying.set_defaults(handler=run_replay)


def run_list(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = [
        {"name": s.name, "description": s.description, "available": not s.missing(), "missing": s.missing(),
         "install": s.install_hint if s.missing() else "", "max_steps": s.max_steps}
        for s in registry().values()
    ]
    if getattr(args, "json", False):
        emit_json({"environments": rows})
    else:
        for row in rows:
            state = "ready" if row["available"] else f"missing {', '.join(row['missing'])}: {row['install']}"
            print(f"{row['name']:<20} {row['description']}  [{state}]")
    return EXIT_OK


def run_tasks(args: argparse.Namespace) -> int:
    tasks = list_tasks(args.env, env_kwargs_from(args))
    shown = tasks[: args.limit] if args.limit else tasks
    if getattr(args, "json", False):
        emit_json({"env": args.env, "count": len(tasks), "tasks": shown})
    else:
        print("\n".join(shown))
        if len(shown) < len(tasks):
            print(f"... {len(tasks) - len(shown)} more ({len(tasks)} in all)", file=sys.stderr)
    return EXIT_OK


def run_check(args: argparse.Namespace) -> int:
    env = make(args.env, **env_kwargs_from(args))
    task = args.task or next(iter(env.tasks()), None)
    try:
        check_env(env, task)
    except AssertionError as error:
        if getattr(args, "json", False):
            emit_json({"env": args.env, "task": task, "ok": False, "problems": str(error)})
        else:
            print(f"{args.env} ({task}): FAILED {error}")
        return EXIT_ERROR
    finally:
        env.close()
    if getattr(args, "json", False):
        emit_json({"env": args.env, "task": task, "ok": True})
    else:
        print(f"{args.env} ({task}): ok")
    return EXIT_OK


class _Bar:
    """A progress bar on stderr (a terminal) or one line per episode (a log)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.started = time.monotonic()
        self.wins = 0

    def __call__(self, progress: CollectProgress) -> None:
        if self.quiet:
            return
        result = progress.result
        if result is not None and result.success:
            self.wins += 1
        width = 30
        filled = int(width * progress.done / progress.total) if progress.total else width
        elapsed = time.monotonic() - self.started
        line = (f"[{'#' * filled}{'.' * (width - filled)}] {progress.done}/{progress.total} episodes, "
                f"{self.wins} won, {elapsed:.0f}s")
        if self.tty:
            sys.stderr.write("\r" + line + "   ")
        elif result is not None:
            sys.stderr.write(f"{line}  {result.task}: {result.status}"
                             + (f" ({result.error})" if result.error else "") + "\n")
        sys.stderr.flush()


def run_collect(args: argparse.Namespace) -> int:
    workspace = workspace_from(args)
    spec(args.env)  # unknown names fail before anything starts
    tasks = list(args.tasks or [])
    if args.tasks_file:
        tasks += [line.strip() for line in read_user_text(args.tasks_file, "--tasks-file").splitlines() if line.strip()]
    actions = None
    if args.policy == "replay":
        if args.actions is None:
            raise CommandError("--policy replay needs --actions FILE")
        actions = [a if isinstance(a, str) else a.model_dump(mode="json") for a in load_actions(args.actions)]
    config = CollectConfig(
        env=args.env, tasks=tasks or None, policy=args.policy,
        policy_options=_env_kwargs(args.policy_arg, "--policy-arg"), episodes=args.episodes, seed=args.seed,
        max_steps=args.max_steps, workers=args.workers if args.workers is not None else 0 if args.ray else 1,
        ray_address=args.ray, episode_timeout=args.timeout, keep=args.keep,
        record_state=not args.no_state, env_kwargs=env_kwargs_from(args), actions=actions, model=args.model,
    )
    quiet = getattr(args, "json", False) and not sys.stderr.isatty()
    bar = _Bar(quiet)
    try:
        report = collect(workspace, args.dataset, config, progress=bar)
    except EnvError as error:
        raise CommandError(str(error)) from None
    if bar.tty and not quiet:
        sys.stderr.write("\n")
    summary = report.summary()
    if getattr(args, "json", False):
        emit_json(summary)
    else:
        rate = "n/a" if report.win_rate is None else f"{report.win_rate:.1%}"
        print(f"{args.env}: {len(report.results)} work items ({report.skipped} already done), "
              f"{report.wins} won, win rate {rate}; status {summary['status']}")
        for failure in summary["failures"][:20]:
            print(f"  {failure['task']}: {failure['status']}" + (f": {failure['error']}" if failure["error"] else ""))
        print(f"dataset {args.dataset}: {report.ingested} episodes stored, {report.duplicates} already there; "
              f"run files in {report.run_dir}")
    played = [r for r in report.results if r.status in ("ok", "failed")]
    return EXIT_OK if played else EXIT_ERROR


def run_replay(args: argparse.Namespace) -> int:
    kwargs = env_kwargs_from(args)
    result: ReplayResult
    if args.episode:
        if not args.dataset:
            raise CommandError("--episode needs --dataset")
        episode = workspace_from(args).dataset(args.dataset).episode(args.episode)
        env = make(args.env, **(kwargs or episode.metadata.get("env", {}).get("kwargs", {})))
        try:
            result = replay_episode(episode, env)
        finally:
            env.close()
    else:
        if not args.task or not args.actions:
            raise CommandError("give --task and --actions, or --episode and --dataset")
        result = replay(args.env, args.task, load_actions(args.actions), seed=args.seed, env_kwargs=kwargs)
    if getattr(args, "json", False):
        emit_json(result.summary())
    else:
        print(result.initial_observation)
        for step in result.steps:
            mark = {True: " [matches]", False: " [DIFFERS from the recording]", None: ""}[step.matches]
            print(f"\n> {step.action}{mark}\n{step.observation}")
            if step.matches is False:
                print(f"--- recorded:\n{step.recorded}")
        verdict = "" if result.reproduced is None else ("; reproduced" if result.reproduced else
                                                        f"; diverged at step {result.first_divergence}")
        print(f"\n{len(result.steps)} steps, reward {result.reward:g}, success {result.success}{verdict}")
    return EXIT_OK if result.reproduced is not False else EXIT_ERROR
