"""Why a method missed: an evaluation's wrong predictions grouped by action, by answer source, by rule and by flag.

Every next-observation record names what answered it (`source`: the answer source, else the
route) and whether its action was ever in the book's construction data (`unseen_action`), beside
`novel` (the observation shows values nothing before it showed), `error` and the rules that fired.
A miss that no rule answered is grouped by the source that answered instead, so "errors by rule"
never lumps most rows under one "(no rule)". `why_missed` gathers the breakdowns and one sentence
per breakdown naming its biggest cause ("3 actions never in the construction data: 31% of misses"), and
`miss_headline` the one sentence that leads every view of them: it counts the novel turns first (no simulator
could know their values), then names the largest cause of the other misses across every breakdown ("118 of 142
misses are novel turns (values no simulator could know); of the other 24, 20 were answered by nearest_evidence"),
so a source that merely answered most turns is never ranked above what no method could have got right.

A breakdown row's error rate and share of misses carry 95% intervals from a cluster bootstrap over episodes
(`evals.bootstrap`: a small row, or one whose misses sit in a few episodes, gets a wide one), and
`paired_miss_differences` compares two methods row by row on the same turns, resampled together.
Runs recorded before `source` / `unseen_action` existed read with those unknown (null).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from worldsmith.evals.bootstrap import bootstrap_ratios, pair_name
from worldsmith.util.errors import BadInputError

__all__ = ["DEFAULT_MISS_RESAMPLES", "FLAGS", "GROUPINGS", "INTERVAL_COLUMNS", "PAIRED_GROUPINGS", "action_name",
           "NOVEL_TURNS", "answered_by", "biggest_cause", "differs", "miss_flags", "miss_groups", "miss_headline",
           "paired_miss_differences", "shared_cause", "unseen_actions", "why_missed", "wrong_mask"]

GROUPINGS = ("action", "source", "rule", "flag")
FLAGS = {  # in the order a tie is broken: causes before consequences
    "unseen_action": "action never in the construction data",
    "error": "the prediction failed",
    "novel": "observation shows values nothing before it showed",
    "fallback": "answered by a fallback",
    "none": "no flag",
}
PAIRED_GROUPINGS = ("action", "source", "flag")
INTERVAL_COLUMNS = ("error_rate_low", "error_rate_high", "share_low", "share_high", "trajectories")
DEFAULT_MISS_RESAMPLES = 2_000  # per breakdown row: enough for a 95% percentile interval, cheap on every page load
UNKNOWN = "(unknown)"
NOVEL_TURNS = "novel turns (values no simulator could know)"
_HEADLINE_ORDER = ("flag", "action", "rule", "source")  # on a tie, a cause before what merely answered
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


def _labels(scored: pd.DataFrame, by: str, action_of: Callable[[Any], str]) -> list[list[str]]:
    """Each record's groups under `by` (one for action and source; one or more for rule and flag)."""
    if by == "action":
        actions = scored["action"] if "action" in scored.columns else pd.Series("", index=scored.index)
        return [[str(name)] for name in actions.map(action_of)]
    if by == "source":
        return [[str(name)] for name in answered_by(scored)]
    if by == "rule":
        return _rules(scored, answered_by(scored))
    flags = miss_flags(scored)
    names = list(flags.columns)
    return [[name for name, on in zip(names, row, strict=True) if on] or ["none"] for row in flags.to_numpy(bool)]


def miss_groups(records: pd.DataFrame, metric: str, threshold: float, by: str, *,
                action_of: Callable[[Any], str] = action_name, resamples: int | None = None,
                seed: int = 0) -> pd.DataFrame:
    """Errors per group: `by` is 'action' (`action_of` names the recorded action line), 'source' (what
    answered), 'rule' (each rule that fired; a record no rule answered counts under '(no rule: <source>)') or
    'flag' (each flag a record carries, else 'none'). Columns: the group, records, wrong, error_rate, share_of_misses
    (its wrong over every wrong record) and mean_<metric>; the most wrong first.

    With `resamples`, each row also gets 95% intervals from a cluster bootstrap over episodes (`evals.bootstrap`,
    one record's turns stay together): error_rate_low/high, share_low/high and the trajectories resampled."""
    if by not in GROUPINGS:
        raise BadInputError(f"group by one of {', '.join(GROUPINGS)}, not {by!r}")
    columns = [by, "records", "wrong", "error_rate", "share_of_misses", f"mean_{metric}"]
    if resamples is not None:
        columns += list(INTERVAL_COLUMNS)
    scored = records[records[metric].notna()] if metric in records.columns else records.iloc[0:0]
    if scored.empty:
        return pd.DataFrame(columns=columns)
    frame = pd.DataFrame({"wrong": wrong_mask(scored, metric, threshold).to_numpy(),
                          "score": scored[metric].to_numpy(float)})
    labels = _labels(scored, by, action_of)
    frame[by] = labels
    frame = frame.explode(by)
    grouped = frame.groupby(by).agg(records=("wrong", "size"), wrong=("wrong", "sum"), score=("score", "mean"))
    grouped["error_rate"] = grouped["wrong"] / grouped["records"]
    misses = int(wrong_mask(scored, metric, threshold).sum())
    grouped["share_of_misses"] = grouped["wrong"] / misses if misses else 0.0
    grouped = grouped.rename(columns={"score": f"mean_{metric}"}).reset_index()
    if resamples is not None:
        bounds = _row_intervals(scored, metric, threshold, labels, list(grouped[by]), resamples, seed)
        for column in INTERVAL_COLUMNS:
            grouped[column] = [bounds[name][column] for name in grouped[by]]
    # ties: a flag that is a cause (unseen action, error, novel) before one that is a consequence (fallback)
    grouped["order"] = grouped[by].map(lambda name: list(FLAGS).index(name) if by == "flag" and name in FLAGS else 0)
    return grouped.sort_values(["wrong", "records", "order", by], ascending=[False, False, True, True])[columns] \
        .reset_index(drop=True)


def _episodes(scored: pd.DataFrame) -> list[str]:
    if "episode_id" in scored.columns:
        return [str(e) for e in scored["episode_id"]]
    return [str(i) for i in range(len(scored))]  # no episode ids: every record its own cluster


def _membership(labels: list[list[str]], name: str) -> np.ndarray:
    return np.fromiter((name in row for row in labels), dtype=bool, count=len(labels))


def _row_intervals(scored: pd.DataFrame, metric: str, threshold: float, labels: list[list[str]],
                   names: Sequence[str], resamples: int, seed: int) -> dict[str, dict[str, Any]]:
    """Per group: the error rate's interval (its wrong records over its records) and the share-of-misses interval
    (its wrong records over all wrong records), every record resampled by episode, all rows on the same draws."""
    wrong = wrong_mask(scored, metric, threshold).to_numpy(dtype=float)
    members = {name: _membership(labels, name).astype(float) for name in names}
    ratios = [pair for name in names for pair in ((wrong * members[name], members[name]),
                                                  (wrong * members[name], wrong))]
    intervals = bootstrap_ratios(_episodes(scored), ratios, resamples=resamples, seed=seed)
    out: dict[str, dict[str, Any]] = {}
    for index, name in enumerate(names):
        rate, share = intervals[2 * index], intervals[2 * index + 1]
        out[name] = {"error_rate_low": _round(rate.low), "error_rate_high": _round(rate.high),
                     "share_low": _round(share.low), "share_high": _round(share.high),
                     "trajectories": rate.trajectories}
    return out


def _round(value: float) -> float | None:
    return None if value is None or not np.isfinite(value) else round(float(value), 6)


def _pair_key(records: pd.DataFrame) -> list[str]:
    return [c for c in ("protocol", "env_id", "episode_id", "turn") if c in records.columns]


def paired_miss_differences(records: pd.DataFrame, a: str, b: str, metric: str = "exact_match",
                            threshold: float = 1.0, *, groupings: Sequence[str] = PAIRED_GROUPINGS,
                            resamples: int = DEFAULT_MISS_RESAMPLES, seed: int = 0,
                            action_of: Callable[[Any], str] = action_name) -> dict[str, Any]:
    """Method `a`'s error rate minus method `b`'s, per breakdown row, on the turns both scored, JSON-ready.

    A row holds the turns `a`'s records put in it: for an action, an unseen action or a novel observation these
    are the same turns for both methods; for a source or a flag such as fallback they are the turns where `a`
    was answered that way ("where harness fell back, how much worse than nearest?"). The difference is paired: each turn's wrong(a) - wrong(b),
    resampled by episode so the same turns of both methods are drawn together (`bootstrap_ratios`: the row's
    summed differences over its turns, every row on the same draws). An interval
    that excludes 0 says the methods differ on that row beyond resampling noise."""
    scored = records[records["turn"] >= 0] if "turn" in records.columns else records
    scored = scored[scored[metric].notna()] if metric in scored.columns else scored.iloc[0:0]
    keys = _pair_key(scored)
    left = scored[scored["method"] == a].drop_duplicates(keys).reset_index(drop=True)
    right = scored[scored["method"] == b].drop_duplicates(keys).reset_index(drop=True)
    joined = left[keys].reset_index().merge(right[keys].reset_index(), on=keys, suffixes=("_a", "_b"))
    left, right = left.iloc[joined["index_a"].to_numpy()], right.iloc[joined["index_b"].to_numpy()]
    wrong_a = wrong_mask(left, metric, threshold).to_numpy(dtype=float)
    wrong_b = wrong_mask(right, metric, threshold).to_numpy(dtype=float)
    diff = wrong_a - wrong_b
    episodes = np.asarray(_episodes(left), dtype=object)
    out: dict[str, Any] = {"a": a, "b": b, "pair": pair_name(a, b), "metric": metric, "threshold": threshold,
                           "turns": len(joined), "resamples": resamples, "seed": seed, "by": {}}
    for by in groupings:
        if by not in GROUPINGS:
            raise BadInputError(f"group by one of {', '.join(GROUPINGS)}, not {by!r}")
        labels = _labels(left, by, action_of)
        names = sorted({name for row in labels for name in row})
        members = [_membership(labels, name) for name in names]
        intervals = bootstrap_ratios(list(episodes), [(diff * member, member.astype(float)) for member in members],
                                     resamples=resamples, seed=seed)
        rows: list[dict[str, Any]] = []
        for name, member, interval in zip(names, members, intervals, strict=True):
            rows.append({by: name, "turns": int(member.sum()), "wrong_a": int(wrong_a[member].sum()),
                         "wrong_b": int(wrong_b[member].sum()), "error_rate_a": _round(wrong_a[member].mean()),
                         "error_rate_b": _round(wrong_b[member].mean()), "mean_diff": _round(interval.mean),
                         "low": _round(interval.low), "high": _round(interval.high),
                         "trajectories": interval.trajectories})
        rows.sort(key=lambda row: (-abs(row["mean_diff"] or 0.0), -row["turns"], str(row[by])))
        out["by"][by] = rows
    return out


def differs(row: dict[str, Any]) -> bool:
    """Whether a paired row's interval excludes 0 (the methods differ there beyond resampling noise)."""
    low, high = row.get("low"), row.get("high")
    return low is not None and high is not None and (low > 0 or high < 0)


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
    """What a group of wrong predictions (a failure cluster) has in common, in one sentence: how many are novel
    turns (first: no method could know them), what answered most of them, the other flags they carry (unseen action,
    error) and how many are empty; "" for no rows. E.g. "novel turns (values no simulator could know): 3 of 10;
    answered by nearest_evidence: 9 of 10; action never in the construction data: 6 of 10 (get_user, refund); empty
    prediction: 2 of 10"."""
    if wrong.empty:
        return ""
    total = len(wrong)
    flags = miss_flags(wrong)
    novel = int(flags["novel"].sum())
    parts: list[str] = [f"{NOVEL_TURNS}: {novel} of {total}"] if novel else []  # what no method could know, first
    sources = answered_by(wrong).value_counts()
    if not sources.empty:
        top, count = str(sources.index[0]), int(sources.iloc[0])
        parts.append(f"answered by {top}: {count} of {total}" if top != UNKNOWN else f"answer source unknown: {count}"
                     f" of {total}")
    for name in FLAGS:
        if name in flags.columns and name not in ("fallback", "novel") and (count := int(flags[name].sum())):
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


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def _cause_phrase(by: str, name: str, wrong: int, unseen: Sequence[str]) -> str:
    if by == "flag":
        if name == "unseen_action":
            listed = f" ({', '.join(unseen[:3])}{', …' if len(unseen) > 3 else ''})" if unseen else ""
            return f"{wrong} called an action never in the construction data{listed}"
        return {"error": f"{wrong} failed (the prediction raised an error)",
                "fallback": f"{wrong} were answered by a fallback"}.get(name, f"{wrong} were flagged {name}")
    return {"action": f"{wrong} were {name} actions", "rule": f"{wrong} used the rule {name}",
            "source": f"{wrong} were answered by {name}"}[by]


def _largest_cause(wrong: pd.DataFrame, metric: str, threshold: float, action_of: Callable[[Any], str]) -> str | None:
    """The group with the most of these misses across every breakdown (a flag before an action, a rule, a source on
    a tie; 'none', novel and rule-less rows are no cause), as a phrase; None when no group holds any."""
    unseen = unseen_actions(wrong, action_of=action_of)
    best: tuple[int, int, str, str] | None = None  # (wrong, -order, by, name)
    for order, by in enumerate(_HEADLINE_ORDER):
        groups = miss_groups(wrong, metric, threshold, by, action_of=action_of)
        for name, count in zip(groups[by], groups["wrong"], strict=True):
            if int(count) and not (by == "flag" and name in ("none", "novel")) and not str(name).startswith("(no rule"):
                if best is None or (int(count), -order) > best[:2]:
                    best = (int(count), -order, by, str(name))
    return None if best is None else _cause_phrase(best[2], best[3], best[0], unseen)


def miss_headline(records: pd.DataFrame, metric: str = "exact_match", threshold: float = 1.0, *,
                  method: str | None = None, action_of: Callable[[Any], str] = action_name) -> str | None:
    """The one sentence that leads a failure analysis: how many misses are novel turns (values no simulator could
    know: `novel`), then the largest cause of the rest across every breakdown. None without misses.

        "118 of 142 misses are novel turns (values no simulator could know); of the other 24, 20 were answered by
        nearest_evidence"
    """
    scored = _scored(records, metric, method)
    wrong = scored[wrong_mask(scored, metric, threshold)]
    total = len(wrong)
    if not total:
        return None
    novel = _flag(wrong, "novel")
    known = "novel" in wrong.columns and bool(wrong["novel"].notna().any())
    count = int(novel.sum())
    rest = wrong[~novel.to_numpy()]
    cause = _largest_cause(rest, metric, threshold, action_of) if len(rest) else None
    if not known:
        return _plural(total, "miss", "misses") + (f": {cause}" if cause else "")
    if count == total:
        return f"all {total} misses are {NOVEL_TURNS}" if total > 1 else \
            f"the 1 miss is a {NOVEL_TURNS.replace('turns', 'turn', 1)}"
    if count == 0:
        return f"none of the {_plural(total, 'miss', 'misses')} is a novel turn" + (f"; {cause}" if cause else "")
    return (f"{count} of {_plural(total, 'miss', 'misses')} {'is' if count == 1 else 'are'} {NOVEL_TURNS}; of the "
            f"other {len(rest)}, {cause or 'no breakdown holds a cause'}")


def _scored(records: pd.DataFrame, metric: str, method: str | None) -> pd.DataFrame:
    """The per-turn records of `method` (every method when None) scored on `metric`."""
    scored = records[records["turn"] >= 0] if "turn" in records.columns else records
    if method is not None and "method" in scored.columns:
        scored = scored[scored["method"] == method]
    return scored[scored[metric].notna()] if metric in scored.columns else scored.iloc[0:0]


def why_missed(records: pd.DataFrame, metric: str = "exact_match", threshold: float = 1.0, *,
               method: str | None = None, action_of: Callable[[Any], str] = action_name,
               resamples: int | None = DEFAULT_MISS_RESAMPLES, seed: int = 0) -> dict[str, Any]:
    """The breakdowns of one method's misses (every method when None), JSON-ready: counts, per grouping its table
    (each row with its bootstrap intervals unless `resamples` is None) and biggest cause, the unseen actions, and
    the `headline` (`miss_headline`: novel turns first, then the largest cause of the rest)."""
    scored = _scored(records, metric, method)
    wrong = wrong_mask(scored, metric, threshold)
    unseen = unseen_actions(scored, action_of=action_of)
    out: dict[str, Any] = {"method": method, "metric": metric, "threshold": threshold, "scored": len(scored),
                           "resamples": resamples, "seed": seed, "misses": int(wrong.sum()), "unseen_actions": unseen,
                           "headline": miss_headline(scored, metric, threshold, action_of=action_of),
                           "by": {}, "causes": {}}
    for by in GROUPINGS:
        groups = miss_groups(scored, metric, threshold, by, action_of=action_of, resamples=resamples, seed=seed)
        out["by"][by] = groups.to_dict("records")
        out["causes"][by] = biggest_cause(groups, by, unseen)
    return out
