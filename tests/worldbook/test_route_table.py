"""`RouteTable.absorb`: tables made fold by fold, merged in fold order, equal one table that recorded every fold."""

from __future__ import annotations

from worldsmith.worldbook.route_table import RouteTable

# (action, source, exact, nearest exact) per turn, a duel, a rule: two folds, some keys only in the second
FOLDS = [
    [("get", "rule", True, False, "rule>nearest", "r1"), ("set", "query", False, True, None, None),
     ("get", "nearest", False, None, None, "r2")],
    [("list", "records", True, True, "records>rule", "r3"), ("get", "rule", False, False, None, "r1"),
     ("get", "memory", True, None, "memory>rule", None)],
]


def _record(table: RouteTable, turns: list[tuple]) -> None:
    for action, source, exact, nearest, duel, rule in turns:
        table.record(action, source, exact, nearest)
        if duel is not None:
            table.record_duel(action, *duel.split(">"))
        if rule is not None:
            table.record_rule(rule, exact)
        table.turns += 1


def test_absorbed_fold_tables_equal_one_table_recording_every_fold_key_order_included() -> None:
    whole = RouteTable(folds=2)
    for turns in FOLDS:
        _record(whole, turns)
    merged = RouteTable(folds=2)
    for turns in FOLDS:
        fold = RouteTable()
        _record(fold, turns)
        merged.absorb(fold)
    assert merged.model_dump_json() == whole.model_dump_json()
    assert list(merged.actions) == ["get", "set", "list"] and list(merged.actions["get"]) == ["rule", "nearest", "memory"]
    assert merged.actions["get"]["rule"].proposed == 2 and merged.rules["r1"].answered == 2 and merged.turns == 6


def test_absorbing_an_empty_table_changes_nothing() -> None:
    table = RouteTable(folds=3)
    _record(table, FOLDS[0])
    before = table.model_dump_json()
    table.absorb(RouteTable())
    assert table.model_dump_json() == before
