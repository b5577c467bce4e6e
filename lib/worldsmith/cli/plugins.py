"""`worldsmith plugins [--json]`: every extension point, what is registered in it, and plug-ins that failed."""

from __future__ import annotations

import argparse

from worldsmith.cli.common import EXIT_OK, add_common, emit_json
from worldsmith.cli.extensions import describe, extension_points

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plugins", help="what is registered per extension point (envs, importers, metrics, ...) and broken plug-ins",
        description="List every extension point: its registered names (built-in and plug-in), the entry point group "
                    "and environment variable plug-ins arrive through, plug-ins that failed to load, and registered "
                    "metrics that fail the edge checks (empty, punctuation-only, truncated texts).")
    add_common(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    listed = {name: describe(registry) for name, registry in extension_points().items()}
    if getattr(args, "json", False):
        emit_json({"extension_points": listed})
        return EXIT_OK
    for name, entry in listed.items():
        via = ", ".join(filter(None, (entry["entry_point_group"] and f"entry points {entry['entry_point_group']}",
                                      entry["plugins_variable"] and f"${entry['plugins_variable']}")))
        print(f"{name} ({via}): {', '.join(entry['names']) or '-'}")
        for failure in entry["failures"]:
            print(f"  skipped {failure['name']} ({failure['target']}): {failure['error']}")
        for failing in entry.get("edge_failures", []):
            print(f"  {failing['name']} fails the metric edge checks: {'; '.join(failing['problems'])}")
    return EXIT_OK
