"""The Collect page's Explore mode: rounds of real steps, the book rebuilt and scored between them.

The same library call as `worldsmith explore` (`worldsmith.evals.explore.explore`); the curve and each round's
new rules are read back from the run folder, so they stay on the page after a rerun and for a run the CLI made.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st
from pydantic import ValidationError

from workbench.common.links import rule_query, turn_query
from workbench.common.paths import page_file
from workbench.common.provenance import provenance_caption
from workbench.common.ray_option import render_ray_option
from workbench.common.text import md_code, md_escape
from worldsmith.envs import EnvError, spec
from worldsmith.evals import (
    STRATEGIES,
    ExploreConfig,
    ExploreProgress,
    ExploreReport,
    HeldOut,
    explore,
    load_explore_report,
    plots,
)
from worldsmith.llm import provenance
from worldsmith.workspace import Workspace, validate_dataset_name

__all__ = ["render_explore", "render_explore_report"]

_STRATEGY_HELP = ("explore: the exploring policy (the book's uncertainty mixed with the expert); expert; random: "
                  "uniform over the same candidates (admissible actions, or the probing policy's calls on a tool "
                  "API); mix: the expert with probability 'explore weight', else random")


def _heldout(workspace: Workspace, dataset: str | None, split: str) -> HeldOut | None:
    if not dataset:
        return None
    if split != "(every episode)":
        return HeldOut(dataset=dataset, split=split)
    ids = tuple(e.id for e in workspace.dataset(dataset).iter_episodes() if e.turns)
    if not ids:
        raise ValueError(f"dataset {dataset!r} has no episodes with turns to hold out")
    return HeldOut(dataset=dataset, episodes=ids)


def render_explore(workspace: Workspace, env: str, tasks: list[str], env_kwargs: dict[str, Any] | None = None) -> None:
    """The form, the live progress of a run, and the run's curve and rules (`env_kwargs`: the environment's
    constructor arguments, e.g. the MCP server of `mcp`)."""
    left, middle, right = st.columns(3)
    book = left.text_input("Book (each round saves a version)", value=f"{env}-explore", key="co_ex_book")
    budget = middle.number_input("Budget (real steps)", min_value=1, value=40, key="co_ex_budget")
    rounds = right.number_input("Rounds", min_value=1, value=4, key="co_ex_rounds")
    left, middle, right = st.columns(3)
    strategy = left.selectbox("Strategy", STRATEGIES, key="co_ex_strategy", help=_STRATEGY_HELP)
    weight = middle.number_input("Explore weight", min_value=0.0, max_value=1.0, value=0.5, step=0.1,
                                 key="co_ex_weight", help="explore: how often the exploring policy leaves the "
                                 "expert; mix: the share of expert actions")
    seed = right.number_input("Seed", min_value=0, value=0, key="co_ex_seed")
    left, middle, right = st.columns(3)
    max_steps = left.number_input("Step cap", min_value=1, value=spec(env).max_steps, key="co_ex_max_steps")
    datasets = workspace.list_datasets()
    held_dataset = middle.selectbox("Held-out dataset", datasets, index=None, key="co_ex_heldout",
                                    help="Unseen tasks recorded once (e.g. by Collect); none: no curve")
    splits = ["(every episode)"] + (workspace.dataset(held_dataset).splits() if held_dataset else [])
    held_split = right.selectbox("Held-out split", splits, key="co_ex_split")
    schedule = st.text_input("Explore weight per round (optional)", key="co_ex_schedule", placeholder="1.0, 0.75, 0.5",
                             help="One weight per round, the last one repeating: explore more while the book is small")
    ray_address = render_ray_option("co_ex_ray")
    dataset = st.text_input("Dataset", value=f"explore-{env}-{strategy}", key="co_ex_dataset")

    if st.button("Explore", type="primary", icon=":material/explore:", key="co_ex_run"):
        try:
            validate_dataset_name(dataset)
            weights = [float(w) for w in schedule.replace(",", " ").split()] or None
            config = ExploreConfig(env=env, budget=int(budget), rounds=int(rounds), strategy=strategy,
                                   tasks=tasks or None, seed=int(seed), max_steps=int(max_steps), explore=float(weight),
                                   book=book.strip() or None, heldout=_heldout(workspace, held_dataset, held_split),
                                   explore_schedule=weights, ray_address=ray_address, env_kwargs=env_kwargs or {})
        except ValidationError as error:
            st.error(md_escape("; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}"
                                         for e in error.errors())))
            st.stop()
        except ValueError as error:
            st.error(md_escape(error))
            st.stop()
        bar = st.progress(0.0, text="Starting the environment…")
        log = st.empty()
        finished: list[dict[str, Any]] = []

        def show(event: ExploreProgress) -> None:
            bar.progress(min(1.0, event.steps / event.budget),
                         text=md_escape(f"{event.steps}/{event.budget} real steps: {event.what}"))
            if event.finished is not None:
                r = event.finished
                finished.append({"round": r.round, "steps": r.total_steps, "episodes": r.episodes, "rules": r.rules,
                                 "new or changed rules": len(r.new_rules), "held-out exact match": r.exact_match})
                log.dataframe(pd.DataFrame(finished), hide_index=True, use_container_width=True)

        try:
            explore(workspace, dataset, config, progress=show)
        except (EnvError, ValueError, OSError, RuntimeError) as error:  # ConnectionError: no Ray at the address
            st.error(f"Exploration failed: {md_escape(error)}", icon=":material/error:")
            st.stop()
        st.session_state["co_ex_last"] = dataset
    shown = st.session_state.get("co_ex_last")
    if shown:
        report = load_explore_report(workspace.root, shown)
        if report is not None:
            render_explore_report(report)


def render_explore_report(report: ExploreReport) -> None:
    """The curve (held-out exact match against real steps) and each round's new rules with their turns."""
    config = report.config
    st.success(f"{md_code(config.env)} ({md_escape(config.strategy)}): {md_escape(report.steps)} of "
               f"{md_escape(config.budget)} real steps in {md_escape(len(report.rounds))} of "
               f"{md_escape(config.rounds)} rounds → dataset {md_code(report.dataset)}, book {md_code(report.book)}",
               icon=":material/check_circle:")
    skipped = report.skipped_tasks
    if skipped:
        st.warning(f"Skipped {len(skipped)} task(s) that could not load; their budget went to the others:\n\n"
                   + "\n".join(f"- {md_code(task)}: {md_escape(why)}" for task, why in skipped.items()),
                   icon=":material/warning:")
    scored = [r for r in report.rounds if r.exact_match is not None]
    if scored:
        points = [plots.Point(series=config.strategy, x=r.total_steps, mean=r.exact_match or 0.0, low=r.low,
                              high=r.high) for r in scored]
        held = config.heldout.label() if config.heldout else ""
        st.plotly_chart(plots.lines_chart(points, title=f"Held-out next-observation exact match ({held})",
                                    x_label="real steps spent", y_label="exact match"), key="co_ex_curve")
    else:
        st.caption("No held-out set: the rounds are not scored.")
    st.dataframe(pd.DataFrame([{"round": r.round, "steps": r.total_steps, "episodes": r.episodes, "turns": r.turns,
                                "rules": r.rules, "supported": r.supported_rules, "version": r.version,
                                "exact match": r.exact_match, "low": r.low, "high": r.high} for r in report.rounds]),
                 hide_index=True, use_container_width=True)
    if scored and config.heldout is not None:
        last = scored[-1]
        provenance_caption([provenance.NumberProvenance(
            method="harness", model="none", dataset=config.heldout.dataset, split=config.heldout.selection(),
            protocol="teacher forced (next-obs)", n=last.heldout_turns, unit="turns", episodes=last.heldout_episodes,
            run=f"{report.book}@{last.version} (explore run {report.run_dir})")])
    for round_ in report.rounds:
        with st.expander(md_escape(f"Round {round_.round}: {len(round_.new_rules)} new or changed rules"),
                         icon=":material/rule:"):
            for index, change in enumerate(round_.new_rules[:30]):
                left, right = st.columns([2, 3])
                left.page_link(page_file("worldbook"), label=md_escape(f"{change.kind}: {change.id}"),
                               icon=":material/menu_book:", query_params=rule_query(report.book, change.id))
                left.caption(f"{md_escape(change.action)}, {md_escape(change.status)}")
                for turn in change.turns[:3]:
                    right.page_link(page_file("traces"), label=md_escape(turn), icon=":material/link:",
                                    query_params=turn_query(report.dataset, turn))
                if index >= 29 and len(round_.new_rules) > 30:
                    st.caption(f"…and {len(round_.new_rules) - 30} more (worldsmith explore --json lists them all)")
