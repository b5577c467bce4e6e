"""The workbench's pages, registered in one place: `workbench/app.py` builds its navigation from `PAGES`.

A built-in page is one script in `pages/` (plus its `workbench/<page>/` package); a researcher's page is one file
that defines a `PageSpec` (and draws itself when Streamlit runs it as a script, `__name__ == "__main__"`),
registered with `register_page` or as an installed package's `worldsmith.pages` entry point naming the spec.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from worldsmith._resources import pages_root
from worldsmith.util import Registry

__all__ = ["BUILTIN_PAGES", "ENTRY_POINT_GROUP", "PAGES", "PAGE_FILES", "PageSpec", "register_page"]

_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")


@dataclass(frozen=True)
class PageSpec:
    """One page: its name (the url path, and the key of `page_file`), its script, its navigation title and icon."""

    name: str
    file: Path
    title: str
    icon: str = ":material/extension:"
    default: bool = False  # the page served at the root (Home)

    def check(self) -> PageSpec:
        """The spec itself, or a ValueError naming what is wrong (a bad name, a missing script)."""
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"page name {self.name!r} must be lower-case letters, digits, '-' or '_' (a url path)")
        if not Path(self.file).is_file():
            raise ValueError(f"page {self.name!r}: no script at {self.file}")
        return self


def _check(name: str, spec: PageSpec) -> None:
    """Every registration, an entry point's included: a PageSpec under its own name, a script, one default page."""
    if not isinstance(spec, PageSpec) or spec.name != name:
        raise ValueError(f"page {name!r} must be registered as a PageSpec named {name!r}, not {spec!r}")
    spec.check()
    if spec.default and any(other.default and other.name != name for other in PAGES.as_dict(load=False).values()):
        raise ValueError(f"page {name!r} cannot be the default page: Home is")


ENTRY_POINT_GROUP = "worldsmith.pages"
PAGES: Registry[PageSpec] = Registry("workbench page", entry_point_group=ENTRY_POINT_GROUP, sort_known=False,
                                     check=_check)


def register_page(spec: PageSpec, *, replace: bool = False) -> PageSpec:
    """Add a page to the navigation (after those registered before it); refused if its name is taken."""
    return PAGES.register(spec.name, spec, replace=replace)


_DIR = pages_root()  # the checkout's pages/, or the installed wheel's copy
BUILTIN_PAGES = (
    PageSpec("home", _DIR / "home.py", "Home", ":material/home:", default=True),
    PageSpec("traces", _DIR / "traces.py", "Traces", ":material/timeline:"),
    PageSpec("collect", _DIR / "collect.py", "Collect", ":material/sports_esports:"),
    PageSpec("play", _DIR / "play.py", "Play", ":material/keyboard:"),
    PageSpec("build", _DIR / "build.py", "Build", ":material/construction:"),
    PageSpec("worldbook", _DIR / "worldbook.py", "Worldbook", ":material/menu_book:"),
    PageSpec("simulate", _DIR / "simulate.py", "Simulate", ":material/model_training:"),
    PageSpec("evaluate", _DIR / "evaluate.py", "Evaluate", ":material/leaderboard:"),
    PageSpec("train", _DIR / "train.py", "Train", ":material/fitness_center:"),
    PageSpec("models", _DIR / "models.py", "Models", ":material/psychology:"),
    PageSpec("plugins", _DIR / "plugins.py", "Plug-ins", ":material/extension:"),
)
for _spec in BUILTIN_PAGES:
    PAGES.register(_spec.name, _spec)

# The built-in pages' scripts by name (what st.page_link / st.switch_page accept, as `paths.page_file`).
PAGE_FILES = {spec.name: spec.file for spec in BUILTIN_PAGES}
