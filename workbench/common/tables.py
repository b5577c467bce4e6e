"""Tables for values a page would otherwise show as a JSON tree (a configuration, counts, a comparison)."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

__all__ = ["flat_frame"]


def flat_frame(value: Any, prefix: str = "") -> pd.DataFrame:
    """A nested JSON object as a two-column table (dotted field, value as text), instead of a JSON tree."""
    rows: list[dict[str, str]] = []

    def walk(item: Any, path: str) -> None:
        if isinstance(item, dict) and item:
            for key, child in item.items():
                walk(child, f"{path}.{key}" if path else str(key))
        else:
            rows.append({"field": path or "(value)", "value": item if isinstance(item, str) else
                         json.dumps(item, ensure_ascii=False, default=str)})

    walk(value, prefix)
    return pd.DataFrame(rows, columns=["field", "value"])
