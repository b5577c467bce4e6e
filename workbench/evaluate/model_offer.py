"""Which model answers a dataset's model-backed methods, and the offer to train the dataset's own one.

The bundled tiny model learnt from text games; scored on another kind of data (a tool API) it is a strawman.
Where the dataset has a train split and no model of its own (`worldsmith.llm.indomain`), the Launch form says so
and offers `worldsmith llm train-tiny --dataset D --split train` as a background job, its progress polled here;
once that model exists it is the default of the form's model spec for this dataset.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from workbench.common.text import md_code, md_escape
from worldsmith.llm import indomain
from worldsmith.util import WorldsmithError

__all__ = ["default_model", "model_backed", "render_model_offer"]


def model_backed(methods: list[str]) -> list[str]:
    """The methods among `methods` that cannot run without a model."""
    from worldsmith.sim import needs_llm

    return [method for method in methods if needs_llm(method)]


def default_model(root: Path, dataset: str, split: str | None) -> indomain.ModelChoice | None:
    """The model a run of `dataset` uses when the form names none (what `worldsmith eval` picks too)."""
    try:
        return indomain.model_for_dataset(root, dataset, split=split)
    except (WorldsmithError, LookupError, OSError, ValueError):
        return None


def _train_button(root: Path, dataset: str) -> None:
    if st.button(f"Train {md_escape(indomain.in_domain_name(dataset))} on {md_escape(dataset)}'s train split",
                 key="ev_train_tiny",
                 icon=":material/model_training:",
                 help="Runs `worldsmith llm train-tiny --dataset D --split train` in the background (CPU, at most "
                      "10 minutes); the model lands in <workspace>/models/tiny-<dataset> and becomes this dataset's "
                      "default model."):
        try:
            job = indomain.start_training(root, dataset)
        except (WorldsmithError, OSError, ValueError) as error:
            st.error(f"Could not start training: {md_escape(error)}", icon=":material/error:")
            return
        st.session_state["ev_train_notice"] = f"Training started (pid {job.pid:d})."
        st.rerun()


def _render_training(root: Path, dataset: str) -> bool:
    """The last training job of the dataset's model; True while it runs (polled every 2 s)."""
    status = indomain.training_status(root, dataset)
    if status is None:
        return False
    running = status.state == "running"

    @st.fragment(run_every=2.0 if running else None)
    def _panel() -> None:
        current = indomain.training_status(root, dataset)
        if current is None:
            return
        name = md_code(indomain.in_domain_name(dataset))
        if current.state == "running":
            steps = f"step {current.step:d}/{current.steps:d}" if current.steps else "preparing the data"
            loss = f", loss {current.loss:.3f}" if current.loss is not None else ""
            st.progress(current.fraction, text=f"training {name}: {steps}{loss} · {current.elapsed_s:.0f}s")
        elif current.state == "failed":
            st.error(f"Training {name} failed: {md_escape(current.error or '(no output)')}", icon=":material/error:")
        if running and current.state != "running":
            st.rerun()  # it just ended: the form's default model changes

    _panel()
    return running


def render_model_offer(root: Path, dataset: str, split: str | None, methods: list[str]) -> None:
    """Above the Launch form, once model-backed methods are chosen: the model they get by default and what it learnt
    from; the bundled one with a warning and, where the dataset has a train split, the button that trains its own.
    A training job of the dataset's model shows its progress whatever the methods."""
    if "ev_train_notice" in st.session_state:
        st.success(st.session_state.pop("ev_train_notice"), icon=":material/model_training:")
    training = _render_training(root, dataset)
    if not model_backed(methods):
        return
    choice = default_model(root, dataset, split)
    if choice is None:
        st.caption("Model-backed methods (direct, trace_rag, ...) need a model spec: no default model here.")
        return
    said = (f"Model-backed methods on {md_code(dataset)} use {md_code(choice.spec)} unless a model spec is given "
            f"below: trained on {md_escape(choice.trained_on_label)}.")
    if choice.source != "bundled":
        (st.warning if choice.warning else st.caption)(
            said + (f" {md_escape(choice.warning)}" if choice.warning else ""))
        return
    if choice.offer is None:
        st.warning(f"{said} It was not trained on this data; this dataset has no train split to train one on "
                   f"(`worldsmith split --dataset {md_escape(dataset)} --ratios train=0.8,test=0.2`).",
                   icon=":material/warning:")
        return
    st.warning(f"{said} It was not trained on this data, so model-backed scores here are a weak baseline. "
               f"{md_code(dataset)} has a train split: train its own tiny model on it ({md_code(choice.offer)}).",
               icon=":material/warning:")
    if not training:
        _train_button(root, dataset)
