"""Models: the configured backends, a test prompt, counters per run, and the call log with search.

Every call made through `worldsmith.llm.open_llm` (worldbook builds, the harness, evaluations,
this page) lands in `<workspace>/llm/calls.sqlite`; this page reads it a page at a time.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from workbench.common import data
from workbench.common.page_state import PageState, keep
from workbench.common.text import md_code, md_escape
from worldsmith.llm import LLMError, catalog, configured_models

PAGE_SIZE = 20

root = Path(data.workspace_root())
keep(PageState({"mo_model": str, "mo_spec": str, "mo_system": str, "mo_max_tokens": int, "mo_temperature": float,
                "mo_seed": int, "mo_log_run": str, "mo_log_search": str, "mo_log_page": int}))  # Back, reload, sidebar
st.title("Models", anchor=False)
st.markdown("Model backends behind one interface. Every call is cached (reruns are free) and logged with "
            "the component that asked.")

try:
    models = configured_models(root)
except ValueError as error:  # a broken models.toml: say where, keep the page usable
    st.error(md_escape(error), icon=":material/error:")
    models = {}
if models:
    st.dataframe(pd.DataFrame(catalog.model_rows(models)), hide_index=True, use_container_width=True)
st.caption(f"Add models in {md_code(root / 'models.toml')} (`[models.NAME]` with `spec = \"openai:MODEL@URL\"`), "
           "or set `WORLDSMITH_MODEL`.")
with st.expander("Backends (spec prefixes)", icon=":material/extension:"):
    st.dataframe(pd.DataFrame(catalog.backend_rows()).rename(columns={"available": "ready"}),
                 hide_index=True, use_container_width=True, key="mo_backends")

with st.form("mo_try"):
    st.subheader("Try a prompt", anchor=False)
    left, right = st.columns([2, 1])
    choice = left.selectbox("Model", list(models), key="mo_model", index=0 if models else None)
    typed = right.text_input("…or a spec", key="mo_spec", placeholder="openai:MODEL@http://127.0.0.1:8000/v1")
    system = st.text_input("System message", key="mo_system")
    prompt = st.text_area("Prompt", key="mo_prompt", value="You are in a kitchen. > open fridge")
    columns = st.columns(3)
    max_tokens = columns[0].number_input("Max tokens", 1, 4096, 64, key="mo_max_tokens")
    temperature = columns[1].number_input("Temperature", 0.0, 2.0, 0.0, step=0.1, key="mo_temperature")
    seed = columns[2].number_input("Seed", 0, 2**31 - 1, 0, key="mo_seed")
    sent = st.form_submit_button("Send", icon=":material/send:")
if sent:
    spec = typed.strip() or (models[choice].text if choice else "")
    if not spec or not prompt.strip():
        st.error("Choose a model (or type a spec) and write a prompt.")
    else:
        try:
            with st.spinner(f"Asking {md_escape(spec)}…"):
                [completion] = catalog.chat_once(spec, root, prompt, system=system, component="workbench",
                                         run=st.session_state.setdefault("mo_run", catalog.workbench_run_id()),
                                         max_tokens=int(max_tokens), temperature=float(temperature),
                                         seed=int(seed)).completions
        except (LLMError, ValueError, OSError) as error:
            st.error(md_escape(f"{type(error).__name__}: {error}"), icon=":material/error:")
        else:
            st.code(completion.text or "(empty)", language=None, wrap_lines=True)
            st.caption(f"{completion.prompt_tokens:d} prompt + {completion.completion_tokens:d} completion tokens · "
                       f"{completion.cached_tokens:d} cached · "
                       + ("from the response cache" if completion.cached else f"{completion.latency_s:.2f} s")
                       + f" · finish: {md_escape(completion.finish_reason)}")

log = catalog.open_call_log(root)
if log is None:
    st.info("No model calls logged in this workspace yet.", icon=":material/info:")
    st.stop()
st.subheader("Runs", anchor=False)
runs = log.runs()
st.dataframe(pd.DataFrame(catalog.run_rows(runs)), hide_index=True, use_container_width=True)

st.subheader("Call log", anchor=False)
left, middle, right = st.columns([2, 2, 1])
run = left.selectbox("Run", [r["run"] for r in runs], index=None, placeholder="all runs", key="mo_log_run")
search = middle.text_input("Search prompts and outputs", key="mo_log_search")
page = right.number_input("Page", min_value=1, value=1, key="mo_log_page")
calls = log.calls(run=run, search=search or None, limit=PAGE_SIZE, offset=(int(page) - 1) * PAGE_SIZE)
if not calls:
    st.caption("No calls match.")
for call in calls:
    prompt_text = catalog.call_prompt(call)
    label = (f"#{call.id:d} · {md_escape(call.component)} · {md_escape(call.spec)} · "
             + ("cache" if call.from_cache else f"{call.latency_s:.2f}s") + f" · {md_escape(prompt_text[:80])}")
    with st.expander(label, icon=":material/error:" if call.error else ":material/chat:"):
        for message in call.messages:
            st.markdown(f"**{md_escape(message.get('role'))}**")
            st.code(message.get("content", ""), language=None, wrap_lines=True)
        st.markdown("**output**")
        st.code(call.error or call.output_text or "(empty)", language=None, wrap_lines=True)
        st.caption(f"{md_escape(call.prompt_tokens)} prompt + {md_escape(call.completion_tokens)} completion tokens, "
                   f"{md_escape(call.cached_tokens)} cached; params {md_escape(call.params)}")
