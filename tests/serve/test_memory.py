"""`serve.memory_release.trim_memory`: runs on glibc, and calls closer together than the interval are skipped."""

from __future__ import annotations

import pytest

from worldsmith.serve import memory_release
from worldsmith.serve.memory_release import trim_memory


@pytest.mark.skipif(memory_release._TRIM is None, reason="not glibc: nothing to trim")
def test_a_trim_runs_and_a_second_one_right_after_is_skipped() -> None:
    assert trim_memory(min_interval=0.0) is True
    assert trim_memory(min_interval=3600.0) is False
    assert trim_memory(min_interval=0.0) is True
