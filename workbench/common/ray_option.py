"""The "Run on Ray" option of the launch forms (Collect, Evaluate): off, a local Ray, or a cluster address.

What it returns is what `CollectConfig.ray_address` / `EvalConfig.ray_address` and `--ray` take.
"""

from __future__ import annotations

import streamlit as st

from worldsmith.util import LOCAL_RAY

__all__ = ["render_ray_option"]


def render_ray_option(key: str) -> str | None:
    """None (run here), `local` (a Ray on this machine) or the cluster address typed in."""
    left, right = st.columns([1, 2])
    on = left.checkbox("Run on Ray", key=f"{key}_on",
                       help="Each work unit runs as a Ray task; results are still written here. Workers then limits "
                            "the tasks at once.")
    address = right.text_input("Ray address (empty: a local Ray)", key=f"{key}_address",
                               placeholder="ray://head:10001 or head:6379",
                               help="A cluster started with `ray start --head`; every node needs the same worldsmith "
                                    "install and data paths.")
    if not on:
        return None
    return address.strip() or LOCAL_RAY
