"""`worldsmith llm models|chat|runs|calls|train-tiny`: the model layer from the command line."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from worldsmith.cli.common import EXIT_OK, CommandError, add_common, emit_json, workspace_from
from worldsmith.llm import CallLog, LLMError, configured_models, default_model_spec
from worldsmith.llm.catalog import backend_rows, call_log_path, call_prompt, chat_once, model_rows


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("llm", help="model backends: list, chat, call log, train the tiny model")
    actions = parser.add_subparsers(dest="llm_command", required=True, metavar="ACTION")

    models = actions.add_parser("models", help="backends that can run here and the configured models")
    add_common(models)
    models.set_defaults(handler=run_models)

    chat = actions.add_parser("chat", help="send one prompt (cached and logged like every call)")
    chat.add_argument("prompt")
    chat.add_argument("--model", help="model spec or a name from <workspace>/models.toml (default: the tiny model)")
    chat.add_argument("--system", help="system message")
    chat.add_argument("--max-tokens", type=int, default=128)
    chat.add_argument("--temperature", type=float, default=0.0)
    chat.add_argument("--top-p", type=float, default=1.0)
    chat.add_argument("--seed", type=int)
    chat.add_argument("--n", type=int, default=1)
    chat.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    chat.add_argument("--no-cache", action="store_true", help="always call the model")
    chat.add_argument("--run", help="run id for the call log (default: a new one)")
    chat.add_argument("--component", default="cli")
    add_common(chat)
    chat.set_defaults(handler=run_chat)

    runs = actions.add_parser("runs", help="per-run call counts, tokens, latency and cost")
    add_common(runs)
    runs.set_defaults(handler=run_runs)

    calls = actions.add_parser("calls", help="the call log (newest first)")
    calls.add_argument("--run")
    calls.add_argument("--component")
    calls.add_argument("--search", help="full-text search in prompts and outputs")
    calls.add_argument("--limit", type=int, default=20)
    add_common(calls)
    calls.set_defaults(handler=run_calls)

    train = actions.add_parser(
        "train-tiny", help="train the small default model on a dataset's traces (CPU)",
        description="Train the tiny model on a workspace dataset (one split of it with --split). Trained on a "
                    "dataset's train split into <workspace>/models/tiny-<dataset> (the default --out with --split), "
                    "it is the default model of that dataset's model-backed methods in `worldsmith eval`.")
    train.add_argument("--dataset", required=True)
    train.add_argument("--split", help="only this split's episodes (e.g. train); default: every episode")
    train.add_argument("--out", type=Path, help="output folder (Hugging Face format); default with --split: "
                                                "<workspace>/models/tiny-<dataset>")
    train.add_argument("--steps", type=int, help="optimizer steps (default: the TinyConfig default)")
    train.add_argument("--seq-len", type=int, help="tokens per training row (default: the TinyConfig default)")
    train.add_argument("--roles", type=lambda text: tuple(part.strip() for part in text.split(",") if part.strip()),
                       help="agent,environment (default both); environment alone for a simulator baseline's model")
    train.add_argument("--max-minutes", type=float, help="stop training after this many minutes")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--progress-file", type=Path, help="append one JSON line per step here (for a watcher)")
    add_common(train)
    train.set_defaults(handler=run_train_tiny)


def _resolve_model(name: str | None, workspace_root: Path) -> str:
    models = configured_models(workspace_root)
    if name is None:
        default = default_model_spec()
        if default is None:
            raise CommandError("no default model: pass --model SPEC (e.g. openai:MODEL@URL) or set WORLDSMITH_MODEL")
        return default
    if name in models:
        return models[name].text
    if ":" not in name:
        known = ", ".join(sorted(models)) or "none"
        raise CommandError(f"no model named {name!r} in {workspace_root / 'models.toml'} (configured: {known})")
    return name


def run_models(args: argparse.Namespace) -> int:
    workspace = workspace_from(args)
    listed = sorted(backend_rows(), key=lambda row: row["kind"])
    configured = configured_models(workspace.root)
    if getattr(args, "json", False):
        emit_json({"backends": listed, "models": {name: spec.text for name, spec in configured.items()},
                   "configured": model_rows(configured)})
    else:
        for backend in listed:
            state = "ready" if backend["available"] else f"needs the {backend['package']} package"
            print(f"{backend['kind']:<8} {state}")
        for name, spec in configured.items():
            print(f"model {name}: {spec.text}")
    return EXIT_OK


def run_chat(args: argparse.Namespace) -> int:
    workspace = workspace_from(args)
    spec = _resolve_model(args.model, workspace.root)
    try:
        reply = chat_once(spec, workspace.root, args.prompt, system=args.system, component=args.component,
                          run=args.run, cache=not args.no_cache, max_tokens=args.max_tokens,
                          temperature=args.temperature, top_p=args.top_p, seed=args.seed, n=args.n, stop=args.stop)
    except LLMError as error:
        raise CommandError(f"{type(error).__name__}: {error}") from None
    if getattr(args, "json", False):
        emit_json({"model": spec, "run": reply.run, "model_calls": reply.model_calls,
                   "completions": [c.to_json() for c in reply.completions]})
    else:
        for completion in reply.completions:
            print(completion.text)
            source = "cache" if completion.cached else f"{completion.latency_s:.2f}s"
            print(f"[{completion.prompt_tokens} prompt + {completion.completion_tokens} completion tokens, "
                  f"{completion.cached_tokens} cached; {source}; finish {completion.finish_reason}]", file=sys.stderr)
    return EXIT_OK


def _log(args: argparse.Namespace) -> CallLog:
    return CallLog(call_log_path(workspace_from(args).root))


def run_runs(args: argparse.Namespace) -> int:
    runs = _log(args).runs()
    if getattr(args, "json", False):
        emit_json({"runs": runs})
    else:
        for run in runs:
            when = datetime.fromtimestamp(run["last"], UTC).strftime("%Y-%m-%d %H:%M")
            print(f"{run['run']}  {when}  {run['calls']} calls ({run['cache_hits']} cached, {run['errors']} errors), "
                  f"{run['prompt_tokens']}+{run['completion_tokens']} tokens, {run['latency_s']:.1f}s, "
                  f"${run['cost_usd']:.4f}")
    return EXIT_OK


def run_calls(args: argparse.Namespace) -> int:
    calls = _log(args).calls(run=args.run, component=args.component, search=args.search, limit=args.limit)
    if getattr(args, "json", False):
        emit_json({"calls": [vars(call) for call in calls]})
    else:
        for call in calls:
            prompt = call_prompt(call)
            answer = call.error or call.output_text
            print(f"#{call.id} [{call.run} / {call.component}] {call.spec}"
                  f"{' (cache)' if call.from_cache else ''}\n  > {prompt[:200]!r}\n  < {answer[:200]!r}")
    return EXIT_OK


def run_train_tiny(args: argparse.Namespace) -> int:
    from worldsmith.llm.indomain import progress_writer, train_on_split
    from worldsmith.llm.tiny import TinyConfig, TrainProgress

    workspace = workspace_from(args)
    if args.out is None and args.split is None:
        raise CommandError("pass --out DIR, or --split SPLIT to train the dataset's own model into "
                           f"{workspace.root / 'models'}/tiny-{args.dataset}", code=2)
    overrides: dict[str, Any] = {"seed": args.seed}
    for key, value in (("steps", args.steps), ("max_minutes", args.max_minutes), ("seq_len", args.seq_len),
                       ("roles", args.roles)):
        if value is not None:
            overrides[key] = value
    config = TinyConfig(**overrides)
    tty = sys.stderr.isatty() and not getattr(args, "json", False)
    record = progress_writer(args.progress_file) if args.progress_file is not None else None

    def progress(update: TrainProgress) -> None:
        if record is not None:
            record(update)
        if tty:
            sys.stderr.write(f"\r{update}   ")
            sys.stderr.flush()
        elif update.step == 1 or update.step % 10 == 0 or update.step == update.steps:
            print(update, file=sys.stderr, flush=True)

    report = train_on_split(workspace.root, args.dataset, args.split, args.out, config=config, progress=progress)
    if tty:
        sys.stderr.write("\n")
    summary = report.to_json()
    if getattr(args, "json", False):
        emit_json(summary)
    else:
        print(f"tiny model written to {report.out_dir}: {summary}")
        print(f"use it as: tiny:{report.out_dir}")
    return EXIT_OK
