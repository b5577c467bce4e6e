"""`worldsmith book list|show|rules|tools|rule|history|diff|patch|undo|export|import|search`: read and curate worldbooks."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from worldsmith.cli.book_propose import register_propose
from worldsmith.cli.common import EXIT_OK, CommandError, add_common, emit_json, workspace_from
from worldsmith.cli.heldout import add_against, against_from, delta_after_patch, delta_json, print_delta
from worldsmith.util.errors import user_path
from worldsmith.util.paths import read_user_bytes
from worldsmith.worldbook import (
    TOOL_RULE_KINDS,
    Patch,
    PatchOp,
    RuleStatus,
    WorldbookStore,
    diff_worldbooks,
    evidence_regressions,
    template_changes,
)
from worldsmith.worldbook.index import SEARCH_KINDS, WorldbookIndex, index_folder
from worldsmith.worldbook.interop import export_version, import_into_store


def store_from(args: argparse.Namespace) -> WorldbookStore:
    return WorldbookStore.of_workspace(workspace_from(args))


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("book", help="read and curate worldbooks (versions, rules, patches, diffs)")
    actions = parser.add_subparsers(dest="book_command", required=True, metavar="ACTION")

    listing = actions.add_parser("list", help="worldbooks in the workspace")
    add_common(listing)
    listing.set_defaults(handler=run_list)

    show = actions.add_parser("show", help="a worldbook's summary")
    show.add_argument("book")
    show.add_argument("--version")
    add_common(show)
    show.set_defaults(handler=run_show)

    match = actions.add_parser(
        "match", help="which of a dataset's environments the worldbook simulates, by the actions they share",
        description="Compare the actions the worldbook knows with each environment of a dataset: the share of its "
                    "turns whose action the book knows. When none has the book's environment id, say which one is "
                    "the same API and how to relabel it (exit 1), or that none is.")
    match.add_argument("book")
    match.add_argument("--dataset", required=True)
    match.add_argument("--version")
    add_common(match)
    match.set_defaults(handler=run_match)

    rules = actions.add_parser("rules", help="every rule with its status and provenance")
    rules.add_argument("book")
    rules.add_argument("--version")
    rules.add_argument("--status", choices=[s.value for s in RuleStatus])
    rules.add_argument("--action")
    add_common(rules)
    rules.set_defaults(handler=run_rules)

    tools = actions.add_parser("tools", help="tool-API rules (writes, queries, ...) with status and provenance")
    tools.add_argument("book")
    tools.add_argument("--version")
    tools.add_argument("--kind", choices=list(TOOL_RULE_KINDS))
    tools.add_argument("--status", choices=[s.value for s in RuleStatus])
    tools.add_argument("--tool", help="only this tool's rules")
    add_common(tools)
    tools.set_defaults(handler=run_tools)

    routes = actions.add_parser("routes", help="which answer source beat nearest evidence per action, held out")
    routes.add_argument("book")
    routes.add_argument("--version")
    routes.add_argument("--action")
    add_common(routes)
    routes.set_defaults(handler=run_routes)

    rule = actions.add_parser("rule", help="one rule in full")
    rule.add_argument("book")
    rule.add_argument("rule_id", metavar="ID")
    rule.add_argument("--version")
    add_common(rule)
    rule.set_defaults(handler=run_rule)

    history = actions.add_parser("history", help="the versions from HEAD back to the first")
    history.add_argument("book")
    add_common(history)
    history.set_defaults(handler=run_history)

    diff = actions.add_parser("diff", help="rule-level differences between two versions")
    diff.add_argument("book")
    diff.add_argument("old", help="version id")
    diff.add_argument("new", nargs="?", help="version id (default: HEAD)")
    diff.add_argument("--words", action="store_true", help="also the changed templates word by word")
    add_common(diff)
    diff.set_defaults(handler=run_diff)

    patch = actions.add_parser("patch", help="apply a patch (JSON) or set a rule's status; makes a new version")
    patch.add_argument("book")
    patch.add_argument("--file", type=Path, help='JSON: {"base": VERSION, "ops": [...], "author", "message"}')
    patch.add_argument("--rule", help="with --status: the rule to change")
    patch.add_argument("--tool-rule", help="with --status: the tool rule to change (`worldsmith book tools`)")
    patch.add_argument("--status", choices=[s.value for s in RuleStatus])
    patch.add_argument("--base", help="the version the change is made against (default: HEAD)")
    patch.add_argument("--author", default="cli")
    patch.add_argument("--message", default="")
    patch.add_argument("--reason", help="with --status: why (kept in the version's message)")
    patch.add_argument("--force", action="store_true",
                       help="save even when a supported rule would fail its own evidence")
    add_against(patch)
    add_common(patch)
    patch.set_defaults(handler=run_patch)

    undo = actions.add_parser("undo", help="a new version equal to HEAD's parent")
    undo.add_argument("book")
    undo.add_argument("--author", default="cli")
    add_common(undo)
    undo.set_defaults(handler=run_undo)

    export = actions.add_parser("export", help="write a version as a Trace2Env package (a folder)")
    export.add_argument("book")
    export.add_argument("out_dir", type=Path, metavar="OUT_DIR")
    export.add_argument("--version", help="default: HEAD")
    export.add_argument("--overwrite", action="store_true", help="replace a non-empty OUT_DIR")
    add_common(export)
    export.set_defaults(handler=run_export)

    imported = actions.add_parser("import", help="read a Trace2Env package and save it as a new version")
    imported.add_argument("package", type=Path, metavar="PACKAGE_DIR")
    imported.add_argument("--name", help="the worldbook's name (default: the package manifest's, else its folder's)")
    imported.add_argument("--author", default="cli")
    add_common(imported)
    imported.set_defaults(handler=run_import)

    search = actions.add_parser("search", help="find rules, notes, demonstrations and evidence by words or meaning")
    search.add_argument("book")
    search.add_argument("query")
    search.add_argument("--k", type=int, default=10, help="how many hits (default 10)")
    search.add_argument("--mode", choices=["hybrid", "lexical", "dense"], default="hybrid")
    search.add_argument("--kind", action="append", choices=list(SEARCH_KINDS), help="only these kinds (repeatable)")
    search.add_argument("--action", help="only items of this action (notes have none)")
    search.add_argument("--version", help="default: HEAD")
    add_common(search)
    search.set_defaults(handler=run_search)
    _register_validate(actions)
    register_propose(actions)


def _register_validate(actions: argparse._SubParsersAction) -> None:
    check = actions.add_parser(
        "validate", help="replay a version's rules over a dataset's trajectories; check its provenance",
        description="Replay the supported rules over held-out trajectories with their observed prefixes (per-action "
                    "coverage and exact match), check that every provenance turn id resolves to a real turn of the "
                    "source dataset, and report leakage (`eval`'s rule: the trajectories, their turns or "
                    "verbatim copies inside the book's evidence).")
    check.add_argument("book")
    check.add_argument("--dataset", required=True, help="the trajectories to replay")
    check.add_argument("--split")
    check.add_argument("--version", help="default: HEAD")
    add_common(check)
    check.set_defaults(handler=run_validate)


def _json(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "json", False))


def run_list(args: argparse.Namespace) -> int:
    store = store_from(args)
    rows = [{"name": name, "head": store.head(name)} for name in store.names()]
    if _json(args):
        emit_json({"worldbooks": rows})
    else:
        for row in rows:
            print(f"{row['name']}  {row['head']}")
    return EXIT_OK


def run_match(args: argparse.Namespace) -> int:
    from worldsmith.evals.envmatch import match_dataset

    store = store_from(args)
    book = store.load(args.book, args.version or store.head(args.book))
    matched = match_dataset(book, workspace_from(args).dataset(args.dataset))
    problem = matched.problem()
    if _json(args):
        emit_json({**matched.model_dump(mode="json"), "suggested_env": matched.suggested_env, "problem": problem})
    else:
        print(f"{book.name} simulates {book.env_id or 'any environment'} ({len(matched.book_actions)} actions); "
              f"dataset {args.dataset}:")
        for fit in matched.environments:
            own = " (the book's)" if fit in matched.own and book.env_id else ""
            print(f"  {fit.label:<48} {fit.episodes:>6} episodes  {fit.share:>4.0%} of turns known{own}"
                  + (f"; new actions: {', '.join(fit.unknown[:6])}" if fit.unknown else ""))
        if problem:
            print(problem)
    return EXIT_OK if problem is None else 1


def run_show(args: argparse.Namespace) -> int:
    store = store_from(args)
    version = args.version or store.head(args.book)
    book, info = store.load(args.book, version), store.info(args.book, version)
    counts = {status.value: sum(r.status == status for r in book.rules) for status in RuleStatus}
    summary: dict[str, Any] = {
        "name": book.name, "env_id": book.env_id, "version": version, "parent": info.parent, "created": info.created,
        "author": info.author, "message": info.message, "rules": counts, "actions": len(book.action_schema.actions),
        "state_paths": len(book.state_schema.paths), "notes": len(book.notes), "evidence": len(book.evidence),
        "demonstrations": len(book.demonstrations), "tool_rules": len(book.tool_rules),
        "validation": info.validation, "sources": info.sources,
        "termination": [{"kind": f.kind, "value": f.value, "precision": f.precision, "support": f.support}
                        for f in book.termination.features] if book.termination else None,
    }
    if _json(args):
        emit_json(summary)
    else:
        print(f"{book.name} ({book.env_id or 'no env id'}) version {version} (parent {info.parent})")
        print(f"rules: {counts}; {summary['actions']} actions, {summary['state_paths']} state paths, "
              f"{summary['notes']} notes, {summary['evidence']} evidence transitions")
        ends = "; ".join(f"{f['kind']} {f['value']!r} (precision {f['precision']:.2f}, {f['support']} done turns)"
                         for f in summary["termination"] or [])
        print(f"episodes end on: {ends or 'nothing learned'}")
    return EXIT_OK


def run_rules(args: argparse.Namespace) -> int:
    book = store_from(args).load(args.book, args.version)
    rules = [r for r in book.rules if (args.status is None or r.status == args.status)
             and (args.action is None or r.action == args.action)]
    if _json(args):
        emit_json({"book": book.name, "rules": [r.model_dump(mode="json") for r in rules]})
    else:
        for r in rules:
            print(f"{r.id:<32} {r.status.value:<10} {r.action:<16} support {r.support:<4} "
                  f"conf {r.confidence:.2f}  {r.template[:60]!r}")
    return EXIT_OK


def run_tools(args: argparse.Namespace) -> int:
    book = store_from(args).load(args.book, args.version)
    rules = [r for r in book.tool_rules if (args.kind is None or r.kind == args.kind)
             and (args.status is None or r.status == args.status) and (args.tool is None or r.tool == args.tool)]
    if _json(args):
        emit_json({"book": book.name, "tool_rules": [r.model_dump(mode="json") for r in rules]})
        return EXIT_OK
    if not rules:
        print(f"{book.name}: no tool rules" + (" of that kind" if args.kind or args.status or args.tool else ""))
    for r in rules:
        selector = f"{r.selector.argument}->{r.selector.key}" if r.selector else "-"
        answer = r.response.kind if r.response else "-"
        print(f"{r.id:<32} {r.kind:<12} {r.status.value:<10} support {r.support:<4} select {selector:<24} "
              f"answers {answer}  turns {', '.join(r.provenance.supporting[:3]) or '-'}")
        if r.kind not in ("write", "effect"):  # a look-up: what it tests or matches, and the text it answers with
            print(f"    {r.description}" + (f"  -> {r.template!r}" if r.template else ""))
        for change in r.changes:
            operand = change.argument or change.source or ("" if change.value is None else repr(change.value))
            print(f"    {change.path:<24} {change.op:<10} {str(operand)[:40]:<40} {change.status.value:<10} "
                  f"{change.support}/{change.checked}")
    return EXIT_OK


def run_routes(args: argparse.Namespace) -> int:
    book = store_from(args).load(args.book, args.version)
    table = book.routes
    rows = table.rows(args.action) if table is not None else []
    if _json(args):
        emit_json({"book": book.name, "folds": table.folds if table else 0, "turns": table.turns if table else 0,
                   "routes": rows})
    elif table is None:
        print(f"{book.name} has no route table (built without the routes stage): rules answer first, then memory, "
              "then nearest evidence")
    else:
        print(f"{book.name}: {table.turns} held-out turns, {table.measured_by}")
        for row in rows:
            mark = "trusted" if row["trusted"] else "nearest instead"
            print(f"{row['action']:<20} {row['source']:<18} exact {row['exact']:>4}/{row['proposed']:<4} "
                  f"won {row['wins']:>3} lost {row['losses']:>3}  {mark}")
    return EXIT_OK


def run_rule(args: argparse.Namespace) -> int:
    book = store_from(args).load(args.book, args.version)
    try:
        rule = book.rule(args.rule_id)
    except KeyError as error:
        raise CommandError(str(error.args[0])) from None
    if _json(args):
        emit_json(rule.model_dump(mode="json"))
    else:
        print(orjson.dumps(rule.model_dump(mode="json"), option=orjson.OPT_INDENT_2).decode())
    return EXIT_OK


def run_history(args: argparse.Namespace) -> int:
    chain = store_from(args).history(args.book)
    if _json(args):
        emit_json({"versions": [info.model_dump(mode="json", exclude={"hashes"}) for info in chain]})
    else:
        for info in chain:
            print(f"{info.version}  {info.created}  {info.author}: {info.message or '(no message)'}")
    return EXIT_OK


def run_diff(args: argparse.Namespace) -> int:
    store = store_from(args)
    old, new = store.load(args.book, args.old), store.load(args.book, args.new)
    difference = diff_worldbooks(old, new)
    changes = template_changes(old, new) if args.words else []
    if args.words:
        difference = {**difference, "templates": [{"rule": c.rule_id, "action": c.action, "kind": c.kind,
                                                   "segments": [s.model_dump() for s in c.segments]}
                                                  for c in changes]}
    if _json(args):
        emit_json(difference)
    else:
        for kind in ("rules", "notes", "tool_rules"):
            part = difference[kind]
            for item in part["added"]:
                print(f"+ {kind[:-1]} {item}")
            for item in part["removed"]:
                print(f"- {kind[:-1]} {item}")
            for item, fields in part["changed"].items():
                for field, change in fields.items():
                    print(f"~ {kind[:-1]} {item}.{field}: {change['before']!r} -> {change['after']!r}")
        for section in difference.get("sections_changed", []):
            print(f"~ {section}")
        for change in changes:
            print(f"template {change.rule_id} ({change.kind}): {change.text()}")
    return EXIT_OK


def _patch_from(args: argparse.Namespace, store: WorldbookStore) -> Patch:
    if args.file:
        try:
            data: dict[str, Any] = orjson.loads(read_user_bytes(args.file, "--file"))
            return Patch.model_validate({"base": store.head(args.book), "author": args.author, **data})
        except orjson.JSONDecodeError as error:
            raise CommandError(f"{args.file}: not JSON: {error}") from None
        except ValidationError as error:
            raise CommandError(f"{args.file}: {error}") from None
    target = args.rule or args.tool_rule
    if not (target and args.status) or (args.rule and args.tool_rule):
        raise CommandError("give --file PATCH.json, or --rule ID --status STATUS, or --tool-rule ID --status STATUS")
    return Patch(base=args.base or store.head(args.book), author=args.author,
                 message=args.message or f"{target}: {args.status}" + (f": {args.reason.strip()}" if args.reason else ""),
                 ops=[PatchOp(op="update_rule" if args.rule else "update_tool_rule", id=target,
                              fields={"status": args.status})])


def run_patch(args: argparse.Namespace) -> int:
    store = store_from(args)
    workspace = workspace_from(args)
    patch = _patch_from(args, store)  # a WorldbookError (bad op, conflict, no book): one line, its kind's code
    base = store.load(args.book, patch.base)
    heldout = against_from(args, store, workspace, base)
    regressions = evidence_regressions(base, patch.ops)
    if regressions and not args.force:
        raise CommandError("not saved: a supported rule would fail its own evidence: "
                           + "; ".join(r.summary() for r in regressions) + " (--force saves anyway)")
    if regressions:
        patch = patch.model_copy(update={"message": patch.message + " (saved despite: "
                                         + "; ".join(r.summary() for r in regressions) + ")"})
    info = store.patch(args.book, patch)
    delta = None if heldout is None or info.parent is None else \
        delta_after_patch(store, workspace, args.book, info.parent, info.version, heldout)
    if _json(args):
        emit_json({"book": args.book, "version": info.version, "parent": info.parent,
                   **({"heldout_delta": delta_json(delta)} if delta is not None else {})})
    else:
        print(f"{args.book}: new version {info.version} (parent {info.parent})")
        if delta is not None:
            print_delta(delta)
    return EXIT_OK


def run_undo(args: argparse.Namespace) -> int:
    info = store_from(args).undo(args.book, author=args.author)
    if _json(args):
        emit_json({"book": args.book, "version": info.version, "parent": info.parent})
    else:
        print(f"{args.book}: new version {info.version} ({info.message})")
    return EXIT_OK


def run_export(args: argparse.Namespace) -> int:
    store = store_from(args)
    version = args.version or store.head(args.book)
    book = store.load(args.book, version)
    with user_path(args.out_dir, "OUT_DIR"):
        out = export_version(store, args.book, args.out_dir, version=version, overwrite=args.overwrite)
    if _json(args):
        emit_json({"book": args.book, "version": version, "path": str(out), "rules": len(book.rules),
                   "notes": len(book.notes), "evidence": len(book.evidence)})
    else:
        print(f"{args.book} {version}: Trace2Env package in {out}")
    return EXIT_OK


def run_import(args: argparse.Namespace) -> int:
    book, info, ignored = import_into_store(store_from(args), args.package, name=args.name, author=args.author)
    if _json(args):
        emit_json({"book": book.name, "version": info.version, "parent": info.parent, "rules": len(book.rules),
                   "ignored": ignored})
    else:
        print(f"{book.name}: new version {info.version} (parent {info.parent}), {len(book.rules)} rules")
        for field in ignored:
            print(f"  ignored {field}")
    return EXIT_OK


def run_search(args: argparse.Namespace) -> int:
    store = store_from(args)
    version = args.version or store.head(args.book)
    book = store.load(args.book, version)
    index = WorldbookIndex.open(book, index_folder(store.root, args.book, version), dense=args.mode != "lexical")
    hits = index.search(args.query, args.k, kinds=args.kind, mode=args.mode, action=args.action)
    if _json(args):
        emit_json({"book": args.book, "version": version, "query": args.query, "mode": args.mode,
                   "hits": [{"kind": h.kind, "id": h.id, "score": h.score, "text": h.text} for h in hits]})
    else:
        for hit in hits:
            print(f"{hit.score:8.4f}  {hit.kind:<13} {hit.id}  {hit.text[:100]!r}")
    return EXIT_OK


def run_validate(args: argparse.Namespace) -> int:
    from worldsmith.cli.build import print_validation
    from worldsmith.worldbook.build import validate
    from worldsmith.worldbook.leakage import check_leakage

    workspace = workspace_from(args)
    store = WorldbookStore.of_workspace(workspace)
    version = args.version or store.head(args.book)
    book, info = store.load(args.book, version), store.info(args.book, version)
    episodes = list(workspace.dataset(args.dataset).iter_episodes(args.split))
    if not episodes:
        raise CommandError(f"dataset {args.dataset!r} has no episodes" + (f" in split {args.split!r}" if args.split
                                                                          else ""))
    leakage = check_leakage(book, episodes, raise_on_leak=False)  # eval's rule: ids, target turns and copies
    source = next((s.get("dataset") for s in info.sources if isinstance(s, dict) and s.get("dataset")), None)
    provenance: dict[str, Any] = {"source_dataset": source, "checked": 0, "missing": []}
    if source and source in workspace.list_datasets():
        dataset = workspace.dataset(source)
        turns = sorted({t for rule in book.rules for t in [*rule.provenance.supporting, *rule.provenance.contradicting]})
        provenance["checked"] = len(turns)
        provenance["missing"] = [t for t in turns if not dataset.has_turn(t)][:50]
    report = validate(book, episodes).to_json()
    out = {"book": args.book, "version": version, "dataset": args.dataset, "split": args.split,
           "episodes": len(episodes), "leakage": leakage.to_json(),
           "provenance": provenance, **report}
    if _json(args):
        emit_json(out)
        return EXIT_OK
    print(f"{args.book} {version} on {args.dataset}{'/' + args.split if args.split else ''}: {len(episodes)} trajectories")
    if not leakage.ok:
        print(f"warning: {len(leakage.leaked_episodes)} of these trajectories are in the worldbook's own evidence "
              "(not held out)")
    if provenance["checked"]:
        print(f"provenance: {provenance['checked']} turn ids checked in {source}, "
              f"{len(provenance['missing'])} missing")
    print_validation(report)
    return EXIT_OK
