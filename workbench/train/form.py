"""The Train page's launch forms: one EnvACE run (from fields or a config file) and a Ray Tune sweep.

Fields map onto `EnvACEConfig` (the same model the CLI reads), so a value the trainer would refuse
is refused here, naming the field, before anything starts. Launching writes the config to
`<ws>/runs/envace/.launch/` and starts the CLI in the background (`workbench.train.jobs`).
"""

from __future__ import annotations

import shlex
import tempfile
import time
from pathlib import Path
from typing import Any

import streamlit as st
import yaml

from workbench.common.text import md_code, md_escape
from workbench.train.jobs import (
    LaunchError,
    launch,
    launch_dir,
    sweep_command,
    train_command,
    validate_run_name,
    write_launch_config,
)
from workbench.train.runs import runs_root
from worldsmith.envace import DEFAULT_MODEL, ConfigError, EnvACEConfig, resolve_path
from worldsmith.util import atomic_write_bytes

__all__ = ["FROM_DATA", "NOTICE", "config_from_values", "render_run_form", "render_sweep_form", "sweep_config_from_values"]

NOTICE = "tr_launch_notice"
DEFAULT_DATA = "data_samples/collected/bfcl.jsonl"
FILES = "(JSONL files)"
FROM_DATA = "(the data's environment)"  # data.env follows the episodes' environment id unless one is named


def config_from_values(values: dict[str, Any], workspace: str | Path | None = None) -> EnvACEConfig:
    """An `EnvACEConfig` from the form's flat values; raises ConfigError naming the field. Relative paths resolve
    against `workspace` (else the checkout), as the CLI and the background job resolve them."""
    paths = [str(resolve_path(line.strip(), workspace).resolve()) for line in str(values.get("paths") or "").splitlines()
             if line.strip()]
    dataset = values.get("dataset")
    raw: dict[str, Any] = {
        "model": str(resolve_path(str(values.get("model") or DEFAULT_MODEL), workspace).resolve()),
        "data": {"dataset": dataset if dataset and dataset != FILES else None,
                 "paths": [] if dataset and dataset != FILES else paths,
                 "split": values.get("split") or None,
                 "env": None if values.get("env") in (None, "", FROM_DATA) else values["env"],
                 "max_seq_len": int(values.get("max_seq_len", 512))},
        "objective": values.get("objective", "joint"),
        "lam": float(values.get("lam", 1.0)),
        "lr": float(values.get("lr", 1e-3)),
        "steps": int(values.get("steps", 20)),
        "batch_size": int(values.get("batch_size", 2)),
        "seed": int(values.get("seed", 0)),
        "rollout_source": values.get("rollout_source", "real"),
        "worldbook": values.get("worldbook") or None,
        "checkpoint_every": int(values.get("checkpoint_every", 0)),
        "grpo": {"group_size": int(values.get("group_size", 4)), "clip": float(values.get("clip", 0.2)),
                 "kl_coef": float(values.get("kl_coef", 0.0)), "dr_grpo": bool(values.get("dr_grpo", False)),
                 "train_roles": values.get("train_roles", "both"),
                 "max_new_tokens": int(values.get("max_new_tokens", 48)),
                 "temperature": float(values.get("temperature", 1.0)), "max_steps": int(values.get("max_steps", 6))},
        "probe": {"every": int(values.get("probe_every", 0)), "n_transitions": int(values.get("probe_n", 16)),
                  "threshold": values.get("probe_threshold"),
                  "switch_to_imagined": bool(values.get("switch_to_imagined", False))},
    }
    if values.get("threads"):
        raw["threads"] = int(values["threads"])
    return EnvACEConfig.from_dict(raw, source="the form")


def sweep_config_from_values(name: str, base: dict[str, Any], grid_text: str, metric: str, mode: str,
                             cpus_per_trial: float, evaluate: dict[str, Any] | None = None) -> dict[str, Any]:
    """A sweep config (as `worldsmith envace sweep` reads it) from the form; raises ConfigError naming the problem."""
    from pydantic import ValidationError

    from worldsmith.envace import SweepConfig

    try:
        grid = yaml.safe_load(grid_text) if grid_text.strip() else {}
    except yaml.YAMLError as error:
        raise ConfigError(f"grid: not valid YAML: {error}") from None
    if not isinstance(grid, dict) or not all(isinstance(v, list) and v for v in grid.values()):
        raise ConfigError("grid: a mapping of dotted config fields to non-empty lists, e.g. `lam: [0.0, 1.0]`")
    raw = {"name": validate_run_name(name), "base": base, "grid": grid, "metric": metric, "mode": mode,
           "cpus_per_trial": cpus_per_trial}
    if evaluate:
        raw["evaluate"] = evaluate
    try:
        SweepConfig.model_validate(raw)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise ConfigError(f"sweep config: {problems}") from None
    for point in (dict(zip(grid, values, strict=True)) for values in _corners(grid)):
        EnvACEConfig.from_dict(base, source="sweep base").with_overrides(point)  # a bad field fails here, named
    return raw


def _corners(grid: dict[str, list[Any]]) -> list[tuple[Any, ...]]:
    """The first and last value of every knob together (enough to catch a misspelt field or a bad value)."""
    return [tuple(values[0] for values in grid.values()), tuple(values[-1] for values in grid.values())]


def _start(root: Path, run: str, config: EnvACEConfig) -> None:
    path = write_launch_config(root, run, config)
    out = runs_root(root) / run
    command = train_command(path, out)
    job = launch(root, run, command)
    st.session_state[NOTICE] = (f"Started run {md_code(run)} (pid {job.pid:d}): "
                                f"{md_code(shlex.join(['worldsmith', *command[3:]]))}")
    st.session_state["tr_run"] = run
    st.rerun()


def _from_file(upload: Any, path_text: str, workspace: Path) -> EnvACEConfig:
    if upload is not None:
        suffix = Path(upload.name).suffix or ".yaml"
        with tempfile.TemporaryDirectory() as folder:
            target = Path(folder) / f"uploaded{suffix}"
            target.write_bytes(upload.getvalue())
            return EnvACEConfig.from_file(target)
    if not path_text.strip():
        raise ConfigError("give a config file: upload one or type its path")
    return EnvACEConfig.from_file(resolve_path(path_text.strip(), workspace))


def render_run_form(root: Path, datasets: list[str], books: list[str], envs: list[str]) -> None:
    """A new run from fields or from a config file; launched in the background on submit."""
    source = st.radio("Configure from", ["Form", "Config file"], horizontal=True, key="tr_source")
    run = st.text_input("Run name", value=f"envace-{time.strftime('%Y%m%dT%H%M%S')}", key="tr_new_run",
                        help="A folder under runs/envace. Launching an existing run's name with the same config "
                             "resumes it from its last checkpoint.")
    if source == "Config file":
        with st.form("tr_file_form"):
            upload = st.file_uploader("Config (YAML or JSON)", type=["yaml", "yml", "json"], key="tr_upload")
            path_text = st.text_input("…or its path", key="tr_config_path", placeholder="configs/envace_tiny.yaml")
            submitted = st.form_submit_button("Launch", type="primary", icon=":material/rocket_launch:")
        if submitted:
            try:
                _start(root, validate_run_name(run), _from_file(upload, path_text, root))
            except (ConfigError, LaunchError, OSError) as error:
                st.error(f"Could not launch: {md_escape(error)}", icon=":material/error:")
        return
    data_choices = [FILES, *datasets]
    with st.form("tr_form"):
        left, middle, right = st.columns(3)
        model = left.text_input("Model (local folder or checkpoint)", value=DEFAULT_MODEL, key="tr_model")
        dataset = middle.selectbox("Data", data_choices, key="tr_dataset",
                                   help="A workspace dataset, or the JSONL episode files below")
        split = right.text_input("Split (optional)", key="tr_split", placeholder="train")
        paths = st.text_area("JSONL episode files (one per line; used when Data is JSONL files)", value=DEFAULT_DATA,
                             key="tr_paths", height=68)
        left, middle, right, last = st.columns(4)
        objective = left.radio("Objective", ["joint", "grpo"], horizontal=True, key="tr_objective",
                               help="joint: CE(act) + λ·CE(rehearse); grpo: role-wise GRPO on rollouts")
        lam = middle.number_input("λ (rehearse weight)", min_value=0.0, value=1.0, step=0.1, key="tr_lam")
        lr = right.number_input("Learning rate", min_value=1e-7, value=1e-3, format="%.5f", key="tr_lr")
        steps = last.number_input("Steps", min_value=1, value=20, key="tr_steps")
        left, middle, right, last = st.columns(4)
        batch_size = left.number_input("Batch size", min_value=1, value=2, key="tr_batch")
        seed = middle.number_input("Seed", min_value=0, value=0, key="tr_seed")
        max_seq_len = right.number_input("Max sequence length", min_value=64, value=512, step=64, key="tr_seq")
        threads = last.number_input("CPU threads (0 = default)", min_value=0, value=1, key="tr_threads")
        with st.expander("GRPO and rollouts"):
            left, middle, right, last = st.columns(4)
            env = left.selectbox("Real environment", [FROM_DATA, *envs], key="tr_env",
                                 help="Rollouts, rewards and error answers; by default the environment of the "
                                      "episodes' ids (a dataset of another API is not trained as BFCL)")
            rollout_source = middle.selectbox("Rollout source", ["real", "imagined", "worldbook", "cache"],
                                              key="tr_rollout_source")
            worldbook = right.selectbox("Worldbook (worldbook source)", ["", *books], key="tr_worldbook")
            train_roles = last.selectbox("Train roles", ["both", "act", "rehearse"], key="tr_train_roles")
            left, middle, right, last = st.columns(4)
            group_size = left.number_input("Group size G", min_value=2, value=4, key="tr_group")
            clip = middle.number_input("Clip", min_value=0.01, value=0.2, key="tr_clip")
            kl_coef = right.number_input("KL coefficient", min_value=0.0, value=0.0, key="tr_kl")
            dr_grpo = last.checkbox("Dr.GRPO (no std normalisation)", key="tr_dr")
            left, middle, right = st.columns(3)
            max_new_tokens = left.number_input("Max new tokens", min_value=1, value=48, key="tr_new_tokens")
            temperature = middle.number_input("Temperature", min_value=0.05, value=1.0, key="tr_temperature")
            max_steps = right.number_input("Actions per rollout", min_value=1, value=6, key="tr_rollout_steps")
        with st.expander("Rehearsal probe and checkpoints"):
            left, middle, right, last = st.columns(4)
            probe_every = left.number_input("Probe every (0 = at the end)", min_value=0, value=5, key="tr_probe_every")
            probe_n = middle.number_input("Probe transitions", min_value=1, value=8, key="tr_probe_n")
            threshold = right.number_input("Switch threshold (0 = none)", min_value=0.0, max_value=1.0, value=0.0,
                                           key="tr_threshold")
            switch = last.checkbox("Switch to imagined when passed", key="tr_switch")
            checkpoint_every = st.number_input("Checkpoint every (0 = only the last)", min_value=0, value=0,
                                               key="tr_ckpt_every")
        submitted = st.form_submit_button("Launch", type="primary", icon=":material/rocket_launch:")
    if not submitted:
        return
    values = {
        "model": model, "dataset": dataset, "paths": paths, "split": split.strip() or None, "env": env,
        "objective": objective, "lam": lam, "lr": lr, "steps": steps, "batch_size": batch_size, "seed": seed,
        "max_seq_len": max_seq_len, "threads": threads, "rollout_source": rollout_source, "worldbook": worldbook,
        "train_roles": train_roles, "group_size": group_size, "clip": clip, "kl_coef": kl_coef, "dr_grpo": dr_grpo,
        "max_new_tokens": max_new_tokens, "temperature": temperature, "max_steps": max_steps,
        "probe_every": probe_every, "probe_n": probe_n, "probe_threshold": threshold or None,
        "switch_to_imagined": switch, "checkpoint_every": checkpoint_every,
    }
    try:
        _start(root, validate_run_name(run), config_from_values(values, root))
    except (ConfigError, LaunchError, OSError) as error:
        st.error(f"Could not launch: {md_escape(error)}", icon=":material/error:")


def render_sweep_form(root: Path, bases: dict[str, dict[str, Any]]) -> None:
    """A sweep over a base config (a run's config or a config file) and a grid of knob values."""
    if not bases:
        st.info("A sweep starts from a base config: launch a run first, or give a config file's path.",
                icon=":material/info:")
    with st.form("tr_sweep_form"):
        left, right = st.columns(2)
        name = left.text_input("Sweep name", value=f"sweep-{time.strftime('%Y%m%dT%H%M%S')}", key="tr_sweep_name")
        base_name = right.selectbox("Base config (a run's)", ["", *bases], key="tr_sweep_base")
        base_path = st.text_input("…or a config file", key="tr_sweep_base_path", placeholder="configs/envace_tiny.yaml")
        grid_text = st.text_area("Grid (YAML: dotted field -> values)", value="lam: [0.0, 1.0]\nlr: [0.001, 0.003]",
                                 key="tr_sweep_grid", height=100)
        left, middle, right = st.columns(3)
        metric = left.text_input("Metric", value="rehearsal_fidelity", key="tr_sweep_metric")
        mode = middle.radio("Mode", ["max", "min"], horizontal=True, key="tr_sweep_mode")
        cpus = right.number_input("CPUs per trial", min_value=0.25, value=1.0, step=0.25, key="tr_sweep_cpus")
        left, right = st.columns(2)
        evaluate = left.checkbox("Evaluate each checkpoint in BFCL (plain vs rehearsal.k/n)", key="tr_sweep_eval")
        n_tasks = right.number_input("Evaluation tasks", min_value=1, value=2, key="tr_sweep_tasks")
        submitted = st.form_submit_button("Launch sweep", type="primary", icon=":material/grid_view:")
    if not submitted:
        return
    try:
        if base_path.strip():
            base = EnvACEConfig.from_file(resolve_path(base_path.strip(), root)).to_json()
        elif base_name:
            base = EnvACEConfig.from_dict(bases[base_name], source=f"run {base_name}").to_json()
        else:
            raise ConfigError("choose a base config (a run's, or a config file)")
        base = {key: value for key, value in base.items() if key not in ("out", "name")}
        base["workspace"] = str(root.resolve())
        raw = sweep_config_from_values(name, base, grid_text, metric.strip(), mode, float(cpus),
                                       {"env": "bfcl", "n_tasks": int(n_tasks)} if evaluate else None)
        path = launch_dir(root) / f"sweep-{raw['name']}.yaml"
        atomic_write_bytes(path, yaml.safe_dump(raw, sort_keys=False).encode())
        out = runs_root(root) / "sweeps" / raw["name"]
        command = sweep_command(path, out, ["--workspace", str(root.resolve())])
        job = launch(root, f"sweep-{raw['name']}", command, kind="sweep")
    except (ConfigError, LaunchError, OSError) as error:
        st.error(f"Could not launch the sweep: {md_escape(error)}", icon=":material/error:")
        return
    st.session_state[NOTICE] = (f"Started sweep {md_code(raw['name'])} (pid {job.pid:d}): "
                                f"{md_code(shlex.join(['worldsmith', *command[3:]]))}")
    st.rerun()
