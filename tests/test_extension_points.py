"""Adding an environment, an importer, a metric, an answer source or a workbench page is one new file (issue 31).

Each throw-away below is ONE file in a plug-in folder, reached the way an installed package's would be: through
its entry point (a dist-info on the path, as `pip install` leaves it), loaded by the kind's `Registry`. The CLI (a
fresh process) lists each one, and the workbench (AppTest) offers each one where that kind is offered, shows it
on the Plug-ins page, and has the page in its navigation.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from streamlit.testing.v1 import AppTest

REPO = Path(__file__).resolve().parents[1]
APP = REPO / "workbench" / "app.py"
TIMEOUT = 120

pytestmark = pytest.mark.slow  # CLI subprocesses and the workbench under AppTest

FILES = {
    "throwaway_env.py": '''
"""A throw-away environment: the env and its spec in one file."""
from typing import Any

from worldsmith.envs import EnvBase, EnvSpec, Step
from worldsmith.traces import Action, Observation


class EchoEnv(EnvBase):
    name = "throwaway"

    def tasks(self) -> list[str]:
        return ["echo"]

    def reset(self, task: str | None = None, *, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        return Observation(text="say something"), {"task": "echo"}

    def step(self, action: Action | str) -> Step:
        return Step(Observation(text=f"echo {action}"), 1.0, True, False, {})


SPEC = EnvSpec("throwaway", "throwaway_env:EchoEnv", "a throw-away environment from a plug-in")
''',
    "throwaway_importer.py": '''
"""A throw-away trace format: the importer in one file."""
from collections.abc import Iterator
from pathlib import Path


class ShoutImporter:
    name = "shout"
    description = "a throw-away trace format from a plug-in"

    def sniff(self, path: Path, head: str) -> float:
        return 0.0

    def read(self, path: Path) -> Iterator[object]:
        return iter(())


IMPORTER = ShoutImporter()
''',
    "throwaway_metric.py": '''
"""A throw-away metric: one function."""
from worldsmith.evals.metrics import metric


@metric
def shouting_match(prediction: str, reference: str) -> float | None:
    """1.0 when the prediction is the reference in capitals."""
    return float(prediction == reference.upper())
''',
    "throwaway_source.py": '''
"""A throw-away answer source: what the same action got last, in one file."""
from typing import Any

from worldsmith.sim.sources import Answer, AnswerSource, CandidateAnswer, SourceContext, TrackerSource, answer_source


class LastEcho:
    def __init__(self) -> None:
        self.last: dict[str, str] = {}

    def reset(self, opening: str) -> None:
        self.last = {}

    def observe(self, name: str, arguments: dict[str, Any], observation: str) -> None:
        self.last[name] = observation

    def propose(self, name: str, arguments: dict[str, Any], line: str) -> list[CandidateAnswer]:
        seen = self.last.get(name)
        return [CandidateAnswer("throwaway_echo", seen)] if seen is not None else []

    def snapshot(self) -> dict[str, Any]:
        return {"actions": sorted(self.last)}


@answer_source("throwaway_echo", answers=(Answer("throwaway_echo", rank=-20, trusted=True),))
def build(context: SourceContext) -> AnswerSource:
    return TrackerSource(LastEcho(), gate=context.tracking)
''',
    "throwaway_page.py": '''
"""A throw-away workbench page: its registration and its body in one file."""
from pathlib import Path

from workbench.common.pages import PageSpec

PAGE = PageSpec("throwaway", Path(__file__), "Throwaway", ":material/science:")

if __name__ == "__main__":  # Streamlit runs the page as a script
    import streamlit as st

    st.title("Throwaway page", anchor=False)
    st.markdown("Drawn by a plug-in page.")
''',
}

ENTRY_POINTS = """\
[worldsmith.envs]
throwaway = throwaway_env:SPEC

[worldsmith.importers]
shout = throwaway_importer:IMPORTER

[worldsmith.metrics]
shouting_match = throwaway_metric:shouting_match

[worldsmith.answer_sources]
throwaway_echo = throwaway_source

[worldsmith.pages]
throwaway = throwaway_page:PAGE
"""

NAMES = {"env": "throwaway", "importer": "shout", "metric": "shouting_match", "answer_source": "throwaway_echo",
         "page": "throwaway"}


@pytest.fixture
def plugin_folder(tmp_path: Path) -> Path:
    """The five plug-in files and the metadata `pip install` would write for the package holding them."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text.lstrip())
    info = folder / "worldsmith_throwaway-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: worldsmith-throwaway\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return folder


def _cli(folder: Path, workspace: Path, *args: str) -> dict[str, Any]:
    path = os.pathsep.join([str(folder), str(REPO / "lib"), str(REPO), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "WORLDSMITH_WORKSPACE": str(workspace), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "worldsmith.cli.main", *args, "--json"], env=env, cwd=folder,
                          capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    assert "was skipped" not in done.stderr, done.stderr
    return orjson.loads(done.stdout)


def test_the_cli_lists_each_throwaway(plugin_folder: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    envs = _cli(plugin_folder, workspace, "envs", "list")["environments"]
    assert {"name": "throwaway", "description": "a throw-away environment from a plug-in"}.items() <= next(
        e for e in envs if e["name"] == NAMES["env"]).items()
    formats = _cli(plugin_folder, workspace, "traces", "formats")["formats"]
    assert {"name": "shout", "description": "a throw-away trace format from a plug-in"} in formats
    metrics = _cli(plugin_folder, workspace, "eval", "metrics")["metrics"]
    assert metrics[-1] == {"name": "shouting_match", "builtin": False,
                           "description": "1.0 when the prediction is the reference in capitals."}
    points = _cli(plugin_folder, workspace, "plugins")["extension_points"]
    for kind in ("env", "importer", "metric", "answer_source"):
        assert NAMES[kind] in points[kind]["names"], kind
        assert points[kind]["failures"] == []
    assert points["answer_source"]["entry_point_group"] == "worldsmith.answer_sources"


@pytest.fixture
def installed(plugin_folder: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """The plug-in package on this process's path, its entry points loaded by each registry; removed afterwards."""
    from workbench.common.pages import PAGES
    from worldsmith.cli.extensions import extension_points

    monkeypatch.syspath_prepend(str(plugin_folder))
    monkeypatch.setenv("WORLDSMITH_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("WORLDSMITH_SAMPLES", "")
    registries = {**extension_points(), "page": PAGES}
    for registry in registries.values():
        registry.load()  # the built-ins first, as on a first lookup
        assert registry.entry_point_group is not None
        registry.load_entry_points(registry.entry_point_group, again=True)
    try:
        yield
    finally:
        for kind, name in NAMES.items():
            registries[kind].unregister(name)
        for module in [m for m in sys.modules if m.startswith("throwaway_")]:
            del sys.modules[module]


def _open(page: Path | None = None) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    assert not at.exception, [e.value for e in at.exception]
    if page is not None:
        at.switch_page(str(page)).run()
        assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_workbench_offers_each_throwaway(installed: None, plugin_folder: Path) -> None:
    from workbench.common.pages import PAGE_FILES

    at = _open(plugin_folder / "throwaway_page.py")  # in the app's navigation: switching to it draws it
    assert [t.value for t in at.title] == ["Throwaway page"]

    at = _open(PAGE_FILES["plugins"])
    listed = {row["extension point"]: row["names"].split(", ") for row in at.dataframe[0].value.to_dict("records")}
    for kind, name in NAMES.items():
        assert name in listed[kind], kind

    at = _open(PAGE_FILES["collect"])
    assert "throwaway" in at.selectbox(key="co_env").options
    at = _open(PAGE_FILES["traces"])
    assert "shout" in at.selectbox(key="tr_import_format").options


def test_a_plug_in_metric_is_scored_into_an_evaluation_the_workbench_shows(installed: None, tmp_path: Path) -> None:
    """A run's records (scored by `metric_scores`, every registered metric), its records.parquet and report, and
    the Evaluate page's leaderboard all carry the plug-in metric."""
    from eval_fixtures import write_run

    from workbench.common.pages import PAGE_FILES
    from worldsmith.evals.eval_records import records_frame, write_records
    from worldsmith.evals.metrics import metric_scores
    from worldsmith.evals.report import build_report

    folder = write_run(tmp_path / "ws", "shout-run", ["harness", "nearest"])  # a run folder by the contract
    rows = records_frame([]).columns  # the contract's columns and the plug-in metric's
    assert "shouting_match" in rows
    records = [
        {"run": "shout-run", "protocol": "next-obs", "method": method, "env_id": "x", "episode_id": f"e{e}",
         "turn": 0, "reference": "go", "prediction": prediction, "error": None, **metric_scores(prediction, "go")}
        for method, prediction in (("harness", "GO"), ("nearest", "go")) for e in range(3)]
    assert {r["method"]: r["shouting_match"] for r in records} == {"harness": 1.0, "nearest": 0.0}
    write_records(folder / "records.parquet", records)
    report = build_report(records_frame(records), run="shout-run", protocol="next-obs", fingerprint="fp-shout-run",
                          config=orjson.loads((folder / "config.json").read_bytes()),
                          methods=["harness", "nearest"], resamples=200)
    assert "shouting_match" in report["metrics"]
    (folder / "report.json").write_bytes(orjson.dumps({**orjson.loads((folder / "report.json").read_bytes()),
                                                        **report}, default=str))

    at = _open(PAGE_FILES["evaluate"])
    at.selectbox(key="ev_run").set_value("shout-run").run()
    assert not at.exception, [e.value for e in at.exception]
    board = next(df.value for df in at.dataframe if "shouting_match" in df.value.columns)
    assert board.set_index("method").loc["harness", "shouting_match"].startswith("1.000")


def test_a_page_not_registered_is_not_in_the_navigation(plugin_folder: Path, monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    """The check above can fail: without the registration, switching to the page's file does not draw it."""
    monkeypatch.setenv("WORLDSMITH_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("WORLDSMITH_SAMPLES", "")
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    with pytest.raises(ValueError, match="Could not find a navigation page for .*throwaway_page.py"):
        at.switch_page(str(plugin_folder / "throwaway_page.py")).run()
