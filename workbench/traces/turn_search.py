"""The Traces page's full-text search over every turn of a dataset: ranked hits, each opening its turn.

Served by the dataset's FTS5 index (`worldsmith.workspace.search_turns`), the rule of the episode filter above
(`worldsmith.workspace.textmatch`: every term a case-insensitive substring); hits open the turn the way a
`?turn=` link does (`state.link_turn`). Snippets are trace text: escaped, the match in bold.
"""

from __future__ import annotations

import streamlit as st

from workbench.common import data, state
from workbench.common.text import md_escape

SEARCH_KEY = "tr_turn_fts"
_MARKS = ("\x02", "\x03")  # never in escaped text: where the match starts and ends
_LIMIT = 20


def snippet_markdown(snippet: str) -> str:
    """The snippet as Markdown: every piece escaped, the matched words bold."""
    out = []
    for number, piece in enumerate(snippet.replace(_MARKS[1], _MARKS[0]).split(_MARKS[0])):
        text = md_escape(piece)
        out.append(f"**{text}**" if number % 2 and text.strip() else text)
    return "".join(out)


def render_turn_search(root: str, name: str, revision: int) -> None:
    query = st.text_input("Search all turns", key=SEARCH_KEY, placeholder='text, "a phrase"',
                          help="Turns of every episode whose observation, action name, raw action or arguments "
                               "contain each term (case-insensitive, also inside words); best first.")
    if not (query or "").strip():
        return
    result = data.search_turns(root, name, revision, query.strip(), _LIMIT, _MARKS)
    how = ("index, " + ("best first" if result["ranked"] else "newest first: a very common word")
           if result["used_index"] else "scan: no index of this rule yet, run worldsmith traces index")
    count = len(result["hits"])
    st.caption(f"{count} turns ({how})" + (" — first 20" if count >= _LIMIT else ""))
    for hit in result["hits"]:
        link, text = st.columns([1, 4])
        turn_id = str(hit["turn_id"])
        link.button(md_escape(turn_id), key=f"tr_fts_{turn_id}", on_click=state.link_turn, args=(turn_id,),
                    icon=":material/link:")
        text.markdown(snippet_markdown(str(hit["snippet"])))
