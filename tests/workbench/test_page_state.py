"""The one mechanism that keeps a page's choices (`workbench.common.page_state`), under AppTest, and the leak-safe
defaults and job helpers the pages share."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from workbench.common.jobs import remaining_s, seconds_text
from workbench.common.leakage import build_split, held_out_split


def _page() -> None:
    import streamlit as st

    from workbench.common.page_state import PageState, keep

    keep(PageState({"pick": str, "count": int, "many": list}, params={"pick": "chosen"}))
    if st.session_state.get("drawn", True):  # a run that does not draw them: another page, another view
        st.selectbox("Pick", ["a", "b", "c"], key="pick")
        st.number_input("Count", min_value=0, value=0, key="count")
        st.multiselect("Many", ["x", "y", "z"], default=["x"], key="many")


def test_a_value_from_the_address_opens_the_page_and_outlives_a_run_that_does_not_draw_it() -> None:
    at = AppTest.from_function(_page)
    at.query_params["chosen"] = "b"
    at.query_params["count"] = "3"
    at.query_params["many"] = ["y", "z"]
    at.run()
    assert (at.selectbox(key="pick").value, at.number_input(key="count").value) == ("b", 3)
    assert at.multiselect(key="many").value == ["y", "z"]
    at.selectbox(key="pick").set_value("c").run()
    at.run()  # the next run writes the address
    assert at.query_params["chosen"] in ("c", ["c"])
    at.session_state["drawn"] = False
    at.run()  # Streamlit drops the widgets' values here
    at.session_state["drawn"] = True
    at.run()
    assert at.selectbox(key="pick").value == "c", "kept by the session, not reset to the first option"
    assert at.multiselect(key="many").value == ["y", "z"]


def test_a_value_that_is_not_an_option_falls_back_to_the_default() -> None:
    at = AppTest.from_function(_page)
    at.query_params["chosen"] = "nosuch"
    at.query_params["count"] = "many"  # not a number: ignored
    at.run()
    assert not at.exception
    assert (at.selectbox(key="pick").value, at.number_input(key="count").value) == ("a", 0)


def test_leak_safe_defaults_build_on_train_and_look_at_a_split_the_book_never_saw() -> None:
    assert build_split(["test", "train", "validation"]) == "train" and build_split([]) is None
    assert held_out_split(["test", "train", "validation"], "train") == "test"
    assert held_out_split(["test", "train", "validation"], "test") == "validation"
    assert held_out_split(["train"], "train") is None


def test_time_left_is_the_pace_so_far() -> None:
    assert remaining_s(100.0, 1, 4, now=110.0) == 30.0
    assert remaining_s(100.0, 0, 4, now=110.0) is None
    assert (seconds_text(42), seconds_text(150)) == ("42 s", "2.5 min")
