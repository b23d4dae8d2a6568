"""Process settings read from the environment (simloop/settings.py)."""

from __future__ import annotations

import pytest

from simloop.errors import ConfigError
from simloop.settings import count, embed_threads


def test_count_reads_the_variable_then_its_older_names_then_the_default(monkeypatch):
    for name in ("SIMLOOP_EMBED_THREADS", "SIMLOOP_TORCH_THREADS"):
        monkeypatch.delenv(name, raising=False)
    assert embed_threads() == 1
    monkeypatch.setenv("SIMLOOP_TORCH_THREADS", "3")
    assert embed_threads() == 3
    monkeypatch.setenv("SIMLOOP_EMBED_THREADS", " 2 ")  # the new name wins; spaces forgiven
    assert embed_threads() == 2


@pytest.mark.parametrize("raw", ["abc", "0", "-1", "1.5"])
def test_count_refuses_what_is_not_a_whole_number_from_1(monkeypatch, raw):
    monkeypatch.setenv("SIMLOOP_X", raw)
    with pytest.raises(ConfigError, match=r"SIMLOOP_X=.*: expected a whole number, at least 1"):
        count("SIMLOOP_X", 1)
