"""One registry for every kind of thing a user adds (environments, importers, exporters, LLM backends, world
models, metrics, answer sources, workbench pages), so each is registered, looked up, listed and plugged in the
same way under one name.

    FORMATS: Registry[Importer] = Registry("trace format", entry_point_group="worldsmith.importers")
    FORMATS.register("mine", MyImporter())      # or @FORMATS.register("mine") on a class or function
    FORMATS.get("mien")                         # NotRegisteredError: ... did you mean 'mine'?

Plug-ins reach a registry two ways, both loaded lazily, once, on the first lookup or listing: modules named in an
environment variable (`plugins_variable`; a module that cannot be imported is an error, as it always was) and
installed packages' entry points (`entry_point_group`; one that fails to load is reported - a warning and
`Registry.failures` - and skipped, so one broken package cannot stop the CLI or the workbench). An entry point
names a module (which registers on import) or an object, registered under the entry point's name.
"""

from __future__ import annotations

import difflib
import threading
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar, cast, overload

from worldsmith.util.errors import NotFoundError
from worldsmith.util.plugins import import_plugins, iter_entry_points

__all__ = ["AlreadyRegisteredError", "NotRegisteredError", "PluginFailure", "Registry"]

T = TypeVar("T")
_MISSING = object()
_CLOSE_MATCHES = 3


class NotRegisteredError(NotFoundError, KeyError):
    """No item is registered under this name: a `NotFoundError` and a KeyError (both LookupErrors), with a readable
    message (a plain KeyError would quote it); each registry may raise its own subclass, which may add ValueError where callers
    always caught that."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "not registered"


class AlreadyRegisteredError(ValueError):
    """The name is taken (pass `replace=True` to replace it)."""


@dataclass(frozen=True)
class PluginFailure:
    """An entry point that could not be loaded: which one and why (what `Registry.failures` lists)."""

    group: str
    name: str
    target: str
    error: str


class Registry(Generic[T]):
    """Items of one kind by name, in registration order; thread-safe (Streamlit runs pages in threads).

    `kind` names the items in messages ("unknown environment 'x'"); `loader` registers the built-ins on the first
    lookup (kept lazy where they are heavy to import); `not_found` is the error class `get` raises; `known_label`
    and `sort_known` shape its list of the known names; `check(name, item)` vets every registration, a plug-in's
    included (raise ValueError naming what is wrong); `on_change` runs after every register and unregister (for
    caches derived from the items).
    """

    def __init__(self, kind: str, *, entry_point_group: str | None = None, plugins_variable: str | None = None,
                 loader: Callable[[], object] | None = None, not_found: type[NotRegisteredError] = NotRegisteredError,
                 known_label: str = "known:", sort_known: bool = True,
                 check: Callable[[str, T], object] | None = None,
                 on_change: Callable[[], object] | None = None) -> None:
        self.kind = kind
        self.entry_point_group = entry_point_group
        self.plugins_variable = plugins_variable
        self.failures: list[PluginFailure] = []
        self._loader = loader
        self._not_found = not_found
        self._known_label = known_label
        self._sort_known = sort_known
        self._check = check
        self._on_change = on_change
        self._items: dict[str, T] = {}
        self._lock = threading.RLock()  # held briefly, for the items
        self._load_lock = threading.RLock()  # held while built-ins and plug-ins load; other readers wait for it
        self._loaded = False
        self._loading = False
        self._groups_loaded: set[str] = set()

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self._items)} registered)"

    # ------------------------------------------------------------------ registering

    @overload
    def register(self, name: str, item: T, *, replace: bool = False) -> T: ...

    @overload
    def register(self, name: str, item: None = None, *, replace: bool = False) -> Callable[[T], T]: ...

    def register(self, name: str, item: T | None = None, *, replace: bool = False) -> T | Callable[[T], T]:
        """Add `item` as `name` (AlreadyRegisteredError if taken, unless `replace`); without an item, a decorator."""
        if item is None:
            def decorate(target: T) -> T:
                return self.register(name, target, replace=replace)

            return decorate
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a {self.kind} needs a non-empty name, not {name!r}")
        if self._check is not None:
            self._check(name, item)
        with self._lock:
            if name in self._items and not replace:
                raise AlreadyRegisteredError(f"{self.kind} {name!r} is already registered")
            self._items[name] = item
        self._changed()
        return item

    def unregister(self, name: str) -> T | None:
        """Remove `name` and return its item (None if it was not registered): a test's or a notebook's throw-away."""
        with self._lock:
            item = self._items.pop(name, None)
        self._changed()
        return item

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change()

    # ------------------------------------------------------------------ looking up

    @overload
    def get(self, name: str) -> T: ...

    @overload
    def get(self, name: str, default: T) -> T: ...

    @overload
    def get(self, name: str, default: None) -> T | None: ...

    def get(self, name: str, default: object = _MISSING) -> object:
        """The item registered as `name`; without a default, the registry's not-found error naming close matches."""
        self.load()
        with self._lock:
            if name in self._items:
                return self._items[name]
        if default is not _MISSING:
            return default
        raise self._not_found(self.unknown_message(name))

    def unknown_message(self, name: str, items: dict[str, T] | None = None) -> str:
        """`unknown <kind> 'x' (known: a, b); did you mean 'y'?` - what `get` says about a name it does not know."""
        names = list(self.as_dict() if items is None else items)
        known = ", ".join(sorted(names) if self._sort_known else names) or "none"
        message = f"unknown {self.kind} {name!r} ({self._known_label} {known})"
        close = difflib.get_close_matches(str(name), names, n=_CLOSE_MATCHES) if isinstance(name, str) else []
        if close:
            message += "; did you mean " + " or ".join(repr(c) for c in close) + "?"
        return message

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        self.load()
        with self._lock:
            return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.as_dict())

    def names(self) -> list[str]:
        """Every registered name, in registration order."""
        return list(self.as_dict())

    def keys(self) -> list[str]:
        """The names (so `dict(registry)` works)."""
        return self.names()

    def values(self) -> list[T]:
        return list(self.as_dict().values())

    def items(self) -> list[tuple[str, T]]:
        """(name, item) pairs in registration order."""
        return list(self.as_dict().items())

    def as_dict(self, *, load: bool = True) -> dict[str, T]:
        """A copy of the items by name; `load=False` skips loading the built-ins and plug-ins (for code that runs
        while they register)."""
        if load:
            self.load()
        with self._lock:
            return dict(self._items)

    # ------------------------------------------------------------------ plug-ins

    def load(self) -> None:
        """Register the built-ins, then the plug-ins (environment variable, entry points): once, on first use."""
        if self._loaded:
            return
        with self._load_lock:
            if self._loaded or self._loading:  # loading already, in this thread: a module loaded here looks it up
                return
            self._loading = True
            try:
                if self._loader is not None:
                    self._loader()
                if self.plugins_variable:
                    import_plugins(self.plugins_variable)
                if self.entry_point_group:
                    self.load_entry_points(self.entry_point_group)
            finally:
                self._loading = False
                self._loaded = True

    def load_entry_points(self, group: str, *, again: bool = False) -> list[str]:
        """Load the entry points of `group` (once, unless `again`); returns the names registered by them.

        A module target registers its items on import; any other object is registered under the entry point's
        name unless it is already registered. A target that fails to load is reported (a warning, and kept in
        `failures`), not raised: one broken plug-in must not stop the rest.
        """
        with self._load_lock:
            if group in self._groups_loaded and not again:
                return []
            self._groups_loaded.add(group)
            before = set(self.as_dict(load=False))
            for entry_point, loaded in iter_entry_points(group, fresh=again):
                if isinstance(loaded, BaseException):
                    self._skip(group, entry_point.name, entry_point.value, loaded)
                    continue
                items = self.as_dict(load=False)
                if isinstance(loaded, types.ModuleType) or entry_point.name in items:
                    continue
                if any(item is loaded for item in items.values()):
                    continue
                try:
                    self.register(entry_point.name, cast(T, loaded))
                except ValueError as error:  # refused by `check`: reported like a failed import
                    self._skip(group, entry_point.name, entry_point.value, error)
            return [name for name in self.as_dict(load=False) if name not in before]

    def _skip(self, group: str, name: str, target: str, error: BaseException) -> None:
        failure = PluginFailure(group, name, target, f"{type(error).__name__}: {error}")
        self.failures.append(failure)
        warnings.warn(f"{self.kind} plug-in {name!r} ({target}, entry point group {group!r}) was skipped: "
                      f"{failure.error}", RuntimeWarning, stacklevel=3)
