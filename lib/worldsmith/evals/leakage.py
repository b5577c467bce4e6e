"""Leakage control for an evaluation: `worldbook.leakage`'s, re-exported where evaluation code has always found it."""

from worldsmith.worldbook.leakage import LeakageError, book_episode_ids, check_leakage, evidence_families

__all__ = ["LeakageError", "book_episode_ids", "check_leakage", "evidence_families"]
