"""Clusters of wrong predictions: MiniLM sentence embeddings + k-means, so recurring failure modes show up.

The text embedded is the wrong prediction itself: predictions that fail the same way ("Nothing
happens." where the world changed, a stale location, a malformed JSON) land together whatever
the action. k is kept small and never above the number of distinct texts; k-means is seeded so
the same run always gives the same clusters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from worldsmith.evals.misses import action_name, shared_cause
from worldsmith.worldbook.index import Embedder

__all__ = ["Cluster", "cluster_errors", "cluster_rules"]


@dataclass(frozen=True)
class Cluster:
    """One group of wrong predictions: its size, most common actions, the most central example, its rows, and what
    they share (`worldsmith.evals.misses.shared_cause`: what answered them, their flags, empty predictions)."""

    label: int
    size: int
    top_actions: list[tuple[str, int]]
    example: str
    records: pd.DataFrame
    cause: str = ""


def cluster_errors(wrong: pd.DataFrame, k: int = 4, *, embedder: Embedder | None = None,
                   seed: int = 0) -> list[Cluster]:
    """k-means on the embeddings of `wrong["prediction"]`; clusters largest first.

    `wrong` is a records frame already narrowed to the wrong predictions of one method.
    """
    if wrong.empty:
        return []
    from sklearn.cluster import KMeans

    texts = wrong["prediction"].fillna("").astype(str).tolist()
    distinct = len(set(texts))
    k = max(1, min(int(k), distinct))
    if embedder is None:
        from worldsmith.worldbook.index import default_embedder

        embedder = default_embedder()
    vectors = np.asarray(embedder.encode(texts), dtype=np.float32)
    model = KMeans(n_clusters=k, n_init=10, random_state=seed).fit(vectors)
    labels = model.labels_
    distances = np.linalg.norm(vectors - model.cluster_centers_[labels], axis=1)
    clusters = []
    for label in range(k):
        members = np.flatnonzero(labels == label)
        if not len(members):
            continue
        rows = wrong.iloc[members].copy()
        rows.insert(0, "distance", distances[members])
        rows = rows.sort_values("distance")
        actions = rows["action"].map(action_name).value_counts().head(3)
        clusters.append(Cluster(label=label, size=len(members), top_actions=list(actions.items()),
                                example=texts[members[int(np.argmin(distances[members]))]], records=rows,
                                cause=shared_cause(rows, action_of=action_name)))
    return sorted(clusters, key=lambda c: (-c.size, c.label))


def cluster_rules(records: pd.DataFrame) -> list[tuple[str, int]]:
    """The rules behind a cluster's wrong predictions (those the predictions used), most used first."""
    if "rules" not in records.columns:
        return []
    counts: dict[str, int] = {}
    for used in records["rules"]:
        for rule in (list(used) if used is not None and not isinstance(used, str) else [used] if used else []):
            counts[str(rule)] = counts.get(str(rule), 0) + 1
    return sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))
