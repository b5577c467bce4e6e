"""No traceback on any page for any combination of defaults (issue 34): every page of the workbench, under AppTest
through the app's navigation, on the workspace a newcomer has (bundled samples, worldbook `alfworld`) plus a
tool-API dataset and worldbook (`shop`), with each dataset and each worldbook chosen in the page's pickers, left
at its default, and every view a page switches between.

The pickers are named per page, and each must be on the page: a renamed key fails here rather than leaving a
combination silently untested.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sample_workspace import RUNS, SAMPLE_BOOK, SAMPLES, TOOL_BOOK, TOOL_DATASET, sample_workspace
from streamlit.testing.v1 import AppTest
from workbench_support import APP

from workbench.common.paths import PAGE_FILES

pytestmark = pytest.mark.slow  # about 150 page runs

TIMEOUT = 120
DATASETS = (None, SAMPLES, TOOL_DATASET)  # None: the picker keeps its default
BOOKS = (None, SAMPLE_BOOK, TOOL_BOOK)
TAB = "ev_tab"  # the Evaluate page draws only its open tab
WB_TAB = "wb_tab"  # and so does the Worldbook page
WB_TABS = ("Tool rules", "Routes", "Schemas", "Notes", "Search", "History", "Export / import")  # Rules: the default


@dataclass(frozen=True)
class View:
    """One way a page shows itself: the widgets set first (key, value), then the page's dataset and worldbook
    pickers (each set to every dataset / book in turn), then its episode pickers (set to their first episode)."""

    page: str
    setup: tuple[tuple[str, Any], ...] = ()
    state: tuple[tuple[str, Any], ...] = ()  # session state set before the page opens (e.g. which tab is open)
    datasets: tuple[str, ...] = ()
    books: tuple[str, ...] = ()
    episodes: tuple[str, ...] = field(default=())

    @property
    def label(self) -> str:
        return self.page + "".join(f"[{key}={value}]" for key, value in (*self.state, *self.setup))


VIEWS = [
    View("home"),
    View("traces", datasets=("tr_dataset_pick",), episodes=("tr_episode_pick",)),
    View("collect"),
    View("collect", setup=(("co_env", "toolshop"),)),
    View("play"),
    View("play", setup=(("pl_env", "toolshop"),)),
    View("build", datasets=("build_dataset",)),
    View("worldbook", datasets=("wb_heldout_dataset",), books=("wb_name",)),
    View("worldbook", setup=(("wb_heldout_split", "test"),), datasets=("wb_heldout_dataset",), books=("wb_name",)),
    *(View("worldbook", state=((WB_TAB, tab),), books=("wb_name",)) for tab in WB_TABS),
    View("simulate", datasets=("sim_ep_dataset",), books=("sim_book",), episodes=("sim_ep_episode",)),
    View("simulate", setup=(("sim_view", "Side by side"),), datasets=("sbs_dataset",), books=("sbs_book",)),
    *(
        View("evaluate", state=((TAB, "Launch"),), setup=setup, datasets=("ev_new_dataset",), books=("ev_new_book",))
        for setup in ((), (("ev_new_protocol", "drift"),), (("ev_new_protocol", "w2r"),))
    ),
    *(
        View("evaluate", state=((TAB, tab),), setup=(("ev_run", run),))
        for tab in ("Results", "Records", "Failures", "Compare")
        for run in RUNS
    ),
    View("train", datasets=("tr_dataset",), books=("tr_worldbook",)),
    View("train", setup=(("tr_source", "Config file"),)),
    View("models"),
    View("plugins"),
]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = sample_workspace(tmp_path_factory.mktemp("every-page-ws"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WORLDSMITH_WORKSPACE", str(root))
        patch.setenv("WORLDSMITH_SAMPLES", "")
        patch.delenv("WORLDSMITH_MODEL", raising=False)  # the default model: the bundled tiny one
        yield root


def _widget(at: AppTest, key: str, where: str) -> Any:
    for kind in ("selectbox", "radio"):
        try:
            return getattr(at, kind)(key=key)
        except KeyError:
            continue
    raise AssertionError(f"{where}: no select box or radio with key {key!r} on the page")


def _no_exception(at: AppTest, where: str) -> None:
    assert not at.exception, f"{where}: " + "\n".join(str(e.value) for e in at.exception)


def _set(at: AppTest, key: str, value: Any, where: str) -> None:
    widget = _widget(at, key, where)
    widget.set_value(value).run()
    _no_exception(at, f"{where} after {key}={value}")


def _open(view: View, dataset: str | None, book: str | None) -> AppTest:
    where = f"{view.label} dataset={dataset} book={book}"
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    _no_exception(at, f"{where} (app)")
    for key, value in view.state:
        at.session_state[key] = value
    at.switch_page(str(PAGE_FILES[view.page])).run()
    _no_exception(at, where)
    for key, value in view.setup:
        _set(at, key, value, where)
    for keys, value in ((view.books, book), (view.datasets, dataset)):
        for key in keys:
            _widget(at, key, where)  # present even when it keeps its default
            if value is not None:
                _set(at, key, value, where)
    for key in view.episodes:
        options = _widget(at, key, where).options
        assert options, f"{where}: episode picker {key} is empty"
        _set(at, key, options[0], where)
    return at


@pytest.mark.parametrize("view", VIEWS, ids=[view.label for view in VIEWS])
def test_every_combination_of_defaults_opens_without_a_traceback(workspace: Path, view: View) -> None:
    datasets = DATASETS if view.datasets else (None,)
    books = BOOKS if view.books else (None,)
    for dataset, book in itertools.product(datasets, books):
        at = _open(view, dataset, book)
        assert at.title, f"{view.label} dataset={dataset} book={book}: the page shows no title"


def test_every_page_is_covered() -> None:
    assert {view.page for view in VIEWS} == set(PAGE_FILES)
