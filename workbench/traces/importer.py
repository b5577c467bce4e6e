"""The import form: drag-and-drop upload, format override, strict mode, redaction, progress, report."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import streamlit as st

from workbench.common import state
from workbench.common.text import md_code, md_escape
from workbench.traces.import_report import ambiguous_files, render_import_report
from worldsmith.traces import IMPORTERS
from worldsmith.workspace import (
    IngestProgress,
    IsolatedIngestError,
    RedactionSettings,
    Workspace,
    ingest_isolated,
    validate_dataset_name,
)

AUTO = "auto-detect"
DEFAULT_DATASET = "uploads"
REDACT_OFF, REDACT_KEEP, REDACT_FORGET = "no", "yes, keep the mapping", "yes, keep no mapping"


def upload_limit_bytes() -> int:
    """The per-file limit: Streamlit's server.maxUploadSize (MB)."""
    try:
        megabytes = int(st.get_option("server.maxUploadSize"))
    except Exception:  # noqa: BLE001 - option missing in odd embeddings
        megabytes = 500
    return megabytes * 1024 * 1024


def dataset_name_error(name: str) -> str | None:
    try:
        validate_dataset_name(name)
    except ValueError as error:
        return str(error)
    return None


def run_import(
    workspace: Workspace,
    uploads: list[tuple[str, bytes]],
    dataset: str,
    *,
    format: str | None = None,
    strict: bool = False,
    env: str | None = None,
    redact: RedactionSettings | None = None,
) -> dict[str, Any]:
    """Store the uploads inside the workspace and ingest them in a separate process under a memory limit
    (`ingest_isolated`: a hostile file can kill that process, never the app), drawing a progress bar; the
    uploaded files are removed afterwards, whatever happened (rejected records are kept in the quarantine file).

    Returns ImportReport.summary(). Raises ValueError for an oversized upload or a bad name, IsolatedIngestError
    when the import's process died.
    """
    limit = upload_limit_bytes()
    paths: list[Path] = []
    try:
        for name, data in uploads:
            paths.append(workspace.save_upload(name, data, limit=limit))
        return _ingest_with_progress(workspace, paths, dataset, format=format, strict=strict, env=env, redact=redact)
    finally:
        for path in paths:  # each upload has a folder of its own
            shutil.rmtree(path.parent, ignore_errors=True)


def _ingest_with_progress(
    workspace: Workspace, paths: list[Path], dataset: str, *, format: str | None, strict: bool, env: str | None,
    redact: RedactionSettings | None,
) -> dict[str, Any]:
    bar = st.progress(0.0, text=f"Importing {len(paths)} file(s) into {md_escape(dataset)}…")

    def on_progress(p: IngestProgress) -> None:
        fraction = p.files_done / p.files_total if p.files_total else 1.0
        current = Path(p.file).name if p.file else "done"
        bar.progress(
            min(max(fraction, 0.0), 1.0),
            text=f"{p.files_done:d}/{p.files_total:d} files · {md_escape(current)} · {p.episodes:d} episodes, "
            f"{p.turns:d} turns, {p.rejected:d} rejected, {p.duplicates:d} duplicates · {p.seconds:.1f} s",
        )

    try:
        return ingest_isolated(
            workspace.root, paths, dataset, format=format, strict=strict, env=env, progress=on_progress,
            redact=redact,
        )
    finally:
        bar.empty()


def render_import_form(workspace: Workspace, *, root: str) -> None:
    """The upload form and the last report (kept in session state across reruns).

    After an import the page reruns with the imported dataset selected and the uploader cleared.
    """
    generation = st.session_state.get(state.UPLOADER_GENERATION, 0)
    files = st.file_uploader(
        "Trace files (drag and drop; JSON, JSONL, text logs, Inspect AI .eval logs, OTLP JSON spans: any supported format)",
        accept_multiple_files=True,
        key=f"tr_uploader_{generation}",
        help="Files are stored inside the workspace (uploads/) under sanitised names, then imported.",
    )
    cols = st.columns([2, 2, 1, 1], vertical_alignment="bottom")
    dataset = (
        cols[0]
        .text_input(
            "Import into dataset",
            value=DEFAULT_DATASET,
            key="tr_import_dataset",
            max_chars=64,
            help="New or existing dataset; imports add to it (duplicate episodes are skipped).",
        )
        .strip()
    )
    fmt = cols[1].selectbox(
        "Format",
        [AUTO, *IMPORTERS],
        key="tr_import_format",
        help="Leave on auto-detect unless detection picks the wrong importer.",
    )
    strict = cols[2].checkbox(
        "Strict",
        key="tr_import_strict",
        help="Commit nothing if any record is rejected.",
    )
    env = st.text_input(
        "Environment id (optional)",
        key="tr_import_env",
        max_chars=128,
        placeholder="for episodes that name none; empty: chat logs get one from their tool set",
    ).strip()
    redaction = st.radio(
        "Redact personal data",
        [REDACT_OFF, REDACT_KEEP, REDACT_FORGET],
        horizontal=True,
        key="tr_import_redact",
        help="Replace e-mail addresses, phone and card numbers and person names by pseudonyms before anything is "
        "stored: the same value gets the same pseudonym everywhere in the dataset, so an entity can still be "
        "followed. The mapping (which turns pseudonyms back into values) is kept apart from the dataset, in "
        "the workspace's redaction/ folder, readable by its owner only; or not kept at all (each import then "
        "draws new pseudonyms). Names are found by rules (fields, greetings, known first names), not by a model.",
    )
    error = dataset_name_error(dataset)
    clicked = cols[3].button(
        "Import",
        type="primary",
        icon=":material/upload:",
        disabled=not files or error is not None,
        key="tr_import_button",
        width="stretch",
    )
    if error and dataset:
        st.error(md_escape(error))

    if clicked and files and error is None:
        try:
            summary = run_import(
                workspace,
                [(f.name, f.getvalue()) for f in files],
                dataset,
                format=None if fmt == AUTO else fmt,
                strict=strict,
                env=env or None,
                redact=None if redaction == REDACT_OFF else RedactionSettings(forget=redaction == REDACT_FORGET),
            )
        except (ValueError, IsolatedIngestError) as exc:
            st.error(md_escape(exc))
        else:
            st.session_state[state.LAST_REPORT] = summary
            st.session_state[state.UPLOADER_GENERATION] = generation + 1  # clears the uploader
            if summary.get("committed"):
                state.select_dataset(dataset)
            st.rerun()

    last = st.session_state.get(state.LAST_REPORT)
    if last:
        head, close = st.columns([6, 1], vertical_alignment="center")
        head.markdown("**Last import**")
        if close.button("Dismiss", key="tr_dismiss_report", icon=":material/close:", type="tertiary"):
            st.session_state[state.LAST_REPORT] = None
            st.rerun()
        render_import_report(last, root=root, key="tr_last_report")
        render_environment_choices(workspace, last)


def candidate_label(candidate: dict[str, Any]) -> str:
    """One environment a file matches, as the choice lists it: its id, the tools shared, the prompt similarity."""
    similarity = candidate.get("prompt_similarity")
    prompt = "no system prompt to compare" if similarity is None else f"system prompt similarity {similarity:.2f}"
    return (f"{candidate['env']} — {candidate['relation']}, {candidate['shared_tools']} of the file's "
            f"{candidate['file_tools']} tools shared; {prompt}")


def render_environment_choices(workspace: Workspace, summary: dict[str, Any]) -> None:
    """For each file of the last import that matches several environments of the workspace: which one it joins
    (its episodes are relabelled from the id it was kept under; `Workspace.relabel`)."""
    for index, file in enumerate(ambiguous_files(summary)):
        own, candidates = file["derived_env"], {c["env"]: c for c in file.get("env_candidates") or []}
        st.warning(f"{md_code(Path(file['path']).name)} matches {len(candidates)} environments of the workspace; "
                   f"its episodes are kept as {md_code(own)} until you choose the one it joins.",
                   icon=":material/help:")
        left, right = st.columns([5, 1], vertical_alignment="bottom")
        chosen = left.selectbox("Join environment", list(candidates), key=f"tr_env_choice_{index}",
                                format_func=lambda env, shown=candidates: candidate_label(shown[env]))
        if right.button("Join", key=f"tr_env_join_{index}", type="primary", width="stretch") and chosen:
            try:
                result = workspace.relabel(summary["dataset"], chosen, only=[own])
            except ValueError as error:
                st.error(md_escape(error))
                continue
            file.update(derived_env=chosen, env_decision="joined",
                        env_reason=f"joined {chosen}: your choice among {', '.join(candidates)} "
                                   f"({result.episodes} episodes relabelled from {own})")
            st.session_state[state.LAST_REPORT] = summary
            st.rerun()
