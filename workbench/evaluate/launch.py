"""Launching `worldsmith eval` from the page and following its jobs' progress.

The form builds the same command line a terminal would run (shown before it starts); the job
runs detached (`workbench.evaluate.jobs`), so the page can be reloaded or left. Progress is the run's own
progress.json, re-read every few seconds by a fragment while a job is running.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import streamlit as st

from workbench.common import data
from workbench.common.jobs import remaining_s, render_stop_button, seconds_text, was_stopped
from workbench.common.leakage import held_out_split
from workbench.common.page_state import PageState
from workbench.common.ray_option import render_ray_option
from workbench.common.text import md_code, md_escape
from workbench.evaluate.jobs import (
    EvalLaunch,
    JobError,
    JobStatus,
    eval_command,
    launch,
    list_jobs,
    validate_run_name,
)
from workbench.evaluate.model_offer import default_model, model_backed, render_model_offer
from worldsmith.evals import EvalRunStore, RunFileError, envmatch

__all__ = ["BOTH", "LAUNCH_STATE", "PROTOCOLS", "available_methods", "env_match", "held_out_defaults",
           "last_launch_failure", "launch_problems", "live_envs",
           "matched_env", "model_use_problem", "render_jobs", "render_launch_form", "render_no_runs", "spec_problem",
           "workspace_choices"]

BOTH = "drift + next-obs"  # the default: open loop and teacher forced in one run, reported apart
PROTOCOLS = [BOTH, "drift", "next-obs", "w2r", "live"]
POLICIES = ["expert", "probing", "random", "curious", "exploring", "llm"]  # `worldsmith eval --policy`'s choices
NOTICE = "ev_launch_notice"
# The launch form's settings, kept across Back, reload and the sidebar (`workbench.common.page_state`); the run name
# is not (a new one is offered).
LAUNCH_STATE = PageState({"ev_new_book": str, "ev_new_dataset": str, "ev_new_protocol": str, "ev_new_split": str,
                          "ev_new_env": str, "ev_new_methods": list, "ev_new_episodes": int, "ev_new_turns": int,
                          "ev_new_policy": str, "ev_new_llm": str, "ev_new_judge": str, "ev_new_seed": int,
                          "ev_new_folds": int, "ev_new_workers": int, "ev_new_drop_leaked": bool})


def live_envs(match: envmatch.EnvMatch | None) -> list[str]:
    """The registered, installed real environments of the dataset's environments: where live (and W2R) can run."""
    from worldsmith.envs import available, registry
    from worldsmith.workspace import env_family

    names = {env_family(fit.env) for fit in (match.environments if match is not None else []) if fit.env}
    return sorted(name for name in names if name in registry() and available(name))


def available_methods() -> list[str]:
    """The method names `worldsmith eval` accepts: the registered world models."""
    from worldsmith.sim import world_model_names

    return world_model_names()


def model_use_problem(methods: list[str], llm: str | None, *, policy_uses_it: bool = False) -> str | None:
    """Why the chosen methods and model spec do not go together (None when they do): a spec neither a chosen method
    nor the policy (`policy_uses_it`: the llm policy of w2r / live) uses would be silently ignored, and a method that
    needs a model cannot run without one."""
    from worldsmith.sim import needs_llm, takes_llm

    spec = (llm or "").strip()
    if spec and not policy_uses_it and not any(takes_llm(method) for method in methods):
        return ("No chosen method uses the model spec: choose harness+llm (the harness with a model), direct, rag "
                "or worldbook-prompt, or clear the spec.")
    missing = [method for method in methods if needs_llm(method)]
    if missing and not spec:
        return f"{', '.join(missing)} need a model: give a model spec."
    return None


def held_out_defaults(root: Path, book: str | None, datasets: list[str], dataset: str | None = None) -> dict[str, str]:
    """Where `book` can be evaluated honestly: its source dataset (unless `dataset` is chosen), a split it was not
    built from, and the environment of the chosen dataset that is the book's.

    From the book's recorded sources (`worldsmith build` writes them): a book built from split `train` is
    evaluated on `test` (else `validation`) of the same dataset. The environment is the one the source recorded
    when the dataset is the book's source, else the dataset's environment that is the book's by id or, failing
    that, by the actions it calls (`worldsmith.evals.envmatch`); none (every environment) when nothing fits.
    """
    from worldsmith.worldbook import WorldbookError, WorldbookStore

    if not book:
        return {"dataset": dataset} if dataset else {}
    try:
        store = WorldbookStore.of_workspace(root)
        sources = store.info(book, store.head(book)).sources
    except (WorldbookError, KeyError, OSError, ValueError):
        return {"dataset": dataset} if dataset else {}
    source = next((s for s in sources if isinstance(s, dict) and s.get("dataset") in datasets
                   and (dataset is None or s.get("dataset") == dataset)), None)
    out = {"dataset": dataset or (str(source["dataset"]) if source is not None else "")}
    if not out["dataset"]:
        return {}
    if source is not None and source.get("env"):
        out["env"] = str(source["env"])
    else:
        env = matched_env(root, book, out["dataset"])
        if env:
            out["env"] = env
    opened = data.open_dataset(str(root), out["dataset"]) if source is not None and source.get("split") else None
    splits = opened.splits() if opened is not None else []
    held = held_out_split(splits, source.get("split")) if source is not None else None
    if held is not None:
        out["split"] = held
    return out


def matched_env(root: Path, book: str, dataset: str) -> str | None:
    """The environment of `dataset` to evaluate `book` on (`EnvMatch.suggested_env`), None for every one."""
    match = env_match(root, book, dataset)
    return match.suggested_env if match is not None else None


def env_match(root: Path, book: str, dataset: str) -> envmatch.EnvMatch | None:
    """`book` (its head) against `dataset`'s environments, cached per book version and dataset revision."""
    from worldsmith.worldbook import WorldbookError, WorldbookStore

    opened = data.open_dataset(str(root), dataset)
    if opened is None:
        return None
    try:
        version = WorldbookStore.of_workspace(root).head(book)
    except (WorldbookError, OSError, ValueError):
        return None
    return _env_match(str(root), book, version, dataset, opened.revision)


@st.cache_data(show_spinner=False, max_entries=64)
def _env_match(root: str, book: str, version: str, dataset: str, revision: int) -> envmatch.EnvMatch | None:
    from worldsmith.worldbook import WorldbookError, WorldbookStore

    opened = data.open_dataset(root, dataset)
    try:
        loaded = WorldbookStore.of_workspace(root).load(book, version)
    except (WorldbookError, OSError, ValueError):
        return None
    return envmatch.match_dataset(loaded, opened) if opened is not None else None


def spec_problem(spec: str, root: Path) -> str | None:
    """Why a model spec typed in the form would fail at launch (None: empty or fine): a configured name or a
    spec, its relative folder resolved against the workspace exactly as the job will (`llm.resolve_spec`)."""
    from worldsmith.llm import parse_spec, resolve_spec

    if not spec.strip():
        return None
    try:
        parse_spec(resolve_spec(spec.strip(), root))
    except ValueError as error:
        return str(error)
    return None


def render_launch_form(root: Path, books: list[str], datasets: list[str]) -> None:
    """The run's options; on submit, start the job and remember a notice for the next rerun."""
    if not datasets:
        st.info("Launching a run needs a dataset to evaluate on (and a worldbook from `worldsmith build`, or "
                "cross-fitting with folds).", icon=":material/info:")
        return
    methods = available_methods()
    default = [m for m in ("harness", "nearest") if m in methods] or methods[:1]
    # Worldbook and dataset sit outside the form: choosing one reruns the page, so the split and environment
    # below follow the pair chosen (not the first book's), and a hand-typed value is kept until the pair changes.
    left, right = st.columns(2)
    if "ev_new_dataset" not in st.session_state:
        first = held_out_defaults(root, books[0] if books else None, datasets)
        st.session_state["ev_new_dataset"] = first.get("dataset") or datasets[0]
    book = left.selectbox("Worldbook", books, index=0 if books else None, key="ev_new_book",
                          help="Not read when cross-fitting (folds >= 2): each fold builds its own book.")
    dataset = right.selectbox("Dataset", datasets, key="ev_new_dataset")
    defaults = held_out_defaults(root, book, datasets, dataset)
    if st.session_state.get("ev_new_defaults_for") != (book, dataset):
        restored = "ev_new_defaults_for" not in st.session_state and "ev_new_split" in st.session_state
        st.session_state["ev_new_defaults_for"] = (book, dataset)
        if not restored:  # a reload keeps the split and environment its address carries (`LAUNCH_STATE`)
            st.session_state["ev_new_split"] = defaults.get("split", "")
            st.session_state["ev_new_env"] = defaults.get("env", "")
    match = env_match(root, book, dataset) if book and dataset else None
    problem = match.problem() if match is not None else None
    if problem:
        st.warning(md_escape(problem), icon=":material/link_off:")
    render_model_offer(root, dataset, st.session_state.get("ev_new_split") or None,
                       list(st.session_state.get("ev_new_methods") or []))
    with st.container(border=True):  # not a form: every change is checked at once, before Launch
        left, right = st.columns(2)
        st.session_state.setdefault("ev_new_run", f"eval-{time.strftime('%Y%m%dT%H%M%S')}")
        run = left.text_input("Run name", key="ev_new_run")
        real = live_envs(match)
        protocol = right.radio("Protocol", PROTOCOLS, horizontal=True, key="ev_new_protocol",
                               help="drift + next-obs (default): both, reported apart, open loop first. drift (open "
                                    "loop): only the start, then the whole action sequence on the model's own "
                                    "answers, as under an agent; next-obs (teacher forced): real history, one "
                                    "predicted observation per turn; w2r: a policy acts in the simulator and its "
                                    "actions are replayed in the real environment; live: a policy acts in the real "
                                    "environment and the model, open loop, answers the same actions"
                                    + (f" (real environment here: {md_escape(', '.join(real))})" if real else
                                       " (no registered real environment for this dataset)"))
        left, right = st.columns(2)
        split = left.text_input("Split (optional)", key="ev_new_split", placeholder="every split",
                                help="Held-out episodes only: the book must not have been built from them "
                                     "(the run refuses leaked evaluation targets).")
        envs = md_escape(", ".join(fit.label for fit in match.environments)) if match is not None else ""
        env = right.text_input("Environment (optional)", key="ev_new_env", placeholder="every environment",
                               help="Only episodes of this environment id (or family / prefix)"
                                    + (f"; the dataset holds {envs}" if envs else "")
                                    + (f"; the worldbook simulates {md_escape(match.book_env)}" if match and match.book_env
                                       else ""))
        chosen = st.multiselect("Methods", methods, default=default, key="ev_new_methods",
                                help="A method is what it is named: `harness` never uses a model, `harness+llm` is "
                                     "the harness with the model spec's tool loop where rules end (as are the "
                                     "ablations' `+llm` kinds); direct, rag and worldbook-prompt need the model spec. "
                                     "The report lists each method's model.")
        left, middle, right, last = st.columns(4)
        left.caption(f"worldbook {md_code(book or '(none)')} · dataset {md_code(dataset)}")
        max_episodes = middle.number_input("Episodes (0 = all)", min_value=0, value=0, key="ev_new_episodes")
        max_turns = right.number_input("Turns per episode (0 = all)", min_value=0, value=0, key="ev_new_turns")
        policy = last.selectbox("W2R / live policy", POLICIES, key="ev_new_policy")
        left, middle, right, last = st.columns(4)
        llm = left.text_input("Model spec (optional)", key="ev_new_llm",
                              placeholder="the dataset's default (above), or tiny:PATH, hf:PATH, ...",
                              help="Used only by the methods that use a model (harness+llm, direct, ...).")
        judge = middle.text_input("Judge spec (optional)", key="ev_new_judge")
        seed = right.number_input("Seed", min_value=0, value=0, key="ev_new_seed")
        folds = last.number_input("Folds (0 = the worldbook)", min_value=0, value=0, key="ev_new_folds",
                                  help="K >= 2 cross-fits: the episodes are dealt into K folds by trajectory family "
                                       "(as `worldsmith build --folds`), each evaluated with a book built from the "
                                       "others, and the records pooled.")
        workers = st.number_input("Workers (0 = in this process; with Ray: 0 = all CPUs)", min_value=0, max_value=64,
                                  value=0, key="ev_new_workers",
                                  help="Units (episode x method) at once: local processes (>= 2), or Ray tasks.")
        ray_address = render_ray_option("ev_new_ray")
        drop_leaked = st.checkbox("Drop leaked episodes", key="ev_new_drop_leaked",
                                  help="Leave out episodes the book was built from (or copies of their trajectories) "
                                       "and name them in the report, instead of refusing the run.")
        model = None
        if not llm.strip() and model_backed(list(chosen)):  # the dataset's own model, else the bundled one (above)
            model = default_model(root, dataset, split.strip() or None)
            llm = model.spec if model is not None else llm
        problems = launch_problems(root, run=run, chosen=list(chosen), protocol=protocol, real=real, book=book,
                                   folds=int(folds), llm=llm, judge=judge, policy=policy)
        for refusal in problems:
            st.error(refusal, icon=":material/error:")
        submitted = st.button("Launch", type="primary", icon=":material/rocket_launch:", key="ev_launch",
                              disabled=bool(problems), help="correct the settings named above first" if problems
                              else None)
    if not submitted:
        return
    try:
        config = EvalLaunch(run=run, book=None if folds else book, dataset=dataset, methods=list(chosen),
                            protocol=None if protocol == BOTH else protocol,
                            split=split.strip() or None, env=env.strip() or None,
                            max_episodes=int(max_episodes) or None, max_turns=int(max_turns) or None,
                            policy=policy if protocol in ("w2r", "live") else None, llm=llm.strip() or None,
                            judge=judge.strip() or None, seed=int(seed), folds=int(folds),
                            drop_leaked=bool(drop_leaked), workers=int(workers), ray=ray_address)
        command = eval_command(config, root)
        job = launch(root, config.run, command)
    except (JobError, OSError) as error:
        st.error(f"Could not launch the run: {md_escape(error)}", icon=":material/error:")
        return
    st.session_state[NOTICE] = (f"Started run {md_code(job.run)} (pid {job.pid:d}): {md_code(shlex.join(command[1:]))}"
                                + (f" · model trained on {md_escape(model.trained_on_label)}" if model else "")
                                + (f" · {md_escape(model.warning)}" if model and model.warning else ""))
    st.rerun()


def launch_problems(root: Path, *, run: str, chosen: list[str], protocol: str, real: list[str], book: str | None,
                    folds: int, llm: str, judge: str, policy: str) -> list[str]:
    """Why the launch form's settings cannot run, as Markdown lines (empty: they can): checked on every change, so a
    run that would fail on its settings is never started."""
    problems = []
    try:
        validate_run_name(run)
    except JobError as error:
        problems.append(f"Run name: {md_escape(error)}")
    if not chosen:
        problems.append("Choose at least one method.")
    if protocol in ("live", "w2r") and not real:
        problems.append(f"{md_escape(protocol)} needs a real environment: none of this dataset's environments is "
                        "registered and installed (`worldsmith envs list`).")
    if folds == 1 or (not folds and not book):
        problems.append("Choose a worldbook, or cross-fit with at least 2 folds.")
    unused = model_use_problem(chosen, llm, policy_uses_it=policy == "llm" and protocol in ("w2r", "live"))
    if unused:
        problems.append(md_escape(unused))
    for label, spec in (("Model spec", llm), ("Judge spec", judge)):
        problem = spec_problem(spec, root)
        if problem:
            problems.append(f"{md_escape(label)}: {md_escape(problem)}")
    return problems


def _render_job(root: Path, job: JobStatus) -> None:
    try:
        progress = EvalRunStore(root).run(job.run).read_progress()
    except RunFileError as error:
        progress, problem = None, str(error)
    else:
        problem = None
    done, total = (progress.done, progress.total) if progress is not None else (None, None)
    stopped = job.state == "failed" and was_stopped(job.run, job.started, job.returncode)
    label = f"{md_code(job.run)} · {'stopped' if stopped else md_escape(job.state)}"
    if job.state == "running":
        elapsed = f" · {seconds_text(time.time() - job.started)} elapsed"
        left = remaining_s(job.started, done or 0, total or 0)
        label += elapsed + (f" · about {seconds_text(left)} left" if left is not None else "")
    if done is not None and total:
        st.progress(min(1.0, done / total), text=f"{label} · {int(done)}/{int(total)}")
    elif job.state == "running":
        st.progress(0.0, text=f"{label} · starting")
    elif job.state == "finished":
        st.progress(1.0, text=label)
    # a run that failed before any unit shows no bar (a full one would read as done): its error below says why
    if problem:
        st.caption(md_escape(problem))
    if job.state == "running":
        render_stop_button(EvalRunStore(root).jobs, job.run, key=f"ev_stop_{job.run}", what="evaluation run")
    if stopped:
        st.warning(f"Run {md_code(job.run)} was stopped" + (f" after {int(done)}/{int(total)} units" if total else "")
                   + ": it has no report.", icon=":material/stop_circle:")
    elif job.state == "failed":
        st.error(f"Run {md_code(job.run)} failed (exit code {md_escape(job.returncode)}): "
                 f"{md_escape(failure_message(job))}", icon=":material/error:")
    if job.state != "finished" and not stopped and job.log_tail.strip():
        st.caption("log (the end)")
        st.code(job.log_tail, language=None)


def failure_message(job: JobStatus) -> str:
    """The reason a job failed: its JSON error, else the last line of its log."""
    error = (job.result or {}).get("error")
    if isinstance(error, str) and error.strip():
        return error
    lines = job.log_tail.strip().splitlines()
    return lines[-1] if lines else "(no output)"


def last_launch_failure(jobs: list[JobStatus]) -> str | None:
    """Why the latest launch failed, as Markdown naming its run (None when it did not fail, or a newer one runs):
    the message belongs to that run, never to the one running now."""
    latest = jobs[0] if jobs else None
    if latest is None or latest.state != "failed" or was_stopped(latest.run, latest.started, latest.returncode):
        return None
    return f"the launch of {md_code(latest.run)} failed: {md_escape(failure_message(latest))}"


def render_no_runs(jobs: list[JobStatus]) -> None:
    """The notice of a workspace with no evaluation run yet, naming the latest launch's failure if it failed."""
    failed = last_launch_failure(jobs)
    st.info("No evaluation runs in this workspace yet: "
            + (f"{failed}; correct it under Launch and try again." if failed
               else "launch one below or run `worldsmith eval`."), icon=":material/info:")


def render_jobs(root: Path) -> None:
    """Jobs launched here: the newest in the open (live status and log while it runs, its error when it failed),
    older ones in a collapsed list; refreshed every 2 s while one is running."""
    if NOTICE in st.session_state:
        st.success(st.session_state.pop(NOTICE), icon=":material/rocket_launch:")
    jobs = list_jobs(root)
    if not jobs:
        return
    running = any(job.state == "running" for job in jobs)

    @st.fragment(run_every=2.0 if running else None)
    def _panel() -> None:
        current = list_jobs(root)
        if not current:
            return
        _render_job(root, current[0])  # the one just launched: never hidden in a collapsed section
        if len(current) > 1:
            with st.expander(f"Earlier background runs ({len(current) - 1})"):
                for job in current[1:5]:
                    _render_job(root, job)
        if running and not any(job.state == "running" for job in current):
            st.rerun()  # a job just ended: refresh the run list and stop polling

    _panel()


def workspace_choices(root: Path) -> tuple[list[str], list[str]]:
    """(worldbooks, datasets) of the workspace, for the form."""
    from worldsmith.worldbook import WorldbookStore

    return WorldbookStore.of_workspace(root).names(), data.list_datasets(str(root))
