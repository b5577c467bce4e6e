"""The Simulate page's side-by-side view: world models stepped through a real episode, beside its observations.

The stepping, scoring and diffing live in `worldsmith.sim.sidebyside` / `sim.scoring`; this module
only picks what to run and shows a `StepView`. The running `SideBySide` is kept in
`st.session_state` under one key, rebuilt only when what it was built from changes (worldbook
version, episode or opening, methods, mode, model), so stepping survives reruns. Observations
are untrusted: they reach `st.markdown` only through `sim.htmlview`'s escaping. A method whose
model failed is labelled a fallback (its own status, no score as the method), and an episode in
the worldbook's evidence is named as leaked above the columns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from workbench.common import data
from workbench.common.diff_view import render_text_diff
from workbench.common.leakage import held_out_split
from workbench.common.links import rule_query, turn_page_link
from workbench.common.page_state import PageState
from workbench.common.paths import page_file
from workbench.common.provenance import provenance_caption
from workbench.common.text import md_code, md_escape
from workbench.simulate.records import answer_source, render_records, show_long_values
from workbench.traces.timeline import show_text
from worldsmith.llm import LLMError, default_model_spec, open_llm, provenance
from worldsmith.sim import htmlview, needs_llm, sidebyside, world_model_names
from worldsmith.traces import parse_json_text
from worldsmith.workspace import EpisodeFilter, env_family
from worldsmith.worldbook import Worldbook, WorldbookError, WorldbookStore

__all__ = [
    "AT", "apply_simulate_link", "changes_frame", "NEW_EPISODE", "RUNNER", "SIDE_BY_SIDE_STATE", "render_side_by_side",
    "scores_frame"]

DIFF_LEGEND = htmlview.DIFF_LEGEND  # the library's constant legend: Markdown with no outside text
RUNNER = "sbs_runner"  # (config key, sidebyside.SideBySide)
ERROR = "sbs_error"
NOTICE = "sbs_notice"
SHOW = "sbs_show"
NEW_EPISODE = "(new episode: type an opening)"
ANY_ENV = "(any environment)"
ANY_SPLIT = "(every split)"
AT = "sbs_at"  # query parameter: the steps taken, so a reload steps the rebuilt view back to where it was
MODES = {"teacher": "teacher forcing (each step from the real prefix)",
         "open_loop": "open loop (each method carries on from its own predictions)"}


@st.cache_resource(show_spinner="Loading the model…", max_entries=4)
def _llm(spec: str, workspace: str):
    return open_llm(spec, workspace, component="simulate-side-by-side")


@st.cache_resource(show_spinner=False, max_entries=8)
def _book(root: str, name: str, version: str) -> Worldbook:
    return WorldbookStore.of_workspace(root).load(name, version)  # versions are immutable


def scores_frame(history: list[sidebyside.StepView], methods: list[str]) -> pd.DataFrame:
    """One row per step: the action and each method's F1 and edit similarity against the real observation."""
    rows = []
    for view in history:
        row: dict[str, Any] = {"step": view.index, "action": view.action_text, "recorded": view.recorded}
        for name in methods:
            step = view.methods.get(name)
            scored = step.score if step is not None else None
            row[f"{name} status"] = step.status if step is not None else None
            row[f"{name} exact"] = scored.exact if scored else None
            row[f"{name} F1"] = scored.f1 if scored else None
            row[f"{name} edit"] = scored.edit if scored else None
        rows.append(row)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ callbacks (they run before the script)


def _runner() -> sidebyside.SideBySide | None:
    held = st.session_state.get(RUNNER)
    return held[1] if held else None


def _act(what: str) -> None:
    runner, state = _runner(), st.session_state
    if runner is None:
        return
    try:
        if what == "step":
            runner.step()
        elif what == "run":
            taken = runner.run()
            state[NOTICE] = f"{len(taken)} steps taken."
        elif what == "typed":
            typed = (state.get("sbs_action") or "").strip()
            if not typed:
                state[ERROR] = "Type an action first."
                return
            runner.step(typed)
            state["sbs_action"] = ""
        elif what == "reset":
            runner.reset()
            state[NOTICE] = "Back at the opening."
        elif what.startswith("fork:"):
            at_turn = int(state.get(what.removeprefix("fork:")) or 0)
            runner.fork(at_turn)
            state[NOTICE] = f"Forked at turn {at_turn:d}: the steps after it were dropped."
    except (ValueError, LLMError) as error:
        state[ERROR] = md_escape(error)
    state[SHOW] = max(runner.position - 1, 0)


# ------------------------------------------------------------------ links
GOTO = "sbs_goto"
AUDIT_OPEN = "sbs_audit_open"  # the method whose audit a link asked to see open
LINK_PARAMS = ("book", "dataset", "episode", "turn", "method")
# The view's choices, kept across Back, reload and the sidebar (`workbench.common.page_state`); the steps taken are
# the runner's (held in the session) and, for a reload, `AT` in the URL.
SIDE_BY_SIDE_STATE = PageState({"sbs_book": str, "sbs_mode": str, "sbs_dataset": str, "sbs_env": str,
                                "sbs_split": str, "sbs_search": str, "sbs_episode": str, "sbs_methods": list,
                                "sbs_llm": str, "sbs_max_tokens": int})


def apply_simulate_link(books: list[str]) -> None:
    """Follow a link `simulate?dataset=D&episode=E&turn=T[&book=B][&method=M]` once: the side-by-side view on that
    episode, stepped (teacher-forced) up to turn T; with M (a world model), M is the method stepped and its audit
    is open."""
    params = st.query_params
    episode, dataset = params.get("episode"), params.get("dataset")
    link = (params.get("book"), dataset, episode, params.get("turn"), params.get("method"))
    if not episode or not dataset:
        return
    for key in LINK_PARAMS:  # followed: from here on the view's own kept state is the address (a reload keeps it)
        if key in params:
            del params[key]
    params.pop(AT, None)
    st.session_state["sim_view"] = "Side by side"
    if link[0] in books:
        st.session_state["sbs_book"] = link[0]
    method = link[4]
    if method and method in world_model_names():  # the method the link is about: stepped alone, its audit open
        st.session_state["sbs_methods"] = [method]
        st.session_state[AUDIT_OPEN] = method
    else:
        st.session_state.pop(AUDIT_OPEN, None)
    st.session_state["sbs_dataset"] = dataset
    st.session_state["sbs_search"] = episode
    st.session_state["sbs_split"] = ANY_SPLIT  # the linked episode, whichever split holds it
    st.session_state["sbs_episode"] = episode
    st.session_state["sbs_mode"] = "teacher"
    try:
        st.session_state[GOTO] = max(0, int(link[3] or 0))
    except ValueError:
        st.session_state[GOTO] = 0


# ------------------------------------------------------------------ pieces


def _pick_episode(root: str, book: Worldbook, source: dict[str, Any]) -> tuple[Any, str | None, str | None]:
    """(episode or None, opening or None, dataset name or None) as chosen in the widgets. The episodes offered first
    are a held-out split's (`test`, never the split the book was built from): a training episode stays a choice,
    named as leaked above the columns."""
    source_dataset = source.get("dataset")
    datasets = data.list_datasets(root)
    options = [*datasets, NEW_EPISODE]
    preferred = source_dataset if source_dataset in datasets else (datasets[0] if datasets else NEW_EPISODE)
    left, middle, split_column, right = st.columns([1, 1, 1, 2])
    name = left.selectbox("Episode from", options, index=options.index(preferred), key="sbs_dataset")
    if name == NEW_EPISODE:
        opening = st.text_area("Opening observation", key="sbs_opening", height=90)
        return None, opening, None
    dataset = data.open_dataset(root, name)
    if dataset is None:
        st.error(f"Dataset {md_code(name)} is gone.", icon=":material/error:")
        st.stop()
    environments, splits = data.dataset_facets(root, name, dataset.revision)
    env_options = [ANY_ENV, *environments]
    family = env_family(book.env_id)
    preferred_env = next((e for e in environments if e == book.env_id), None) or ANY_ENV
    env = middle.selectbox("Environment", env_options, index=env_options.index(preferred_env), key="sbs_env",
                           help=f"the worldbook simulates {md_escape(book.env_id or 'an unnamed environment')}")
    split_options = [ANY_SPLIT, *splits]
    held = held_out_split(splits, source.get("split") if name == source_dataset else None)
    split = split_column.selectbox("Split", split_options, index=split_options.index(held or ANY_SPLIT),
                                   key="sbs_split", help="a held-out split by default: the worldbook never saw it")
    search = right.text_input("Find an episode (id or task)", key="sbs_search")
    where = EpisodeFilter(env_id=None if env == ANY_ENV else env, search=search.strip() or None,
                          split=None if split == ANY_SPLIT else split)
    page = data.episode_page(root, name, dataset.revision, data.filter_key(where), 500, 0)
    ids = list(page["episode_id"]) if not page.empty else []
    if family and env == ANY_ENV:  # episodes of the worldbook's own environment first
        env_of = dict(zip(page["episode_id"], page["env_id"], strict=True))
        ids.sort(key=lambda episode_id: 0 if env_family(env_of[episode_id]) == family else 1)
    if not ids:
        st.info("No episode matches.", icon=":material/info:")
        st.stop()
    tasks = dict(zip(page["episode_id"], page["task"], strict=True))
    episode_id = st.selectbox("Episode", ids, key="sbs_episode",
                              format_func=lambda i: f"{i} · {tasks.get(i) or ''}"[:160])
    try:
        episode = dataset.episode(episode_id)
    except KeyError as error:
        st.error(md_escape(error), icon=":material/error:")
        st.stop()
    return episode, None, name


def _steps_in_url() -> int:
    try:
        return max(0, int(st.query_params.get(AT) or 0))
    except ValueError:
        return 0


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def changes_frame(changes: list[sidebyside.StateChange]) -> pd.DataFrame:
    """One row per state path changed: the kind of change, and the values before and after in full (JSON text; a
    list's items added and removed)."""
    rows = []
    for change in changes:
        if change.added or change.removed:
            before = " ".join(f"-{_value(v)}" for v in change.removed)
            after = " ".join(f"+{_value(v)}" for v in change.added)
        else:
            before = "" if change.kind == "added" else _value(change.before)
            after = "" if change.kind == "removed" else _value(change.after)
        rows.append({"path": change.path, "change": change.kind, "before": before, "after": after})
    return pd.DataFrame(rows, columns=["path", "change", "before", "after"])


def _state_panel(changes: list[sidebyside.StateChange], state_after: dict[str, Any] | None, key: str) -> None:
    with st.expander(f"State: {len(changes)} change{'s' if len(changes) != 1 else ''}"):
        if changes:
            frame = changes_frame(changes)
            st.dataframe(frame, hide_index=True, key=f"{key}_changes")
            show_long_values(frame.to_dict("records"))
        else:
            st.caption("nothing changed")
        if state_after:
            st.json(state_after, expanded=False)


def _audit_panel(step: sidebyside.MethodStep, book: Worldbook, dataset: str | None, root: str, key: str, *,
                 expanded: bool = False) -> None:
    audit = step.audit
    if audit is None:
        return
    source = answer_source(audit)
    with st.expander(f"Audit: {md_escape(audit.route)}" + (f" · source {md_escape(source)}" if source != audit.route
                                                           else ""), expanded=expanded):
        st.caption(f"answered by {md_code(source)} · outcome {md_code(step.outcome)} · {audit.model_calls:d} model "
                   f"calls · {audit.tokens:d} tokens · {audit.latency_s:.3f} s")
        render_records(audit)
        for rule_id in audit.rules:
            try:
                rule = book.rule(rule_id)
                template = rule.template or ""
            except KeyError:
                template = "(not in this worldbook version)"
            st.page_link(page_file("worldbook"), label=f"rule {md_escape(rule_id)}: {md_escape(template[:80])}",
                         icon=":material/menu_book:",
                         query_params=rule_query(book.name, rule_id))
        if audit.retrieved:
            st.markdown("**Retrieved**")
            revision = None
            if dataset is not None:
                opened = data.open_dataset(root, dataset)
                revision = opened.revision if opened is not None else None
            for item in audit.retrieved:
                item_id = str(item.get("id", ""))
                label = f"{item_id} · {item.get('action_text') or ''}".strip(" ·")
                if revision is not None and "#" in item_id and data.has_turn(root, dataset, revision, item_id):
                    turn_page_link(dataset, item_id, label=label[:120])
                else:
                    st.text(label)
        for note in audit.notes:
            st.text(f"note: {note}")
        rest = {"tool_calls": audit.tool_calls, "conflicts": audit.conflicts,
                "rejected_effects": audit.rejected_effects, "prompt_fit": audit.prompt_fit}
        shown = {key: value for key, value in rest.items() if value}
        if shown:
            st.json(shown, expanded=False)


def _real_column(view: sidebyside.StepView, episode: Any) -> None:
    st.markdown("**real**")
    if view.real is None:
        st.caption("typed action: no real observation")
        return
    if parse_json_text(view.real) is not None:  # JSON: indented as the methods' JSON results are
        show_text(view.real)
    else:
        st.markdown(htmlview.text_html(view.real), unsafe_allow_html=True)
    st.caption("recorded observation")
    if episode is not None and any(turn.state is not None for turn in episode.turns):
        _state_panel(view.real_changes, episode.turns[view.index].state, f"sbs_real_{view.index}")


def _method_column(name: str, step: sidebyside.MethodStep, book: Worldbook, dataset: str | None, root: str, index: int,
                   real: str | None = None) -> None:
    st.markdown(f"**{md_escape(name)}**" + (" · fallback" if step.status == "fallback" else ""))
    if step.error is not None:
        st.error(md_escape(step.error), icon=":material/error:")
        return
    if step.status == "fallback":
        route = step.audit.route.removeprefix("fallback:").replace("_", " ") if step.audit else "a fallback"
        st.warning(f"Fallback: {md_escape(name)}'s model failed ({md_escape(step.fallback_reason or '')}); "
                   f"{md_escape(route)} answered instead. Not scored as {md_escape(name)}.",
                   icon=":material/report:")
    if real is not None and parse_json_text(step.observation) is not None and parse_json_text(real) is not None:
        show_text(step.observation)  # both JSON: the answer indented, then its fields against the real result's
        render_text_diff(real, step.observation, label="against the real result")
    else:
        body = htmlview.diff_html(step.diff) if step.diff is not None else htmlview.text_html(step.observation)
        st.markdown(body, unsafe_allow_html=True)
    if step.status == "fallback" and step.fallback_score is not None:
        fell = step.fallback_score
        st.caption(f"the fallback's own score: exact {fell.exact:.0f} · F1 {fell.f1:.2f} · edit {fell.edit:.2f}")
    elif step.score is not None:
        st.caption(f"score: exact {step.score.exact:.0f} · F1 {step.score.f1:.2f} · edit {step.score.edit:.2f}")
    else:
        st.caption("no real observation to score against")
    _state_panel(step.changes, step.state_after, f"sbs_{name}_{index}")
    _audit_panel(step, book, dataset, root, f"sbs_audit_{name}_{index}",
                 expanded=st.session_state.get(AUDIT_OPEN) == name)


def _controls(runner: sidebyside.SideBySide) -> None:
    columns = st.columns([1, 1, 1, 1, 1])
    columns[0].button("Step", key="sbs_step", on_click=_act, args=("step",), icon=":material/play_arrow:",
                      disabled=runner.done, help="the next recorded action")
    columns[1].button("Step to end", key="sbs_run", on_click=_act, args=("run",), icon=":material/fast_forward:",
                      disabled=runner.done)
    columns[2].button("Reset", key="sbs_reset", on_click=_act, args=("reset",), icon=":material/restart_alt:")
    fork_key = f"sbs_fork_at_{runner.position}"  # a new widget when the bounds change
    columns[3].number_input("Fork at turn", min_value=0, max_value=runner.position, value=runner.position,
                            key=fork_key, label_visibility="collapsed")
    columns[4].button("Fork at turn", key="sbs_fork", on_click=_act, args=(f"fork:{fork_key}",),
                      icon=":material/fork_right:",
                      help="go back to this turn (later steps are dropped) and continue from there")
    typed, go = st.columns([4, 1], vertical_alignment="bottom")
    typed.text_input("Your own action", key="sbs_action", placeholder="a text command or a JSON action object")
    go.button("Step with my action", key="sbs_act", on_click=_act, args=("typed",), icon=":material/keyboard:")


# ------------------------------------------------------------------ the view


def _held_runner(config: tuple, book: Worldbook, methods: list[str], *, llm_spec: str | None, episode: Any,
                 opening: str | None, mode: str, max_tokens: int) -> sidebyside.SideBySide:
    """The session's runner, rebuilt when what it was built from changed, and stepped up to a link's turn (or, in
    a new session, to the steps its address says were taken)."""
    held = st.session_state.get(RUNNER)
    if held is None or held[0] != config:
        try:
            llm = _llm(llm_spec, config[0]) if llm_spec else None
            runner = sidebyside.SideBySide.from_kinds(book, methods, llm=llm, episode=episode, opening=opening,
                                                      mode=mode, max_tokens=max_tokens)
        except (LLMError, ValueError) as error:
            st.error(md_escape(error), icon=":material/error:")
            st.stop()
        st.session_state[RUNNER] = (config, runner)
        st.session_state[SHOW] = 0
        if held is None and GOTO not in st.session_state:  # a new session (a reload): back to the steps taken
            taken = _steps_in_url()
            if taken:
                st.session_state[GOTO] = taken - 1
    runner = st.session_state[RUNNER][1]
    goto = st.session_state.pop(GOTO, None)
    if goto is not None and episode is not None:
        while runner.position <= min(goto, len(episode.turns) - 1) and not runner.done:
            runner.step()
        st.session_state[SHOW] = max(runner.position - 1, 0)
    return runner


def render_side_by_side(root: Path, store: WorldbookStore) -> None:
    """The whole side-by-side view (the page has checked that a worldbook exists)."""
    root_text = str(root)
    names = store.names()
    left, right = st.columns(2)
    book_name = left.selectbox("Worldbook", names, key="sbs_book")
    version = store.head(book_name)
    try:
        book = _book(root_text, book_name, version)
    except WorldbookError as error:
        st.error(md_escape(error), icon=":material/error:")
        st.stop()
    mode = right.radio("Stepping", list(MODES), format_func=MODES.get, key="sbs_mode", horizontal=True)
    sources = store.info(book_name, version).sources
    source = next((s for s in sources if isinstance(s, dict) and s.get("dataset")), {})
    source_dataset = source.get("dataset")
    episode, opening, dataset = _pick_episode(root_text, book, source)

    methods_column, spec_column, tokens_column = st.columns([3, 2, 1])
    methods = methods_column.multiselect("Methods", world_model_names(),
                                         default=sidebyside.default_methods(default_model_spec()), key="sbs_methods",
                                         help="each gets its own column; the real observation is always shown")
    spec = spec_column.text_input("Model spec (direct, rag, worldbook-prompt)", value=default_model_spec() or "", key="sbs_llm")
    max_tokens = int(tokens_column.number_input("Max tokens", min_value=1, max_value=4096, value=64,
                                                key="sbs_max_tokens"))
    if not methods:
        st.info("Choose at least one method.", icon=":material/info:")
        st.stop()
    needs_model = [m for m in methods if needs_llm(m)]
    if needs_model and not spec.strip():
        st.warning(f"{md_escape(', '.join(needs_model))} need a model spec.", icon=":material/warning:")
        st.stop()

    config = (root_text, book_name, version, dataset, episode.id if episode is not None else None, opening,
              tuple(methods), mode, spec.strip() if needs_model else None, max_tokens)
    runner = _held_runner(config, book, methods, llm_spec=spec.strip() if needs_model else None, episode=episode,
                          opening=opening, mode=mode, max_tokens=max_tokens)

    leak = runner.leak_notice()
    if leak:
        st.warning(f"Leaked: {md_escape(leak)}. Choose a held-out episode for honest numbers.",
                   icon=":material/visibility:")
    for key, show in ((ERROR, st.error), (NOTICE, st.success)):
        if st.session_state.get(key):
            show(st.session_state.pop(key))

    with st.expander("Opening observation", expanded=runner.position == 0):
        st.markdown(htmlview.text_html(runner.opening, empty="(no opening observation)"), unsafe_allow_html=True)
        if episode is not None and episode.task:
            st.caption(f"task: {md_escape(episode.task)}")
    total = f" of {len(episode.turns)} recorded" if episode is not None else ""
    state_line = "on the recording" if runner.on_record else (
        f"left the recording at step {runner.diverged_at:d}" if runner.diverged_at is not None else "no recording")
    st.caption(f"{runner.position:d} steps{total} · {md_escape(MODES[runner.mode].split(' (')[0])} · {state_line}")
    _controls(runner)
    if st.query_params.get(AT) != str(runner.position):
        st.query_params[AT] = str(runner.position)

    history = runner.history
    if not history:
        st.caption("Step to see every method beside the real observation.")
        return
    shown = min(int(st.session_state.get(SHOW, len(history) - 1)), len(history) - 1)
    shown = st.selectbox("Show step", list(range(len(history))), index=shown, key=f"sbs_show_{len(history)}",
                         format_func=lambda i: f"{i}: {history[i].action_text}")
    view = history[shown]
    st.markdown(f"**Step {view.index:d}** · `>` {md_code(view.action_text)}"
                + ("" if view.recorded else " · typed"))
    st.caption(DIFF_LEGEND)
    columns = st.columns(len(methods) + 1)
    with columns[0]:
        _real_column(view, episode if view.recorded else None)
    for column, name in zip(columns[1:], methods, strict=True):
        with column:
            _method_column(name, view.methods[name], book, source_dataset or dataset, root_text, view.index, view.real)

    st.markdown("**Per-turn scores**")
    st.dataframe(scores_frame(history, methods), hide_index=True, key="sbs_scores")
    summary = runner.summary()
    st.dataframe(pd.DataFrame([{"method": name, **values} for name, values in summary.items()]), hide_index=True,
                 key="sbs_summary")
    provenance_caption(provenance.NumberProvenance(
        method=name, model=spec.strip() if needs_llm(name) else "none", dataset=dataset,
        split=f"episode {episode.id}" if episode is not None else "typed actions, no recording",
        protocol=MODES[runner.mode].split(" (")[0], n=int(values["steps"]), unit="steps",
        run=f"{book_name}@{version}") for name, values in summary.items())

