"""The Train page under AppTest with real EnvACE runs of the tiny model: runs listed with their state, live loss and
fidelity curves, rehearsed responses beside the real ones, runs compared, a sweep's table and heat map, a killed run
shown as stopped, form errors naming the field, and a run launched from the form training in the background."""

from __future__ import annotations

import base64
import json
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest
from workbench_support import APP, REPO

PAGE = REPO / "pages" / "train.py"
BFCL = REPO / "data_samples" / "collected" / "bfcl.jsonl"
TINY = REPO / "data_samples" / "models" / "tiny"


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_page() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    return no_exception(at.switch_page(str(PAGE)).run())


def _decoded(value):
    if isinstance(value, dict):
        if set(value) >= {"dtype", "bdata"}:
            return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).tolist()
        return {key: _decoded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_decoded(item) for item in value]
    return value


def figures(at: AppTest) -> dict[str, dict]:
    """Plotly figures on the page by title."""
    out = {}
    for chart in at.get("plotly_chart"):
        spec = _decoded(json.loads(chart.proto.spec))
        out[spec["layout"]["title"]["text"]] = spec
    return out


def _train(out: Path, **overrides) -> Path:
    from worldsmith.envace.config import EnvACEConfig
    from worldsmith.envace.trainer import Trainer

    raw = {"model": str(TINY), "data": {"paths": [str(BFCL)], "max_seq_len": 1024}, "steps": 3, "batch_size": 1,
           "threads": 1, "probe": {"every": 2, "n_transitions": 3, "max_new_tokens": 12}, "out": str(out)}
    raw.update(overrides)
    Trainer(EnvACEConfig.from_dict(raw)).train(resume=False)
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two real 3-step joint runs of the tiny model on the BFCL sample (λ = 1 and the plain agent, λ = 0)."""
    folder = tmp_path_factory.mktemp("envace_runs")
    _train(folder / "tiny-joint")
    _train(folder / "tiny-plain", lam=0.0, seed=1)
    return folder


@pytest.fixture
def with_runs(empty_root: Path, trained: Path) -> Path:
    shutil.copytree(trained, empty_root / "runs" / "envace")
    return empty_root


def test_no_runs_says_how_to_start(empty_root: Path) -> None:
    at = open_page()
    assert any("No EnvACE runs" in str(info.value) for info in at.info)
    assert any("No sweeps yet" in str(info.value) for info in at.info)


def test_a_run_shows_its_curves_and_rehearsed_beside_real(with_runs: Path) -> None:
    at = open_page()
    runs = at.selectbox(key="tr_run")
    assert sorted(runs.options) == sorted(["tiny-joint · joint · done 3/3", "tiny-plain · joint · done 3/3"])
    no_exception(runs.set_value("tiny-joint").run())
    metrics = [json.loads(line) for line in (with_runs / "runs/envace/tiny-joint/metrics.jsonl").read_text().splitlines()]
    shown = figures(at)
    loss = {trace["name"]: trace for trace in shown["Loss per role"]["data"]}
    logged = [row for row in metrics if "act_loss" in row]
    assert loss["act"]["x"] == [row["step"] for row in logged]
    assert loss["act"]["y"] == pytest.approx([row["act_loss"] for row in logged])
    assert "rehearse" in loss
    # the probe's episodes are held out of training by default, and the chart says which
    fidelity = {trace["name"]: trace
                for trace in shown["Rehearsal fidelity (held-out (1 of 6 trajectory families))"]["data"]}
    assert fidelity["fidelity"]["x"] == [row["step"] for row in metrics if "rehearsal_fidelity" in row] == [2, 3]
    source = next(str(c.value) for c in at.caption if str(c.value).startswith("Produced by")).replace("\\", "")
    for part in ("method EnvACE rehearsal probe (token_f1)", "trained on: EnvACE", "to step 3",  # the chart's origin
                 "split held-out (1 of 6 trajectory families)", "n 3 transitions", "run tiny-joint"):
        assert part in source, (part, source)
    summary = json.loads((with_runs / "runs/envace/tiny-joint/summary.json").read_text())
    table = next(df.value for df in at.dataframe if "act_loss_first" in df.value.columns)
    assert table.iloc[0]["act_loss_last"] == pytest.approx(summary["act_loss_last"])
    # the last probe's transitions: the real response and the model's rehearsal side by side, as text
    probes = [json.loads(line) for line in (with_runs / "runs/envace/tiny-joint/probes.jsonl").read_text().splitlines()]
    example = probes[-1]["examples"][0]
    codes = [block.value for block in at.code]
    assert example["action"] in codes and example["real"] in codes and example["rehearsed"] in codes
    assert at.selectbox(key="tr_probe_tiny-joint").value == len(probes) - 1
    second = probes[-1]["examples"][1]
    no_exception(at.selectbox(key="tr_probe_example_tiny-joint").set_value(1).run())
    assert second["real"] in [block.value for block in at.code]


def test_runs_are_compared(with_runs: Path) -> None:
    at = open_page()
    assert sorted(at.multiselect(key="tr_cmp_runs").value) == ["tiny-joint", "tiny-plain"]
    no_exception(at.selectbox(key="tr_cmp_metric").set_value("rehearse_loss").run())
    chart = figures(at)["rehearse_loss by run"]
    traces = {trace["name"]: trace for trace in chart["data"]}
    assert set(traces) == {"tiny-joint", "tiny-plain"}
    logged = [json.loads(line) for line in (with_runs / "runs/envace/tiny-plain/metrics.jsonl").read_text().splitlines()]
    assert traces["tiny-plain"]["y"] == pytest.approx([row["rehearse_loss"] for row in logged if "rehearse_loss" in row])
    table = next(df.value for df in at.dataframe if "lam" in df.value.columns and "run" in df.value.columns)
    assert dict(zip(table["run"], table["lam"], strict=True)) == {"tiny-joint": 1.0, "tiny-plain": 0.0}


def test_a_killed_run_is_shown_stopped(with_runs: Path) -> None:
    status = with_runs / "runs/envace/tiny-plain/status.json"
    data = json.loads(status.read_text())
    status.write_text(json.dumps({**data, "state": "running", "pid": 2**22 + 12345, "step": 2}))
    at = open_page()
    assert "tiny-plain · joint · stopped 2/3" in at.selectbox(key="tr_run").options
    no_exception(at.selectbox(key="tr_run").set_value("tiny-plain").run())
    assert any("process is gone" in str(warning.value) for warning in at.warning)


def test_a_sweep_table_and_heat_map(with_runs: Path) -> None:
    from worldsmith.envace.sweep import SweepResult

    folder = with_runs / "runs/envace/sweeps/lam-lr"
    folder.mkdir(parents=True)
    trials = []
    for index, (lam, lr) in enumerate([(0.0, 0.001), (0.0, 0.003), (1.0, 0.001), (1.0, 0.003)]):
        row = {"trial": f"t{index:03d}", "overrides": {"lam": lam, "lr": lr}, "run_dir": str(folder / f"t{index}"),
               "status": "ok", "error": None, "rehearsal_fidelity": 0.1 * index, "act_loss_last": 3.0 - index}
        trials.append(row)
    trials[3] = {**trials[3], "status": "failed", "error": "RuntimeError: boom", "rehearsal_fidelity": None}
    result = SweepResult(name="lam-lr", out=str(folder), metric="rehearsal_fidelity", mode="max", trials=trials,
                         best=trials[2], seconds=12.0)
    (folder / "sweep.json").write_text(json.dumps(result.model_dump()))
    at = open_page()
    table = next(df.value for df in at.dataframe if "trial" in df.value.columns and "lam" in df.value.columns)
    assert list(table["trial"]) == ["t000", "t001", "t002", "t003"]
    assert list(table["status"]) == ["ok", "ok", "ok", "failed"]
    assert any("1 trial(s) failed" in str(warning.value) for warning in at.warning)
    assert any("t002" in str(success.value) for success in at.success)
    heat = figures(at)["rehearsal_fidelity by lam × lr"]["data"][0]
    assert heat["x"] == ["0.0", "1.0"] and heat["y"] == ["0.001", "0.003"]
    z = np.array(heat["z"], dtype=float)
    assert z[0].tolist() == pytest.approx([0.0, 0.2]) and z[1, 0] == pytest.approx(0.1) and np.isnan(z[1, 1])


def test_form_errors_name_the_field(empty_root: Path) -> None:
    at = open_page()
    at.radio(key="tr_objective").set_value("grpo")
    at.selectbox(key="tr_rollout_source").set_value("worldbook")
    no_exception(at.button[[b.label for b in at.button].index("Launch")].click().run())
    assert any("worldbook" in str(error.value) for error in at.error)
    assert not (empty_root / "runs" / "envace" / ".launch").exists() or not any(
        (empty_root / "runs" / "envace" / ".launch").glob("*.job.json"))


def test_the_probe_chart_names_what_it_probed() -> None:
    from workbench.train.charts import fidelity_figure, probe_label

    assert probe_label("held-out", "test") == "held-out (split test)"
    assert probe_label("held-out", "1 of 6 trajectory families") == "held-out (1 of 6 trajectory families)"
    assert probe_label("train", "all") == "training episodes"  # never called held-out
    assert probe_label(None, None) == "probe episodes not recorded"  # an old run's probe rows say nothing
    frame = pd.DataFrame({"step": [1, 2], "rehearsal_fidelity": [0.0, 0.0]})
    title = fidelity_figure(frame, probe=probe_label("train", "all")).layout.title.text
    assert title == "Rehearsal fidelity (training episodes)"


def test_component_helpers() -> None:
    from workbench.train.form import config_from_values, sweep_config_from_values
    from workbench.train.runs import process_alive
    from worldsmith.envace.config import ConfigError

    config = config_from_values({"paths": str(BFCL), "lam": 0.5, "steps": 4, "threads": 1, "probe_threshold": 0.4})
    assert config.lam == 0.5 and config.data.paths == [str(BFCL.resolve())] and config.probe.threshold == 0.4
    assert config.data.env is None  # follows the episodes' environment id unless named
    from workbench.train.form import FROM_DATA

    assert config_from_values({"paths": str(BFCL), "env": FROM_DATA}).data.env is None
    assert config_from_values({"paths": str(BFCL), "env": "bfcl"}).data.env == "bfcl"
    with pytest.raises(ConfigError, match="lr"):
        config_from_values({"paths": str(BFCL), "lr": 0.0})
    base = config.to_json()
    raw = sweep_config_from_values("s1", base, "lam: [0.0, 1.0]\nlr: [0.001]", "rehearsal_fidelity", "max", 1.0)
    assert raw["grid"] == {"lam": [0.0, 1.0], "lr": [0.001]}
    with pytest.raises(ConfigError, match="grid"):
        sweep_config_from_values("s1", base, "lam: 0.5", "rehearsal_fidelity", "max", 1.0)
    with pytest.raises(ConfigError, match="lamda"):
        sweep_config_from_values("s1", base, "lamda: [0.5]", "rehearsal_fidelity", "max", 1.0)
    import os

    assert process_alive(os.getpid(), time.time())
    assert not process_alive(os.getpid(), 0.0)  # a pid that started after the run last wrote: recycled
    assert not process_alive(None, None)


def test_the_alignment_chart_draws_each_role_against_zero() -> None:
    from workbench.train.charts import alignment_figure

    frame = pd.DataFrame({"step": [1, 2, 3], "pg_align_act": [0.1, None, -0.05], "pg_align_rehearse": [0.2, 0.3, 0.1]})
    figure = alignment_figure(frame)
    traces = {trace.name: trace for trace in figure.data}
    assert list(traces["act"].x) == [1, 3] and list(traces["rehearse"].y) == [0.2, 0.3, 0.1]
    assert figure.layout.shapes[0].y0 == 0.0
    assert alignment_figure(pd.DataFrame({"step": [1]})).data == ()


@pytest.mark.integration
def test_a_run_launched_from_the_form_trains_in_the_background(empty_root: Path) -> None:
    at = open_page()
    at.text_input(key="tr_new_run").input("from-form")
    at.number_input(key="tr_steps").set_value(2)
    at.number_input(key="tr_batch").set_value(1)
    at.number_input(key="tr_probe_n").set_value(2)
    at.number_input(key="tr_probe_every").set_value(0)
    no_exception(at.button[[b.label for b in at.button].index("Launch")].click().run())
    assert any("Started run" in str(s.value) and "envace train" in str(s.value) for s in at.success), \
        [e.value for e in at.error]
    folder = empty_root / "runs" / "envace" / "from-form"
    deadline = time.monotonic() + 400
    state = None
    while time.monotonic() < deadline:
        status = folder / "status.json"
        state = json.loads(status.read_text())["state"] if status.is_file() else None
        if state in ("done", "failed"):
            break
        time.sleep(0.5)
    log = (empty_root / "runs/envace/.launch/from-form.log")
    assert state == "done", log.read_text()[-2000:] if log.is_file() else "no log"
    at = no_exception(at.run())
    assert at.selectbox(key="tr_run").value == "from-form"
    assert "from-form · joint · done 2/2" in at.selectbox(key="tr_run").options
    table = next(df.value for df in at.dataframe if "act_loss_first" in df.value.columns)
    assert isinstance(table, pd.DataFrame) and table.iloc[0]["steps"] == 2
    config = json.loads((empty_root / "runs/envace/.launch/from-form.json").read_text())
    assert config["out"] == str(folder.resolve()) and config["steps"] == 2


@pytest.mark.integration
def test_a_checkpoint_is_evaluated_from_the_page_with_and_without_rehearsal(with_runs: Path) -> None:
    at = open_page()
    no_exception(at.selectbox(key="tr_run").set_value("tiny-joint").run())
    at.number_input(key="tr_eval_k_tiny-joint").set_value(1)
    at.number_input(key="tr_eval_tasks_tiny-joint").set_value(1)
    at.number_input(key="tr_eval_steps_tiny-joint").set_value(2)
    no_exception(at.button[[b.label for b in at.button].index("Evaluate")].click().run())
    assert any("envace eval" in str(s.value) and "--rehearse 1" in str(s.value) for s in at.success), \
        [e.value for e in at.error]
    report = with_runs / "runs/envace/tiny-joint/evals/bfcl-k1-n0-step-3/report.json"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not report.is_file():
        time.sleep(0.5)
    log = with_runs / "runs/envace/.launch/eval-tiny-joint.log"
    assert report.is_file(), log.read_text()[-2000:] if log.is_file() else "no log"
    at = no_exception(at.run())
    table = next(df.value for df in at.dataframe if "method" in df.value.columns and "success" in df.value.columns)
    assert list(table["method"]) == ["k1", "plain", "k1 vs plain"]
    assert json.loads(report.read_text())["tasks"] == ["multi_turn_base_0"]  # base_1 was trained on: left out


def test_a_sweep_is_launched_from_the_form_over_a_runs_config(with_runs: Path) -> None:
    import os
    import signal

    from workbench.train.jobs import job_record
    from worldsmith.envace.sweep import SweepConfig

    at = open_page()
    at.text_input(key="tr_sweep_name").input("lam-sweep")
    at.selectbox(key="tr_sweep_base").set_value("tiny-joint")
    at.text_area(key="tr_sweep_grid").input("lam: [0.0, 1.0]\nsteps: [1]")
    no_exception(at.button[[b.label for b in at.button].index("Launch sweep")].click().run())
    job = job_record(with_runs, "sweep-lam-sweep")
    assert job is not None and job.kind == "sweep"
    try:
        assert any("Started sweep" in str(s.value) and "envace sweep" in str(s.value) for s in at.success)
        config = SweepConfig.from_file(with_runs / "runs/envace/.launch/sweep-lam-sweep.yaml")
        assert config.grid == {"lam": [0.0, 1.0], "steps": [1]}
        base = config.base_config()
        assert base.workspace == str(with_runs.resolve()) and base.out is None  # each trial gets its own folder
        assert job.command[job.command.index("--out") + 1] == str(with_runs / "runs/envace/sweeps/lam-sweep")
    finally:
        try:
            os.killpg(job.pid, signal.SIGTERM)  # the sweep this test started (its own session)
        except ProcessLookupError:
            pass


def test_a_launch_that_dies_at_once_is_listed_with_its_reason_in_the_open(empty_root: Path) -> None:
    import sys

    from workbench.train.form import config_from_values
    from workbench.train.jobs import job_record, launch, write_launch_config

    write_launch_config(empty_root, "dies", config_from_values({"paths": str(BFCL), "steps": 2}, empty_root))
    launch(empty_root, "dies", [sys.executable, "-c",
                                "import sys; print('boom, the trainer could not start', file=sys.stderr); sys.exit(2)"])
    deadline = time.monotonic() + 60
    while (job := job_record(empty_root, "dies")) is None or job.alive:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    at = open_page()
    assert at.selectbox(key="tr_run").value == "dies"  # listed though it never wrote a run folder
    errors = [str(e.value) for e in at.error]
    assert any("ended (exit code 2) before training" in e and "boom, the trainer could not start" in e
               for e in errors), errors
    assert not any(e.label == "Launch log" for e in at.expander)  # the reason is not tucked away
