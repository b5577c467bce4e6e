"""`worldsmith traces list|show|search|index|diff|relabel|schema|formats` and `worldsmith datasets`."""

from __future__ import annotations

import argparse
import sys

import orjson

from worldsmith.cli.common import EXIT_OK, EXIT_USAGE, CommandError, add_common, emit_json, workspace_from
from worldsmith.traces import IMPORTERS, Episode, Turn, episode_json_schema, json_text_changes
from worldsmith.util.atomic import atomic_write_json
from worldsmith.util.errors import BadInputError, user_path
from worldsmith.workspace import EpisodeFilter

DIALOGUE_ONLY = "dialogue only"  # how a listing or a view marks an episode without a tool turn


def register(subparsers: argparse._SubParsersAction) -> None:
    traces = subparsers.add_parser("traces", help="browse episodes; the native JSON Schema; known formats")
    commands = traces.add_subparsers(dest="traces_command", required=True, metavar="{list,show,search,index,diff,relabel,schema,formats}")

    listing = commands.add_parser("list", help="list episodes of a dataset (paged, filtered)")
    listing.add_argument("--dataset", required=True)
    listing.add_argument("--env", help="only this environment id")
    listing.add_argument("--task", help="only tasks containing this text")
    listing.add_argument("--outcome", choices=["success", "failure", "unknown"])
    listing.add_argument("--min-turns", type=int)
    listing.add_argument("--max-turns", type=int)
    listing.add_argument("--split")
    listing.add_argument("--search", help="only episodes whose id or task contains this text")
    turns = listing.add_mutually_exclusive_group()
    turns.add_argument("--dialogue-only", dest="dialogue_only", action="store_const", const=True,
                       help="only dialogue-only episodes (messages, no tool turn)")
    turns.add_argument("--with-turns", dest="dialogue_only", action="store_const", const=False,
                       help="only episodes with at least one tool turn")
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--offset", type=int, default=0)
    add_common(listing)
    listing.set_defaults(handler=run_list)

    show = commands.add_parser("show", help="show one episode, or one turn by id (<episode>#<index>)")
    show.add_argument("id", help="episode id or turn id")
    show.add_argument("--dataset", required=True)
    add_common(show)
    show.set_defaults(handler=run_show)

    search = commands.add_parser(
        "search", help="full-text search over turns: observations, actions, arguments (ranked, with snippets)",
        description='Every term must occur as a case-insensitive substring ("user" finds getUserId; a trailing * '
                    'changes nothing); "a phrase" in quotes keeps its spaces. Uses the dataset\'s index '
                    "(search.sqlite, built at ingest); without one, a slower scan.")
    search.add_argument("query")
    search.add_argument("--dataset", required=True)
    search.add_argument("--limit", type=int, default=20)
    add_common(search)
    search.set_defaults(handler=run_search)

    index = commands.add_parser("index", help="bring a dataset's full-text search index up to date")
    index.add_argument("--dataset", required=True)
    index.add_argument("--rebuild", action="store_true", help="build it again from all parts (atomic)")
    add_common(index)
    index.set_defaults(handler=run_index)

    diff = commands.add_parser("diff", help="what changed between two turns' JSON observations (added, removed, "
                                            "changed fields)")
    diff.add_argument("before", help="turn id <episode>#<index>")
    diff.add_argument("after", help="turn id <episode>#<index>")
    diff.add_argument("--dataset", required=True)
    add_common(diff)
    diff.set_defaults(handler=run_diff)

    relabel = commands.add_parser(
        "relabel", help="give a dataset's episodes another environment id",
        description="Set the environment id of a dataset's episodes (all, or those of --from environments): "
                    "e.g. a train file and a test file of one API imported under two derived ids. Worldbooks are "
                    "built and evaluated per environment, so a book built on ID then matches these episodes.")
    relabel.add_argument("dataset")
    relabel.add_argument("--env", required=True, metavar="ID", help="the environment id to give")
    relabel.add_argument("--from", dest="from_envs", action="append", metavar="ENV",
                         help="only episodes of this environment (repeatable); default: every episode")
    relabel.add_argument("--from-unnamed", action="store_true",
                         help="only (or also, with --from) the episodes that name no environment")
    add_common(relabel)
    relabel.set_defaults(handler=run_relabel)

    schema = commands.add_parser("schema", help="print the JSON Schema of the native format")
    schema.add_argument("--out", help="write it to this file instead of stdout")
    schema.set_defaults(handler=run_schema)

    formats = commands.add_parser("formats", help="list the trace formats that can be imported")
    add_common(formats)
    formats.set_defaults(handler=run_formats)

    datasets = subparsers.add_parser("datasets", help="list the datasets of the workspace")
    add_common(datasets)
    datasets.set_defaults(handler=run_datasets)


def run_list(args: argparse.Namespace) -> int:
    if args.limit < 1 or args.offset < 0:
        raise CommandError(f"--limit must be at least 1 and --offset at least 0 (got {args.limit}, {args.offset})",
                           EXIT_USAGE)
    dataset = workspace_from(args).dataset(args.dataset)
    where = EpisodeFilter(env_id=args.env, task_contains=args.task, outcome=args.outcome,
                          min_turns=args.min_turns, max_turns=args.max_turns, split=args.split,
                          search=args.search, dialogue_only=args.dialogue_only)
    frame = dataset.list_episodes(where, limit=args.limit, offset=args.offset)
    total = dataset.count_episodes(where)
    if getattr(args, "json", False):
        records = orjson.loads(frame.to_json(orient="records"))
        emit_json({"dataset": dataset.name, "total": total, "offset": args.offset, "limit": args.limit,
                   "episodes": records})
    else:
        columns = ["episode_id", "env_id", "n_turns", "reward", "success", "split", "task"]
        shown = frame[columns].astype(object).where(frame[columns].notna(), "")
        if not frame.empty:  # a turnless episode says what it is rather than a bare 0
            shown["n_turns"] = [DIALOGUE_ONLY if flag else n for n, flag in zip(shown["n_turns"],
                                                                                 frame["dialogue_only"], strict=True)]
        print(shown.to_string(index=False, max_colwidth=60) if not frame.empty else "(no episodes)")
        print(f"{len(frame)} of {total} episodes (offset {args.offset})")
    return EXIT_OK


def run_show(args: argparse.Namespace) -> int:
    dataset = workspace_from(args).dataset(args.dataset)
    try:
        if "#" in args.id and dataset.has_turn(args.id):
            turn = dataset.turn(args.id)
            if getattr(args, "json", False):
                emit_json(turn.model_dump(mode="json"))
            else:
                sys.stdout.write(format_turn(turn))
            return EXIT_OK
        episode = dataset.episode(args.id)
    except KeyError as error:
        raise CommandError(str(error.args[0])) from None
    if getattr(args, "json", False):
        emit_json(episode.model_dump(mode="json"))
    else:
        sys.stdout.write(format_episode(episode))
    return EXIT_OK


def run_search(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise CommandError(f"--limit must be at least 1 (got {args.limit})", EXIT_USAGE)
    result = workspace_from(args).search(args.dataset, args.query, limit=args.limit)
    if getattr(args, "json", False):
        emit_json({"dataset": args.dataset, **result.to_json()})
        return EXIT_OK
    for hit in result.hits:
        print(f"{hit.turn_id}\t{' '.join(hit.snippet.split())}")
    how = ((f"index, {'best' if result.ranked else 'newest'} first") if result.used_index
           else "scan (no index of this rule yet: run `worldsmith traces index`)")
    print(f"{len(result.hits)} turns ({how}, {result.seconds * 1000:.0f} ms)")
    return EXIT_OK


def run_index(args: argparse.Namespace) -> int:
    stats = workspace_from(args).index(args.dataset, rebuild=args.rebuild)
    if getattr(args, "json", False):
        emit_json(stats.to_json())
    else:
        print(f"{stats.dataset}: {stats.rows} turns in {stats.parts} parts indexed ({stats.added_rows} added), "
              f"{stats.bytes / 1e6:.1f} MB, {stats.seconds:.1f} s")
    return EXIT_OK


def run_diff(args: argparse.Namespace) -> int:
    dataset = workspace_from(args).dataset(args.dataset)
    before, after = dataset.turn(args.before), dataset.turn(args.after)  # EpisodeNotFound, BadInputError: one line
    changes = json_text_changes(before.observation.text, after.observation.text)
    if changes is None:
        which = [t.id for t in (before, after) if t.observation.data is None]
        raise CommandError(f"not JSON: the observation of {', '.join(which)} is not a JSON object or array")
    if getattr(args, "json", False):
        emit_json({"before": before.id, "after": after.id, "changes": [c.to_json() for c in changes]})
        return EXIT_OK
    print(f"{before.id} -> {after.id}: {len(changes)} changes")
    for change in changes:
        values = {"added": f"{_compact(change.after)}", "removed": f"{_compact(change.before)}",
                  "changed": f"{_compact(change.before)} -> {_compact(change.after)}"}[change.kind]
        print(f"  {change.kind:<8} {change.path or '/'}: {values}")
    return EXIT_OK


def run_relabel(args: argparse.Namespace) -> int:
    only: list[str | None] | None = None
    if args.from_envs or args.from_unnamed:
        only = [*(args.from_envs or []), *([None] if args.from_unnamed else [])]
    try:
        result = workspace_from(args).relabel(args.dataset, args.env, only=only)
    except BadInputError as error:  # not an environment id, or none of --from-env in the dataset
        raise CommandError(str(error), EXIT_USAGE) from None
    if getattr(args, "json", False):
        emit_json(result.model_dump(mode="json"))
        return EXIT_OK
    if not result.episodes:
        print(f"{result.dataset}: every chosen episode already has environment {result.env}; nothing changed")
        return EXIT_OK
    was = ", ".join(f"{env or '(none)'}: {n}" for env, n in result.before.items())
    print(f"{result.dataset}: {result.episodes} episodes now have environment {result.env} (were {was}); "
          f"revision {result.revision}")
    return EXIT_OK


def _compact(value: object) -> str:
    return orjson.dumps(value).decode()


def _indent(text: str, prefix: str = "    ") -> str:
    return "".join(prefix + line for line in text.splitlines(keepends=True)) + ("\n" if not text.endswith("\n") else "")


def _pretty(value: object) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def format_turn(turn: Turn) -> str:
    """A readable text view of one turn (what `traces show` prints without --json)."""
    lines = [f"── turn {turn.id}"]
    for event in turn.context:
        lines.append(f"  [{event.role}]")
        lines.append(_indent(event.content).rstrip("\n"))
    action = turn.action
    lines.append(f"  action: {action.name}  {orjson.dumps(action.arguments).decode()}")
    if action.raw is not None and action.raw != orjson.dumps(action.arguments).decode():
        lines.append(f"  raw:    {action.raw}")
    if action.parse_error:
        lines.append(f"  parse error: {action.parse_error}")
    observation = turn.observation
    lines.append("  observation:")
    lines.append(_indent(_pretty(observation.data) if observation.data is not None else observation.text).rstrip("\n"))
    extras = {k: v for k, v in (("reward", turn.reward), ("done", turn.done)) if v is not None}
    if extras or turn.info:
        lines.append(f"  {' '.join(f'{k}={v}' for k, v in extras.items())} {orjson.dumps(turn.info).decode() if turn.info else ''}".rstrip())
    if turn.provenance is not None:
        where = turn.provenance.source + (f":{turn.provenance.line}" if turn.provenance.line else "")
        lines.append(f"  from {where} {turn.provenance.pointer or ''}".rstrip())
    return "\n".join(lines) + "\n"


def format_episode(episode: Episode) -> str:
    """A readable text view of one episode."""
    head = [f"episode {episode.id}" + (f"  ({DIALOGUE_ONLY}: no tool call, messages below)"
                                       if episode.dialogue_only else "")]
    for label, value in (("environment", episode.env_id), ("task id", episode.task_id), ("reward", episode.reward),
                         ("success", episode.success), ("split", episode.split), ("family", episode.family)):
        if value is not None:
            head.append(f"  {label}: {value}")
    if episode.task:
        head.append("  task:")
        head.append(_indent(episode.task).rstrip("\n"))
    if episode.initial_observation is not None:
        head.append("  initial observation:")
        head.append(_indent(episode.initial_observation.text).rstrip("\n"))
    body = [format_turn(turn) for turn in episode.turns]
    tail = [f"  [{e.role}] {e.content}" for e in episode.final_context]
    return "\n".join(head) + "\n" + "".join(body) + ("\n".join(tail) + "\n" if tail else "")


def run_schema(args: argparse.Namespace) -> int:
    schema = episode_json_schema()
    if args.out:
        with user_path(args.out, "--out"):
            atomic_write_json(args.out, schema)
    else:
        emit_json(schema)
    return EXIT_OK


def run_formats(args: argparse.Namespace) -> int:
    formats = [{"name": name, "description": importer.description} for name, importer in sorted(IMPORTERS.items())]
    if getattr(args, "json", False):
        emit_json({"formats": formats})
    else:
        for item in formats:
            print(f"{item['name']:<16} {item['description']}")
    return EXIT_OK


def run_datasets(args: argparse.Namespace) -> int:
    workspace = workspace_from(args)
    stats = [workspace.dataset(name).stats() for name in workspace.list_datasets()]
    if getattr(args, "json", False):
        emit_json({"workspace": str(workspace.root), "datasets": stats})
    else:
        if not stats:
            print(f"no datasets in {workspace.root}")
        for item in stats:
            dialogue = f" ({item['dialogue_only']} dialogue only)" if item["dialogue_only"] else ""
            outcome = (f"; {item['successes']} successes" + (f" of {item['with_outcome']} recorded"
                                                              if item["with_outcome"] != item["episodes"] else "")
                       if item["with_outcome"] else "; no outcome recorded")
            print(f"{item['name']:<24} {item['episodes']:>8} episodes {item['turns']:>10} turns{dialogue}{outcome}")
    return EXIT_OK
