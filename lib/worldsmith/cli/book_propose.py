"""`worldsmith book propose BOOK --rule ID`: patches that fix a rule's failed turns, with their held-out effect."""

from __future__ import annotations

import argparse
import time

import orjson

from worldsmith.cli.common import EXIT_OK, CommandError, add_common, emit_json, workspace_from
from worldsmith.evals.proposal_effects import ProposalReport, fidelity_line, propose_with_effect
from worldsmith.util.progress import Progress
from worldsmith.worldbook import WorldbookError, WorldbookStore


def register_propose(actions: argparse._SubParsersAction) -> None:
    propose = actions.add_parser(
        "propose", help="patches that fix a rule's failed turns, each with its held-out effect",
        description="Learn a condition, a template or a split of the rule from the turns it matches and fails, "
                    "keep only what replay shows fixes failed turns without breaking others, and show each with "
                    "its effect on the held-out turns of the rule's action. --apply N applies one as a patch.")
    propose.add_argument("book")
    propose.add_argument("--rule", required=True, help="the rule's id")
    propose.add_argument("--against", metavar="SPLIT", help="held-out split of the source dataset (default: the "
                         "book's validation split)")
    propose.add_argument("--version", help="default: HEAD")
    propose.add_argument("--apply", type=int, metavar="N", help="apply proposal N (1-based): a new version")
    propose.add_argument("--author", default="cli")
    propose.add_argument("--progress", metavar="FILE",
                         help="append each step to FILE as a JSON line (what a background proposal job's page reads; "
                              "`worldsmith.evals.proposal_jobs` starts such jobs)")
    add_common(propose)
    propose.set_defaults(handler=run_propose)


def _progress(path: str | None) -> Progress | None:
    """Each step appended to `path` as one whole JSON line (a reader never sees half of one)."""
    if path is None:
        return None

    def step(done: int, total: int, what: str) -> None:
        with open(path, "ab") as out:
            out.write(orjson.dumps({"done": done, "total": total, "what": what, "t": time.time()}) + b"\n")
    return step


def _print(report: ProposalReport) -> None:
    print(f"{report.book} {report.version}: rule {report.rule_id} ({report.action}): "
          f"{len(report.proposals)} proposal(s)")
    if report.heldout_note:
        print(f"  {report.heldout_note}")
    deltas = report.deltas or [None] * len(report.proposals)
    for index, (proposal, effect, delta) in enumerate(zip(report.proposals, report.effects, deltas, strict=True),
                                                      start=1):
        print(f"[{index}] {proposal.kind}: {proposal.explanation}")
        print(f"    own evidence: fixes {len(proposal.fixes)} failed turn(s); failed {proposal.failed_before} -> "
              f"{proposal.failed_after}, matched {proposal.matched_before} -> {proposal.matched_after}")
        if effect is not None:
            print(f"    held-out ({report.split}, {effect.turns} '{effect.action}' turns): exact "
                  f"{effect.exact_before} -> {effect.exact_after}, template fits {effect.fits_before} -> "
                  f"{effect.fits_after}")
            print(f"    {fidelity_line(delta, report.action)}")
        for line in proposal.diff:
            print(f"    {line}")


def run_propose(args: argparse.Namespace) -> int:
    workspace = workspace_from(args)
    store = WorldbookStore.of_workspace(workspace)
    try:
        report = propose_with_effect(workspace, store, args.book, args.rule, version=args.version,
                                     split=args.against, progress=_progress(args.progress))
    except (WorldbookError, KeyError) as error:
        raise CommandError(str(error).strip("\"'")) from None
    if args.apply is None:
        if getattr(args, "json", False):
            emit_json(report.to_json())
        else:
            _print(report)
        return EXIT_OK
    if not 1 <= args.apply <= len(report.proposals):
        raise CommandError(f"--apply {args.apply}: rule {args.rule!r} has {len(report.proposals)} proposal(s)")
    proposal = report.proposals[args.apply - 1]
    try:
        info = store.patch(args.book, proposal.patch.model_copy(update={"author": args.author}))
    except WorldbookError as error:
        raise CommandError(str(error)) from None
    if getattr(args, "json", False):
        emit_json({"book": args.book, "version": info.version, "parent": info.parent, "applied": proposal.to_json()})
    else:
        print(f"{args.book}: new version {info.version} (parent {info.parent}): {proposal.explanation}")
    return EXIT_OK
