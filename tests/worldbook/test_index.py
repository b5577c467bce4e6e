"""Worldbook search indexes on a real worldbook (the ALFWorld samples) with the real MiniLM model and faiss."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

from worldsmith.traces import Episode
from worldsmith.worldbook import DenseUnavailableError, Note, Worldbook, WorldbookIndex, build_worldbook, index_folder
from worldsmith.worldbook.index import SearchHit, _readable, default_embedder, fts_query

SAMPLES = Path(__file__).resolve().parents[2] / "data_samples" / "collected"
WEIRD = ['"unbalanced', "pick-up", "take OR", "NOT AND NEAR(", "*", "apple*", "'; DROP TABLE items; --", "^col:x",
         "   ", "ünïcode Ω", "a" * 5000, '"" OR ""']


@pytest.fixture(scope="module")
def book() -> Worldbook:
    path = SAMPLES / "alfworld.jsonl"
    if not path.exists():
        pytest.fail(f"sample missing: {path} (data_samples/make_samples.py --only collected)")
    episodes = [Episode.model_validate({k: v for k, v in orjson.loads(line).items() if k != "format"})
                for line in path.read_bytes().splitlines()]
    built = build_worldbook(episodes, name="alfworld", env_id="alfworld").book  # the book the product builds
    notes = [Note(id="n-format", kind="format", text="Receptacles and objects are named with a number, "
                  "like countertop 1.")]
    return built.model_copy(update={"notes": notes})


@pytest.fixture(scope="module")
def dense_index(book: Worldbook, tmp_path_factory: pytest.TempPathFactory) -> WorldbookIndex:
    calls: list[tuple[int, int]] = []
    index = WorldbookIndex.build(book, tmp_path_factory.mktemp("ix") / "index" / "v1",
                                 progress=lambda done, total: calls.append((done, total)))
    total = len(book.rules) + len(book.notes) + len(book.demonstrations) + len(book.evidence)
    assert calls and calls[-1] == (total, total) and len(index) == total
    return index


def take_rule(book: Worldbook) -> str:
    return next(r.id for r in book.rules if r.action == "take" and "pick up" in r.template)


def heat_rule(book: Worldbook) -> str:
    return next(r.id for r in book.rules if r.action == "heat" and "You heat the" in r.template)


def test_lexical_finds_a_rule_by_a_word_of_its_template(book: Worldbook, tmp_path: Path) -> None:
    index = WorldbookIndex.build(book, tmp_path / "lex", dense=False)
    hits = index.search("heat", kinds=["rule"], mode="lexical")
    assert hits and hits[0].id == heat_rule(book) and isinstance(hits[0], SearchHit)
    assert "You heat the {arg.object}" in hits[0].text
    assert [h.kind for h in index.search("numbered like countertop", mode="lexical", kinds=["note"])] == ["note"]
    only_take = index.search("pick up", 20, mode="lexical", action="take")
    assert only_take and {h.id.split("#")[0] for h in only_take if h.kind == "rule"} <= {take_rule(book)}
    assert all(h.kind != "note" for h in only_take)
    scores = [h.score for h in index.search("open drawer", 10, mode="lexical")]
    assert scores == sorted(scores, reverse=True)
    with pytest.raises(DenseUnavailableError, match="mode='lexical'"):
        index.search("heat", mode="hybrid")


def test_dense_and_hybrid_find_by_meaning(book: Worldbook, dense_index: WorldbookIndex) -> None:
    dense = dense_index.search("pick up an object", 3, kinds=["rule"], mode="dense")
    assert dense[0].id == take_rule(book)
    assert take_rule(book) in [h.id for h in dense_index.search("grab an item", 3, kinds=["rule"], mode="dense")]
    # No word in common with the template: only the dense part can find it.
    hybrid = dense_index.search("make food warm", 5, kinds=["rule"], mode="hybrid")
    assert heat_rule(book) in [h.id for h in hybrid]
    mixed = dense_index.search("warm the apple in the microwave", 10)
    assert {h.kind for h in mixed} >= {"evidence"} and len(mixed) == 10
    assert len({(h.kind, h.id) for h in mixed}) == 10
    filtered = dense_index.search("pick up an object", 5, mode="dense", action="heat")
    assert filtered and {h.id for h in filtered if h.kind == "rule"} <= {heat_rule(book)}
    assert all(h.kind in ("rule", "demonstration", "evidence") for h in filtered)
    assert dense_index.search("anything", 5, mode="dense", action="no-such-action") == []


@pytest.mark.parametrize("mode", ["lexical", "dense", "hybrid"])
def test_weird_queries_do_not_raise(dense_index: WorldbookIndex, mode: str) -> None:
    for query in WEIRD:
        hits = dense_index.search(query, 5, mode=mode)  # type: ignore[arg-type]
        assert len(hits) <= 5
    assert dense_index.search("", mode=mode) == []  # type: ignore[arg-type]
    assert dense_index.search("take", 0, mode=mode) == []  # type: ignore[arg-type]


def test_fts_query_quotes_every_word() -> None:
    assert fts_query('take OR "apple*" -x') == '"take" OR "or" OR "apple" OR "x"'
    assert fts_query(" *-^ ") is None


def test_templates_are_embedded_as_plain_words() -> None:
    assert _readable("You take the {arg.object} from {world.shelf_top}; {{arg.x}}") == \
        "You take the object from shelf top; {arg.x}"


def test_bad_arguments(dense_index: WorldbookIndex) -> None:
    with pytest.raises(ValueError, match="unknown kinds 'rules'"):
        dense_index.search("x", kinds=["rules"])
    with pytest.raises(ValueError, match="search mode 'fuzzy'"):
        dense_index.search("x", mode="fuzzy")  # type: ignore[arg-type]


def test_open_reuses_a_fresh_index_and_rebuilds_a_stale_one(book: Worldbook, tmp_path: Path) -> None:
    folder = index_folder(tmp_path / "worldbooks", "alfworld", "v0001-abc")
    assert folder == tmp_path / "worldbooks" / "alfworld" / "index" / "v0001-abc"
    first = WorldbookIndex.open(book, folder, dense=False)
    stamp = (folder / "index.sqlite").stat().st_mtime_ns
    again = WorldbookIndex.open(book.model_copy(update={"rules": list(reversed(book.rules))}), folder, dense=False)
    assert again.key == first.key and (folder / "index.sqlite").stat().st_mtime_ns == stamp  # order is no change

    edited = book.model_copy(update={"notes": [Note(id="n-new", text="Fridges keep things cold, zanzibar.")]})
    rebuilt = WorldbookIndex.open(edited, folder, dense=False)
    assert rebuilt.key != first.key
    assert [h.id for h in rebuilt.search("zanzibar", mode="lexical")] == ["n-new"]

    upgraded = WorldbookIndex.open(edited, folder, dense=True)  # lexical-only index: rebuilt with its dense part
    assert upgraded.has_dense and (folder / "dense.faiss").is_file()
    assert upgraded.search("cold storage", 3, kinds=["note"], mode="dense")[0].id == "n-new"

    (folder / "index.sqlite").write_bytes(b"not a database")  # a broken index is rebuilt, not an error
    healed = WorldbookIndex.open(edited, folder, dense=False)
    assert healed.search("zanzibar", mode="lexical")[0].id == "n-new"
    with sqlite3.connect(folder / "index.sqlite") as db:
        assert dict(db.execute("SELECT key, value FROM meta"))["key"] == healed.key
    assert sorted(p.name for p in folder.parent.iterdir()) == ["v0001-abc"]  # no staging folders left


def test_empty_book(tmp_path: Path) -> None:
    index = WorldbookIndex.build(Worldbook(name="empty"), tmp_path / "ix")
    assert len(index) == 0
    for mode in ("lexical", "dense", "hybrid"):
        assert index.search("anything", mode=mode) == []  # type: ignore[arg-type]
    assert WorldbookIndex.open(Worldbook(name="empty"), tmp_path / "ix").key == index.key


def test_default_embedder_is_cached_and_offline() -> None:
    embedder = default_embedder()
    assert embedder is default_embedder() and embedder.name == "all-MiniLM-L6-v2"
    vectors = embedder.encode(["pick up the apple", "take the apple", "the weather is cold"])
    assert vectors.shape == (3, 384) and vectors.dtype.name == "float32"
    assert abs(float((vectors[0] ** 2).sum()) - 1.0) < 1e-4
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2])


def test_missing_dense_dependencies_raise_clearly(book: Worldbook, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from worldsmith.worldbook import index as index_module

    real = importlib.util.find_spec
    monkeypatch.setattr(index_module.importlib.util, "find_spec",
                        lambda name, *a: None if name == "faiss" else real(name, *a))
    default_embedder.cache_clear()
    try:
        with pytest.raises(DenseUnavailableError, match="faiss-cpu"):
            WorldbookIndex.build(book, tmp_path / "ix")
        assert not (tmp_path / "ix").exists()
        lexical = WorldbookIndex.open(book, tmp_path / "ix", dense=False)
        assert lexical.search("heat", 1, mode="lexical")[0].id == heat_rule(book)
    finally:
        default_embedder.cache_clear()
