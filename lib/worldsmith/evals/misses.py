"""Why a method missed: an evaluation's wrong predictions grouped by action, by answer source, by rule and by flag.

Every next-observation record names what answered it (`source`: the answer source, else the
route) and whether its action was ever in the book's construction data (`unseen_action`), beside
`novel` (the observation shows values nothing before it showed), `error` and the rules that fired.
A miss that no rule answered is grouped by the source that answered instead, so "errors by rule"
never lumps most rows under one "(no rule)". `why_missed` gathers the breakdowns and one sentence
per breakdown naming its biggest cause ("3 actions never in the construction data: 31% of misses").
Runs recorded before `source` / `unseen_action` existed read with those unknown (null).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["FLAGS", "GROUPINGS", "action_name", "answered_by", "biggest_cause", "miss_flags", "miss_groups",
           "shared_cause", "unseen_actions", "why_missed", "wrong_mask"]

GROUPINGS = ("action", "source", "rule", "flag")
FLAGS = {  # in the order a tie is broken: causes before consequences
    "unseen_action": "action never in the construction data",
    "error": "the prediction failed",
    "novel": "observation shows values nothing before it showed",
    "fallback": "answered by a fallback",
    "none": "no flag",
}
UNKNOWN = "(unknown)"
_CALL = re.compile(r"^([A-Za-z_][\w.\-]*)\s*\(")


def action_name(action: Any) -> str:
    """The action's name from its recorded line: a JSON object's `name`, a call's function, else the first word
    ('go to desk 1' -> 'go', 'cancel_order {"order_id": 1}' -> 'cancel_order')."""
    text = str(action or "").strip()
    if not text:
        return "(empty)"
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict):
            for key in ("name", "tool", "function", "action"):
                if isinstance(value.get(key), str):
                    return value[key]
    match = _CALL.match(text)
    if match:
        return match.group(1)
    return text.split()[0].lower()


def wrong_mask(records: pd.DataFrame, metric: str, threshold: float) -> pd.Series:
    """Scored records whose `metric` is below `threshold` (exact_match < 1 means 'not exactly right')."""
    values = records[metric] if metric in records.columns else pd.Series(np.nan, index=records.index)
    return values.notna() & (values < threshold)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def answered_by(records: pd.DataFrame) -> pd.Series:
    """What answered each record: its answer source, else its route, else '(unknown)'."""
    sources = records["source"] if "source" in records.columns else pd.Series(None, index=records.index, dtype=object)
    routes = records["route"] if "route" in records.columns else pd.Series(None, index=records.index, dtype=object)
    return pd.Series([_text(s) or _text(r) or UNKNOWN for s, r in zip(sources, routes, strict=True)],
                     index=records.index, dtype=object)


def _flag(records: pd.DataFrame, column: str) -> pd.Series:
    if column not in records.columns:
        return pd.Series(False, index=records.index)
    return records[column].map(lambda v: bool(v) if v is not None and not (isinstance(v, float) and np.isnan(v))
                               else False).astype(bool)


def miss_flags(records: pd.DataFrame) -> pd.DataFrame:
    """One boolean column per flag (`FLAGS` but 'none'): unseen action, novel observation, fallback, error."""
    routes = records["route"] if "route" in records.columns else pd.Series(None, index=records.index, dtype=object)
    errors = records["error"] if "error" in records.columns else pd.Series(None, index=records.index, dtype=object)
    return pd.DataFrame({
        "unseen_action": _flag(records, "unseen_action"),
        "novel": _flag(records, "novel"),
        "fallback": pd.Series([str(r or "").startswith("fallback") for r in routes], index=records.index),
        "error": pd.Series([bool(_text(e)) for e in errors], index=records.index),
    }, index=records.index)


def _rules(records: pd.DataFrame, sources: pd.Series) -> list[list[str]]:
    rules = records["rules"] if "rules" in records.columns else pd.Series([[]] * len(records), index=records.index)
    out = []
    for fired, source in zip(rules, sources, strict=True):
        names = [str(r) for r in fired] if fired is not None and not isinstance(fired, float) and len(fired) else []
        out.append(names or [f"(no rule: {source})"])
    return out


def miss_groups(records: pd.DataFrame, metric: str, threshold: float, by: str, *,
                action_of: Callable[[Any], str] = action_name) -> pd.DataFrame:
    """Errors per group: `by` is 'action' (`action_of` names the recorded action line), 'source' (what
    answered), 'rule' (each rule that fired; a record no rule answered counts under '(no rule: <source>)') or
    'flag' (each flag a record carries, else 'none'). Columns: the group, records, wrong, error_rate, share_of_misses
    (its wrong over every wrong record) and mean_<metric>; the most wrong first."""
    if by not in GROUPINGS:
        raise ValueError(f"group by one of {', '.join(GROUPINGS)}, not {by!r}")
    columns = [by, "records", "wrong", "error_rate", "share_of_misses", f"mean_{metric}"]
    scored = records[records[metric].notna()] if metric in records.columns else records.iloc[0:0]
    if scored.empty:
        return pd.DataFrame(columns=columns)
    frame = pd.DataFrame({"wrong": wrong_mask(scored, metric, threshold).to_numpy(),
                          "score": scored[metric].to_numpy(float)})
    if by == "action":
        actions = scored["action"] if "action" in scored.columns else pd.Series("", index=scored.index)
        frame[by] = actions.map(action_of).to_numpy()
    elif by == "source":
        frame[by] = answered_by(scored).to_numpy()
    elif by == "rule":
        frame[by] = _rules(scored, answered_by(scored))
        frame = frame.explode(by)
    else:
        flags = miss_flags(scored)
        frame[by] = [[name for name in flags.columns if row[name]] or ["none"] for _, row in flags.iterrows()]
        frame = frame.explode(by)
    grouped = frame.groupby(by).agg(records=("wrong", "size"), wrong=("wrong", "sum"), score=("score", "mean"))
    grouped["error_rate"] = grouped["wrong"] / grouped["records"]
    misses = int(wrong_mask(scored, metric, threshold).sum())
    grouped["share_of_misses"] = grouped["wrong"] / misses if misses else 0.0
    grouped = grouped.rename(columns={"score": f"mean_{metric}"}).reset_index()
    # ties: a flag that is a cause (unseen action, error, novel) before one that is a consequence (fallback)
    grouped["order"] = grouped[by].map(lambda name: list(FLAGS).index(name) if by == "flag" and name in FLAGS else 0)
    return grouped.sort_values(["wrong", "records", "order", by], ascending=[False, False, True, True])[columns] \
        .reset_index(drop=True)


def unseen_actions(records: pd.DataFrame, *, action_of: Callable[[Any], str] = action_name) -> list[str]:
    """The distinct actions (as `action_of` names them) of the records flagged `unseen_action`, sorted."""
    if records.empty or "action" not in records.columns:
        return []
    actions = records["action"].map(action_of)
    return sorted({str(a) for a, flag in zip(actions, _flag(records, "unseen_action"), strict=True) if flag})


def biggest_cause(groups: pd.DataFrame, by: str, unseen: Sequence[str] | None = None) -> str | None:
    """One sentence naming the group with most misses in `groups` (a `miss_groups` frame); None without misses.
    For flags the biggest flag wins over 'none' when a flag explains any miss; `unseen` (the unseen actions)
    are counted in its sentence."""
    if groups.empty or int(groups["wrong"].sum()) == 0:
        return None
    top = groups.iloc[0]
    if by == "flag" and top[by] == "none" and len(groups) > 1 and int(groups.iloc[1]["wrong"]):
        top = groups.iloc[1]
    share, wrong, name = float(top["share_of_misses"]), int(top["wrong"]), str(top[by])
    if by == "flag":
        what = (f"{len(unseen)} action{'s' if len(unseen) != 1 else ''} never in the construction data"
                if name == "unseen_action" and unseen else FLAGS.get(name, name))
        return f"{what}: {share:.0%} of misses ({wrong})"
    label = {"action": "action", "source": "answered by", "rule": "rule"}[by]
    return f"{label} {name}: {share:.0%} of misses ({wrong} of {int(top['records'])} wrong)"


def shared_cause(wrong: pd.DataFrame, *, action_of: Callable[[Any], str] = action_name) -> str:
    """What a group of wrong predictions (a failure cluster) has in common, in one sentence: what answered most of
    them, the flags they carry (unseen action, error, novel observation, fallback) and how many are empty; "" for
    no rows. E.g. "answered by nearest_evidence: 9 of 10; action never in the construction data: 6 of 10
    (get_user, refund); empty prediction: 2 of 10"."""
    if wrong.empty:
        return ""
    total = len(wrong)
    parts: list[str] = []
    sources = answered_by(wrong).value_counts()
    if not sources.empty:
        top, count = str(sources.index[0]), int(sources.iloc[0])
        parts.append(f"answered by {top}: {count} of {total}" if top != UNKNOWN else f"answer source unknown: {count}"
                     f" of {total}")
    flags = miss_flags(wrong)
    for name in FLAGS:
        if name in flags.columns and name != "fallback" and (count := int(flags[name].sum())):
            text = f"{FLAGS[name]}: {count} of {total}"
            if name == "unseen_action":
                unseen = unseen_actions(wrong, action_of=action_of)
                text += f" ({', '.join(unseen[:4])}{', …' if len(unseen) > 4 else ''})" if unseen else ""
            parts.append(text)
    predictions = wrong["prediction"] if "prediction" in wrong.columns else pd.Series("", index=wrong.index)
    empty = sum(1 for value in predictions if not _text(value) or not str(value).strip())
    if empty:
        parts.append(f"empty prediction: {empty} of {total}")
    return "; ".join(parts)


def why_missed(records: pd.DataFrame, metric: str = "exact_match", threshold: float = 1.0, *,
               method: str | None = None, action_of: Callable[[Any], str] = action_name) -> dict[str, Any]:
    """The breakdowns of one method's misses (every method when None), JSON-ready: counts, per grouping its table
    and biggest cause, and the unseen actions."""
    scored = records[records["turn"] >= 0] if "turn" in records.columns else records
    if method is not None and "method" in scored.columns:
        scored = scored[scored["method"] == method]
    scored = scored[scored[metric].notna()] if metric in scored.columns else scored.iloc[0:0]
    wrong = wrong_mask(scored, metric, threshold)
    unseen = unseen_actions(scored, action_of=action_of)
    out: dict[str, Any] = {"method": method, "metric": metric, "threshold": threshold, "scored": len(scored),
                           "misses": int(wrong.sum()), "unseen_actions": unseen, "by": {}, "causes": {}}
    for by in GROUPINGS:
        groups = miss_groups(scored, metric, threshold, by, action_of=action_of)
        out["by"][by] = groups.to_dict("records")
        out["causes"][by] = biggest_cause(groups, by, unseen)
    return out
