"""Memoised parsing and translation for TextWorld's PDDL engine, and `sys.argv` kept from Fast Downward."""

from __future__ import annotations

import contextlib
import copy
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["memoised_engine", "preserved_argv"]


@contextlib.contextmanager
def preserved_argv() -> Iterator[None]:
    """Fast Downward's translator overwrites `sys.argv`; give the caller theirs back."""
    saved = list(sys.argv)
    try:
        yield
    finally:
        sys.argv[:] = saved


_CACHE_LIMIT = 20_000
_symbol_cache: dict[tuple[str, str | None], Any] = {}
_query_cache: dict[str, Any] = {}
_translation_cache: dict[tuple[Any, ...], Any] = {}
_originals: dict[str, Any] = {}  # TextWorld's own functions, captured once before any swap


def _memoised_parse(text: str, rule_name: str | None = None, **kwargs: Any) -> Any:
    key = (text, rule_name)
    parsed = _symbol_cache.get(key)
    if parsed is None:
        if len(_symbol_cache) > _CACHE_LIMIT:
            _symbol_cache.clear()
        parsed = _symbol_cache[key] = _originals["parse"](text, rule_name=rule_name, **kwargs)
    return copy.deepcopy(parsed)  # TextWorld sets a context on the symbols it is given


def _memoised_query(expression: str) -> Any:
    rule = _query_cache.get(expression)
    if rule is None:
        if len(_query_cache) > _CACHE_LIMIT:
            _query_cache.clear()
        rule = _query_cache[expression] = _originals["rule"].parse_conjunctive_query(expression)
    return rule


def _memoised_translation(domain: str, problem: str, verbose: bool = False, optimize: bool = False) -> Any:
    key = (domain, problem, verbose, optimize)
    if key not in _translation_cache:
        if len(_translation_cache) >= 2:  # keep the two translations of the game being played
            _translation_cache.clear()
        _translation_cache[key] = _originals["translate"](domain, problem, verbose=verbose, optimize=optimize)
    return _translation_cache[key]


class _MemoisedRule:
    parse_conjunctive_query = staticmethod(_memoised_query)


@contextlib.contextmanager
def memoised_engine() -> Iterator[None]:
    """TextWorld's PDDL engine with its parses and the game's translation memoised, while it runs here.

    TextWorld re-parses (with TatSu) every grammar template and condition for each admissible
    command at every step, and re-translates the game with Fast Downward at every reset. Both are
    pure functions of their text, so they are memoised: parsed symbols are handed out as deep copies
    (TextWorld sets their context), conditions are read-only rules, and a translation is reused only
    for the same domain and problem text. The game's text is unchanged (the tests compare). The
    memoised functions stand in for the originals only inside this context (and give the same
    results), so an interleaved caller elsewhere at worst runs without the speed-up.
    """
    import fast_downward
    from textworld.envs.pddl import textgen
    from textworld.logic import Rule

    if not _originals:
        _originals.update(parse=textgen._parse_and_convert, rule=Rule, translate=fast_downward.pddl2sas)
    textgen._parse_and_convert, textgen.Rule = _memoised_parse, _MemoisedRule
    fast_downward.pddl2sas = _memoised_translation
    try:
        with preserved_argv():
            yield
    finally:
        textgen._parse_and_convert, textgen.Rule = _originals["parse"], _originals["rule"]
        fast_downward.pddl2sas = _originals["translate"]
