"""Process settings read from the environment (simloop/settings.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from simloop.errors import ConfigError
from simloop.settings import cache_named, cache_root, check, count, embed_threads, is_setting


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


# ----------------------------------------------------------------------------- one reader per variable

SIMLOOP = Path(__file__).resolve().parents[1] / "simloop"
_NAME = re.compile(r"SIMLOOP_[A-Z0-9_]+")


def _environment_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of each ``os.environ.get("SIMLOOP_...")``, ``os.getenv(...)`` or
    ``os.environ["SIMLOOP_..."]`` in ``tree``."""
    found = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            f = node.func
            environ_get = f.attr == "get" and isinstance(f.value, ast.Attribute) and f.value.attr == "environ"
            if environ_get or f.attr == "getenv":
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "environ":
            key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value.startswith("SIMLOOP_"):
            found.append((node.lineno, key.value))
    return found


def test_only_settings_reads_simloop_variables_from_the_environment():
    reads = [f"{p.relative_to(SIMLOOP.parent)}:{line} reads {name}" for p in sorted(SIMLOOP.rglob("*.py"))
             if p.name != "settings.py" for line, name in _environment_reads(ast.parse(p.read_text()))]
    assert not reads, "read these through simloop/settings.py:\n" + "\n".join(reads)
    assert _environment_reads(ast.parse((SIMLOOP / "settings.py").read_text()))  # the scan sees reads at all


def test_every_variable_simloop_names_is_declared_or_a_run_setting():
    """A ``SIMLOOP_*`` name in simloop's code (not its prose) is a process setting
    settings.py declares, or maps onto a RunConfig field; nothing else exists."""
    from simloop.config import load_config

    undeclared, named = [], set()
    for path in sorted(SIMLOOP.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _NAME.fullmatch(node.value):
                named.add(node.value)
                if is_setting(node.value):
                    continue
                try:
                    load_config(None, {}, environ={node.value: "1"})
                except ConfigError as exc:
                    if node.value in str(exc):  # not a field at all (a bad value would not name it first)
                        undeclared.append(f"{path.relative_to(SIMLOOP.parent)}:{node.lineno} {node.value}")
    assert not undeclared, "declare these in simloop/settings.py:\n" + "\n".join(undeclared)
    assert "SIMLOOP_SERVE_TOKENS" in named  # the scan finds names outside settings.py (cli/serve.py)


def test_check_reads_every_setting_that_can_be_bad(monkeypatch):
    for name, bad in (("SIMLOOP_EVENT_LOOP", "trio"), ("SIMLOOP_LLM_HTTP", "curl"), ("SIMLOOP_EMBED_THREADS", "0"),
                      ("SIMLOOP_EMBED_RUNTIME", "torch"), ("SIMLOOP_DEMO_VECTORS", "yes")):
        with monkeypatch.context() as m:
            m.setenv(name, bad)
            with pytest.raises(ConfigError, match=f"^{name}="):
                check()
    check()  # the suite's own settings are good


def test_the_cache_folder_and_how_messages_name_it(monkeypatch, tmp_path):
    monkeypatch.delenv("SIMLOOP_CACHE", raising=False)
    assert cache_root() == Path.home() / ".cache" / "simloop"
    assert cache_named(cache_root()) == f"cache folder {Path.home() / '.cache' / 'simloop'}"
    assert cache_root(tmp_path / "given") == tmp_path / "given"
    monkeypatch.setenv("SIMLOOP_CACHE", str(tmp_path))
    assert cache_root() == tmp_path and cache_named(tmp_path) == f"SIMLOOP_CACHE={tmp_path}"
