"""The Worldbook and Build pages' pieces: rules (cards, tables, editors, proposals, replay), routes,
schemas, notes, held-out checks, versions, serving, and the report of a build."""
