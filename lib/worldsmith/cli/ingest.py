"""`worldsmith ingest PATH... --dataset NAME [--format F] [--strict] [--redact [--redact-forget]] [--json]`."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from worldsmith.cli.common import EXIT_ERROR, EXIT_OK, add_common, emit_json, workspace_from
from worldsmith.traces.import_report import FileReport
from worldsmith.traces.importers import IMPORTERS
from worldsmith.traces.redaction import DEFAULT_REGIONS, KINDS
from worldsmith.util.errors import BadInputError
from worldsmith.workspace import Workspace
from worldsmith.workspace.ingest import IngestProgress
from worldsmith.workspace.redaction import RedactionSettings


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ingest", help="import trace files into a dataset",
        description="Import trace files (format auto-detected) into a workspace dataset. "
        "Rejected records are reported with file, line or JSON pointer and reason, and written "
        "verbatim to a quarantine file next to the import report.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="trace files or folders")
    parser.add_argument("--dataset", required=True, help="dataset name (created if missing)")
    parser.add_argument("--format", choices=sorted(IMPORTERS), help="skip detection and read every file as FORMAT")
    parser.add_argument("--strict", action="store_true", help="import nothing if any record is rejected")
    parser.add_argument("--env", help="environment id for episodes that name none (default: chat logs get the "
                                      "one their declared tool schemas give; without schemas, the environment of "
                                      "the workspace whose tools and system prompt they match, else one from the "
                                      "tools they call, e.g. tools-get_user-update_user)")
    redaction = parser.add_argument_group("redaction")
    redaction.add_argument("--redact", action="store_true",
                           help="replace e-mail addresses, phone and card numbers and person names by pseudonyms, "
                                "the same for a value everywhere in the dataset, before anything is stored")
    redaction.add_argument("--redact-mapping", type=Path, metavar="FILE",
                           help="keep the value-to-pseudonym mapping here (default: "
                                "<workspace>/redaction/<dataset>.json; never inside a dataset)")
    redaction.add_argument("--redact-forget", action="store_true",
                           help="keep no mapping: pseudonyms cannot be mapped back, and each import draws new ones")
    redaction.add_argument("--redact-region", action="append", metavar="CC",
                           help="phone region for numbers without a country code (repeatable; the first is the main "
                                f"one; default: {' '.join(DEFAULT_REGIONS)})")
    add_common(parser)
    parser.set_defaults(handler=run)


class _Progress:
    """One status line on stderr, at most every half second, only on a terminal."""

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty()
        self.last = 0.0

    def __call__(self, progress: IngestProgress) -> None:
        now = time.monotonic()
        if not self.enabled or now - self.last < 0.5:
            return
        self.last = now
        rate = progress.turns / progress.seconds if progress.seconds else 0.0
        sys.stderr.write(
            f"\r[{progress.files_done}/{progress.files_total} files] {progress.episodes} episodes, "
            f"{progress.turns} turns ({rate:,.0f} turns/s), {progress.rejected} rejected   "
        )
        sys.stderr.flush()


def _redaction(args: argparse.Namespace) -> RedactionSettings | None:
    if not args.redact:
        if args.redact_mapping or args.redact_forget or args.redact_region:
            raise BadInputError("--redact-mapping, --redact-forget and --redact-region go with --redact")
        return None
    regions = tuple(region.upper() for region in args.redact_region) if args.redact_region else DEFAULT_REGIONS
    return RedactionSettings(mapping=args.redact_mapping, forget=args.redact_forget, regions=regions)


def run(args: argparse.Namespace) -> int:
    workspace = workspace_from(args)
    progress = _Progress()
    redact = _redaction(args)
    report = workspace.ingest(args.paths, args.dataset, format=args.format, strict=args.strict, progress=progress,
                              env=args.env, redact=redact)
    if progress.enabled:
        sys.stderr.write("\n")
    failed = (args.strict and report.rejected > 0) or (report.episodes == 0 and report.rejected > 0)
    if getattr(args, "json", False):
        emit_json(report.summary())  # an ambiguous file's candidates are in it: choose with `traces relabel`
    else:
        for file in report.files:
            status = f"error: {file.error}" if file.error else (
                f"{file.episodes} episodes, {file.turns} turns, {file.rejected} rejected, {file.duplicates} duplicates"
                + (f", {file.dialogue_only} dialogue only (no tool call)" if file.dialogue_only else "")
                + (f", {file.empty} empty (nothing kept)" if file.empty else "")
                + (f", {file.renamed} ids suffixed on collision" if file.renamed else "")
                + (f"; environment {file.derived_env} (from its {file.derived_from or 'tools'})"
                   if file.derived_env and not file.env_decision else "")
            )
            print(f"{file.path} [{file.format or '?'}]: {status}")
            if file.env_decision:
                print(f"  environment {file.derived_env}: {file.env_reason}")
        for item in report.rejects[:20]:
            where = item["source"] + (f":{item['line']}" if item["line"] else "") + (f" {item['pointer']}" if item["pointer"] else "")
            print(f"  rejected {where}: {item['reason']}", file=sys.stderr)
        if report.rejected > 20:
            print(f"  ... {report.rejected - 20} more rejects in {report.quarantine_path}", file=sys.stderr)
        if report.redaction is not None:
            kinds = report.redaction["kinds"]
            counts = ", ".join(f"{kinds[k]['replaced']} {k}" for k in KINDS)
            kept = report.redaction["mapping"] or "not kept"
            print(f"redacted: {counts} occurrences replaced; mapping {kept}")
        verdict = "committed" if report.committed else "nothing committed"
        print(
            f"dataset {report.dataset}: {verdict}; {report.episodes} episodes"
            + (f" ({report.dialogue_only} dialogue only)" if report.dialogue_only else "")
            + f", {report.turns} turns, {report.rejected} rejected, {report.duplicates} duplicates ({report.seconds:.2f}s); report {report.report_path}"
        )
        if report.committed and sys.stdin.isatty():
            for file in report.files:
                if file.env_decision == "ambiguous":
                    _ask_environment(workspace, report.dataset, file)
    return EXIT_ERROR if failed else EXIT_OK


def _ask_environment(workspace: Workspace, dataset: str, file: FileReport) -> None:
    """A file that matches several environments: ask which one it joins (Enter keeps its own id)."""
    options = [candidate.env for candidate in file.env_candidates]
    print(f"{file.path} matches {len(options)} environments; which one does it join?")
    for number, env in enumerate(options, 1):
        print(f"  {number}. {env}")
    answer = input(f"number (Enter keeps {file.derived_env}): ").strip()
    if not answer:
        return
    if not answer.isdigit() or not 1 <= int(answer) <= len(options):
        print(f"no such choice {answer!r}: kept {file.derived_env} (worldsmith traces relabel {dataset} --env ENV "
              f"--from {file.derived_env} joins one later)")
        return
    result = workspace.relabel(dataset, options[int(answer) - 1], only=[file.derived_env])
    print(f"{result.episodes} episodes now have environment {result.env}")
