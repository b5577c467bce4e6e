"""`worldsmith side-by-side BOOK --dataset D --episode ID`: world models stepped through a real episode.

Each recorded step shows the real observation and every method's prediction with its score
(exact, token F1, edit similarity); `--action` adds typed steps after the recorded ones (they
have no real observation). The same `sim.SideBySide` as the Simulate page's side-by-side view: a
method whose model failed is marked `fallback` (not scored as the method), and an episode in the
book's evidence is named as leaked (its own turns are left out of what the methods retrieve).
"""

from __future__ import annotations

import argparse
from typing import Any

from worldsmith.cli.common import EXIT_OK, CommandError, add_common, emit_json, workspace_from
from worldsmith.llm import LLMError, default_model_spec, open_llm, resolve_spec
from worldsmith.sim.registry import canonical_world_model, needs_llm, world_model_names
from worldsmith.sim.sidebyside import SideBySide, StepView, default_methods
from worldsmith.worldbook import WorldbookStore

__all__ = ["register", "run_side_by_side"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("side-by-side", help="step world models through a recorded episode beside the "
                                   "real observations, with per-step scores")
    parser.add_argument("book", help="worldbook name in the workspace")
    parser.add_argument("--version", help="worldbook version (default: HEAD)")
    parser.add_argument("--dataset", required=True, help="dataset holding the episode")
    parser.add_argument("--episode", required=True, help="episode id")
    parser.add_argument("--methods", help="comma-separated world models (default: harness,direct with a model, "
                        "else harness,nearest); choose from " + ", ".join(world_model_names()))
    parser.add_argument("--mode", choices=["teacher", "open_loop"], default="teacher",
                        help="teacher: each step from the real prefix; open_loop: each method from its own predictions")
    parser.add_argument("--llm", metavar="SPEC", help="model spec or models.toml name for direct|rag|worldbook-prompt "
                        "(default: the default model)")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--steps", type=int, help="recorded steps to take (default: all)")
    parser.add_argument("--action", action="append", default=[], metavar="ACTION",
                        help="a typed action after the recorded steps (repeatable)")
    parser.add_argument("--states", action="store_true", help="with --json: each method's state before and after")
    add_common(parser)
    parser.set_defaults(handler=run_side_by_side)


def _step_json(view: StepView, states: bool) -> dict[str, Any]:
    exclude = None if states else {"methods": {"__all__": {"state_before", "state_after"}}}
    return view.model_dump(mode="json", exclude=exclude)


def _print_step(view: StepView) -> None:
    print(f"step {view.index} > {view.action_text}" + ("" if view.recorded else "  (typed)"))
    if view.real is not None:
        print(f"  real: {view.real}")
    for name, step in view.methods.items():
        if step.error is not None:
            print(f"  {name}: error: {step.error}")
            continue
        if step.status == "fallback":
            fell = step.fallback_score
            scored = f" [fallback's F1 {fell.f1:.2f}, not scored as {name}]" if fell is not None else ""
            print(f"  {name}: FALLBACK ({step.fallback_reason}){scored}: {step.observation}")
            continue
        scored = f" [exact {step.score.exact:.0f} F1 {step.score.f1:.2f} edit {step.score.edit:.2f}]" \
            if step.score is not None else ""
        route = step.audit.route if step.audit is not None else ""
        print(f"  {name}{scored} ({route}): {step.observation}")
        for change in step.changes:
            print(f"    state {change.path}: {change.before!r} -> {change.after!r}")


def run_side_by_side(args: argparse.Namespace) -> int:
    workspace = workspace_from(args)
    store = WorldbookStore.of_workspace(workspace)
    version = args.version or store.head(args.book)
    book = store.load(args.book, version)
    try:
        episode = workspace.dataset(args.dataset).episode(args.episode)
    except KeyError as error:
        raise CommandError(str(error.args[0] if error.args else error)) from None
    spec = args.llm or default_model_spec()
    methods = [canonical_world_model(m.strip()) for m in args.methods.split(",") if m.strip()] if args.methods \
        else default_methods(spec)
    known = world_model_names()
    unknown = [m for m in methods if m not in known]
    if unknown:
        raise CommandError(f"unknown world model(s) {', '.join(unknown)}: choose from {', '.join(known)}")
    llm = None
    if any(needs_llm(m) for m in methods):
        if spec is None:
            raise CommandError(f"{', '.join(m for m in methods if needs_llm(m))} need a model: pass --llm SPEC or "
                               "set WORLDSMITH_MODEL")
        spec = resolve_spec(spec, workspace.root)
        try:
            llm = open_llm(spec, workspace.root, component="side-by-side")
        except LLMError as error:
            raise CommandError(f"cannot open model {spec!r}: {error}") from None
    runner = SideBySide.from_kinds(book, methods, llm=llm, episode=episode, mode=args.mode,
                                   max_tokens=args.max_tokens)
    try:
        views = runner.run(max_steps=args.steps if args.steps is not None else len(episode.turns))
        views += [runner.step(action) for action in args.action]
    finally:
        if llm is not None:
            llm.close()
    if getattr(args, "json", False):
        emit_json({"book": args.book, "version": version, "dataset": args.dataset, "episode": episode.id,
                   "mode": args.mode, "methods": methods, "steps": [_step_json(v, args.states) for v in views],
                   "summary": runner.summary(), "leaked": runner.leaked, "leak_notice": runner.leak_notice(),
                   "excluded_evidence": runner.excluded_evidence,
                   "leakage": runner.leakage.to_json() if runner.leakage else None})
        return EXIT_OK
    notice = runner.leak_notice()
    if notice:
        print(f"LEAKED: {notice}")
    for view in views:
        _print_step(view)
    print("mean over scored steps:")
    for name, values in runner.summary().items():
        fallbacks = f", {int(values['fallbacks'])} fallback steps not scored" if values["fallbacks"] else ""
        print(f"  {name}: {int(values['steps'])} steps, exact {values['exact']:.2f}, F1 {values['f1']:.2f}, "
              f"edit {values['edit']:.2f}{fallbacks}" + (" (leaked)" if runner.leaked else ""))
    return EXIT_OK
