"""The episode view: header, initial observation, and the paginated turn timeline.

Two ways to read it: a transcript (the default), where the user, system and assistant messages
stand in order between the tool calls and their results, as a conversation reads; or cards,
where each turn's messages fold into one "Context" line. A JSON result also shows what changed
since the previous JSON result (fields added, removed, changed).
"""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from workbench.common import data, state
from workbench.common.diff_view import render_diff
from workbench.common.links import turn_link
from workbench.common.text import md_code, md_escape
from worldsmith.traces import ContextEvent, Episode, JsonChange, ObservationDiff, Turn, json_changes, parse_json_text

MAX_CHARS = 20_000
LINKED_KEY = "linked-turn"
VIEW_KEY = "tr_view"
TRANSCRIPT, CARDS = "Transcript", "Cards"
_AVATARS = {"user": ":material/person:", "assistant": ":material/smart_toy:", "system": ":material/settings:",
            "reasoning": ":material/psychology:", "tool": ":material/build:"}

_CSS = """
<style>
.st-key-linked-turn {
  border: 2px solid #f59e0b !important;
  background: rgba(245, 158, 11, 0.07);
  box-shadow: 0 0 0 3px rgba(245, 158, 11, 0.18);
  scroll-margin-top: 5rem;  /* clear of the fixed app header */
}
[class*="st-key-turn-"] [data-testid="stCode"] pre { max-height: 420px; }
</style>
"""

_SCROLL_JS = """
<script>
(function () {
  // Scroll to the linked turn once the page has settled (lazily loaded elements change heights).
  let tries = 0, last = null;
  function go() {
    const el = document.querySelector('.st-key-linked-turn');
    const loading = document.querySelectorAll('[data-testid="stSkeleton"]').length;
    if (el && !loading) {
      el.scrollIntoView({behavior: 'auto', block: 'start'});
      const top = el.getBoundingClientRect().top;
      if (last !== null && Math.abs(top - last) < 2) return;
      last = top;
    }
    if (++tries < 60) setTimeout(go, 250);
  }
  setTimeout(go, 100);
})();
</script>
"""


def _pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _clip(text: str) -> tuple[str, bool]:
    return (text[:MAX_CHARS], True) if len(text) > MAX_CHARS else (text, False)


def show_text(text: str | None, *, data_value: Any = None, label: str | None = None) -> None:
    """Verbatim text: pretty JSON when it parses, otherwise preserved whitespace."""
    if label:
        st.markdown(f"**{md_escape(label)}**")
    if text is None:
        st.caption("(none)")
        return
    if data_value is None:
        data_value = parse_json_text(text)
    if data_value is not None:
        body, clipped = _clip(_pretty_json(data_value))
        st.code(body, language="json", wrap_lines=True)
    else:
        body, clipped = _clip(text)
        if not body.strip():
            st.caption("(empty)" if not body else "(whitespace only)")
        else:
            st.code(body, language=None, wrap_lines=True)
    if clipped:
        st.caption(f"Showing the first {MAX_CHARS:,} of {len(text):,} characters.")


def _fmt_outcome(episode: Episode) -> str:
    parts = []
    if episode.success is not None:
        parts.append("success" if episode.success else "failure")
    if episode.reward is not None:
        parts.append(f"reward {episode.reward:g}")
    return " · ".join(parts) or "unknown"


def render_episode_header(episode: Episode, n_turns: int, *, root: str) -> None:
    """`episode` is the header (without its turns): `n_turns` says whether it is dialogue only."""
    st.subheader(f"Episode {md_escape(episode.id)}", anchor=False)
    cols = st.columns(5)
    cols[0].metric("Environment", md_escape(episode.env_id or "—"))
    cols[1].metric("Task id", md_escape(episode.task_id or "—"))
    cols[2].metric("Turns", n_turns if n_turns else "dialogue only")
    cols[3].metric("Outcome", _fmt_outcome(episode))
    cols[4].metric("Split", md_escape(episode.split or "—"),
                   help=f"family: {md_escape(episode.family)}" if episode.family else None)
    if not n_turns:
        st.info("Dialogue only: the agent called no tool in this conversation; its messages are below. "
                "Building and evaluation leave it out.", icon=":material/forum:")
    if episode.source is not None:
        where = data.display_path(episode.source.path, root)
        if episode.source.line is not None:
            where += f":{episode.source.line}"
        if episode.source.pointer:
            where += f" {episode.source.pointer}"
        st.caption(f"Source: {md_code(where)} ({md_escape(episode.source.format)})")
    if episode.task:
        with st.expander("Task", expanded=len(episode.task) < 600, icon=":material/assignment:"):
            st.text(episode.task)
    if episode.initial_observation is not None:
        with st.expander("Initial observation", expanded=True, icon=":material/visibility:"):
            show_text(episode.initial_observation.text, data_value=episode.initial_observation.data)
    initial_info = getattr(episode, "initial_info", None)
    if initial_info:
        with st.expander("Initial info (at reset)", icon=":material/info:"):
            st.json(initial_info, expanded=1)
    if episode.metadata:
        with st.expander("Metadata", icon=":material/data_object:"):
            st.json(episode.metadata, expanded=1)


def _context_label(events: list[ContextEvent]) -> str:
    roles: dict[str, int] = {}
    for event in events:
        roles[event.role] = roles.get(event.role, 0) + 1
    summary = ", ".join(f"{count:d} {md_escape(role)}" for role, count in roles.items())
    preview = " ".join(events[-1].content.split())
    if len(preview) > 90:
        preview = preview[:90] + "…"
    return f"Context: {summary}" + (f" — {md_escape(preview)}" if preview else "")


def render_context(events: list[ContextEvent], *, expanded: bool = False, label: str | None = None) -> None:
    if not events:
        return
    with st.expander(md_escape(label) if label else _context_label(events), expanded=expanded, icon=":material/forum:"):
        for event in events:
            who = event.role + (f" ({event.name})" if event.name else "")
            st.markdown(f"**{md_escape(who)}**")
            body, clipped = _clip(event.content)
            st.text(body if body else "(empty)")
            if clipped:
                st.caption(f"Showing the first {MAX_CHARS:,} of {len(event.content):,} characters.")


LONG_SYSTEM = 600  # characters: a longer system message is folded into an expander


def render_messages(events: list[ContextEvent]) -> None:
    """Context events as chat messages, in order (the transcript view); their text is shown as plain text, a long
    system prompt folded."""
    for event in events:
        role = event.role if event.role in _AVATARS else "other"
        with st.chat_message(role, avatar=_AVATARS.get(event.role, ":material/chat:")):
            who = event.role + (f" ({event.name})" if event.name else "")
            st.caption(md_escape(who))
            body, clipped = _clip(event.content)
            if event.role == "system" and len(event.content) > LONG_SYSTEM:  # folded: it comes before every episode
                with st.expander(f"System prompt · {len(event.content):,} characters", icon=":material/settings:"):
                    st.text(body)
            else:
                st.text(body if body else "(empty)")
            if clipped:
                st.caption(f"Showing the first {MAX_CHARS:,} of {len(event.content):,} characters.")


def render_json_changes(changes: list[JsonChange], *, label: str, key: str) -> None:
    """An expander with the fields added, removed and changed (`common.diff_view`), or a note that nothing
    changed."""
    diff = ObservationDiff("json", changes=tuple(changes))
    with st.expander(f"{md_escape(label)}: {md_escape(diff.summary())}", icon=":material/difference:"):
        if changes:
            with st.container(key=key):
                render_diff(diff, label=label)
        else:
            st.caption("The same JSON.")


def _ids(value: Any) -> dict[str, Any]:
    """The identifying fields of a JSON result: `id` and every `*_id` holding a string or a number."""
    if not isinstance(value, dict):
        return {}
    return {key: item for key, item in value.items()
            if (key == "id" or key.endswith("_id")) and isinstance(item, (str, int)) and not isinstance(item, bool)}


def comparable(previous: Turn, turn: Turn) -> bool:
    """Whether `turn`'s JSON result is worth diffing against `previous`'s: the same tool, and not two different
    entities (an `id` / `*_id` field both results have, with different values): an order is not compared with a
    user, nor one order with another."""
    before, after = previous.observation.data, turn.observation.data
    if before is None or after is None or previous.action.name != turn.action.name:
        return False
    old, new = _ids(before), _ids(after)
    shared = old.keys() & new.keys()
    return not shared or all(old[key] == new[key] for key in shared)


def _raw_differs(turn: Turn) -> bool:
    raw = turn.action.raw
    if raw is None or not raw.strip():
        return False
    parsed = parse_json_text(raw)
    if parsed is not None:
        return parsed != turn.action.arguments and parsed != {"name": turn.action.name, "arguments": turn.action.arguments}
    return True


def render_turn(turn: Turn, *, dataset: str, root: str, linked: bool, transcript: bool = False,
                previous: Turn | None = None) -> None:
    """One turn; in the transcript its messages come first, as chat messages, then the tool call and result.
    `previous` is the last earlier turn of the same tool: when both results are JSON and of the same entity
    (`comparable`), what changed is shown."""
    key = LINKED_KEY if linked else f"turn-{turn.index}"
    if transcript:
        render_messages(turn.context)
    with st.container(border=True, key=key):
        head = st.columns([5, 1], vertical_alignment="center")
        with head[0]:
            badges = (f"**Turn {turn.index:d}** &nbsp; {md_code(turn.id)} &nbsp; "
                      f":blue-badge[{md_escape(turn.action.name)}]")
            if linked:
                badges += " &nbsp; :orange-badge[:material/link: linked turn]"
            if turn.reward is not None:
                badges += f" &nbsp; :green-badge[reward {turn.reward:g}]"
            if turn.done:
                badges += " &nbsp; :gray-badge[done]"
            st.markdown(badges)
        head[1].button(
            "Link", icon=":material/link:", key=f"tr_link_{turn.id}", type="tertiary",
            help=f"Highlight this turn and put its link in the address bar: {md_escape(turn_link(dataset, turn.id))}",
            on_click=state.link_turn, args=(turn.id,),
        )
        if not transcript:
            render_context(turn.context)
        left, right = st.columns(2)
        with left:
            st.markdown("**Tool call**" if transcript else "**Action**")
            st.code(_pretty_json({"name": turn.action.name, "arguments": turn.action.arguments}),
                    language="json", wrap_lines=True)
            if turn.action.parse_error:
                st.warning(f"Could not parse the action: {md_escape(turn.action.parse_error)}",
                           icon=":material/warning:")
            if turn.action.parse_error or _raw_differs(turn):
                with st.expander("Raw action text", expanded=bool(turn.action.parse_error)):
                    body, _ = _clip(turn.action.raw or "")
                    st.code(body, language=None, wrap_lines=True)
            if turn.action.call_id:
                st.caption(f"call id {md_code(turn.action.call_id)}")
        with right:
            show_text(turn.observation.text, data_value=turn.observation.data,
                      label="Tool result" if transcript else "Observation")
        if previous is not None and comparable(previous, turn):
            render_json_changes(json_changes(previous.observation.data, turn.observation.data),
                                label=f"Changes since turn {previous.index:d}'s result", key=f"tr_changes_{turn.id}")
        if turn.done is not None:
            st.caption("done: true" if turn.done else "done: false")
        if turn.info:
            with st.expander("Info", icon=":material/info:"):
                st.json(turn.info, expanded=2)
        if turn.provenance is not None:
            p = turn.provenance
            where = data.display_path(p.source, root)
            if p.line is not None:
                where += f":{p.line}"
            if p.pointer:
                where += f" {p.pointer}"
            st.caption(f"Provenance: {md_code(where)}" + (f" · hash {md_code(p.content_hash)}" if p.content_hash else ""))


def render_timeline(root: str, dataset: str, revision: int, episode: Episode, n_turns: int) -> None:
    """The turns of an episode, a page at a time, with search and the linked turn highlighted."""
    st.html(_CSS)
    linked = state.linked_turn()
    cols = st.columns([4, 1], vertical_alignment="bottom")
    search = cols[0].text_input(
        "Search turns", key=state.TURN_SEARCH, placeholder="text in the action or observation",
        help="Shows only the turns whose action name, arguments, raw text or observation contain every term "
             '(case-insensitive, also inside words; "a phrase" in quotes): the rule of "Search all turns".',
    ).strip()
    size = cols[1].selectbox("Turns per page", state.TURN_PAGE_SIZES, key=state.TURN_PAGE_SIZE)
    view = st.segmented_control("Read as", [TRANSCRIPT, CARDS], key=VIEW_KEY, default=TRANSCRIPT,
                                help="Transcript: the messages in order between the tool calls and their results. "
                                     "Cards: one card per turn, its messages folded into a Context line.")
    transcript = view != CARDS

    total = data.turn_count(root, dataset, revision, episode.id, search or None)
    if search:
        st.caption(f"{total:d} of {n_turns:d} turns match “{md_escape(search)}”.")
    if total == 0:
        if search or n_turns:  # else dialogue only: the header said so, and its messages follow
            st.info("No turns match." if search else "This episode has no turns.", icon=":material/search_off:")
    else:
        pages = max(1, -(-total // size))
        value = st.session_state.get(state.TURN_PAGE)
        if not isinstance(value, int) or not 1 <= value <= pages:
            st.session_state[state.TURN_PAGE] = min(max(int(value or 1), 1), pages) if isinstance(value, int) else 1
        page = st.session_state[state.TURN_PAGE]
        top = st.container(horizontal=True, vertical_alignment="center")
        offset = (page - 1) * size
        turns = data.turn_page(root, dataset, revision, episode.id, size, offset, search or None)
        with top:
            if pages > 1:
                st.pagination(pages, key=state.TURN_PAGE)
            st.caption(f"Turns {offset + 1:d}–{offset + len(turns):d} of {total:d}")
        if linked and linked.rsplit("#", 1)[0] == episode.id and not any(t.id == linked for t in turns):
            note = st.columns([5, 1], vertical_alignment="center")
            note[0].caption(f"Linked turn {md_code(linked)} is not on this page.")
            note[1].button("Go to it", key="tr_goto_linked", on_click=state.link_turn, args=(linked,))
        before = (data.turn_page(root, dataset, revision, episode.id, min(offset, 50), max(offset - 50, 0),
                                 search or None) if offset else [])
        last: dict[str, Turn] = {t.action.name: t for t in before}  # the last result of each tool before this page
        for turn in turns:
            render_turn(turn, dataset=dataset, root=root, linked=turn.id == linked, transcript=transcript,
                        previous=last.get(turn.action.name))
            last[turn.action.name] = turn
    if episode.final_context and (total == 0 or offset + size >= total):
        if transcript:
            st.caption("After the last result" if n_turns else "Messages")
            render_messages(episode.final_context)
        else:
            render_context(episode.final_context, expanded=not n_turns,
                           label="Final context (after the last observation)" if n_turns else "Messages")
    if linked and st.session_state.get(state.SCROLL_TO_TURN):
        st.session_state[state.SCROLL_TO_TURN] = False
        st.html(_SCROLL_JS, unsafe_allow_javascript=True)
