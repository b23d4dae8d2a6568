"""The public Python API (DESIGN §13): what ``simloop.__all__`` promises, and the four
functions on the real stack, from inside a running event loop as in a notebook."""

from __future__ import annotations

import ast
import asyncio
import importlib
import inspect
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

import simloop
from simloop import errors
from tests.helpers.data import ROOT

# ----------------------------------------------------------------------------- __all__ (httpx style)


def test_every_exported_name_exists_and_is_documented():
    assert simloop.__all__ == sorted(set(simloop.__all__))
    for name in simloop.__all__:
        obj = getattr(simloop, name)
        own_doc = vars(obj).get("__doc__") if inspect.isclass(obj) else obj.__doc__
        assert own_doc and own_doc.strip(), f"simloop.{name} has no docstring of its own"


def test_nothing_public_is_missing_from_all():
    for name in simloop.__all__:
        getattr(simloop, name)  # load everything lazy first
    public = {n for n, v in vars(simloop).items() if not n.startswith("_") and not isinstance(v, types.ModuleType)}
    assert public <= set(simloop.__all__)
    assert dir(simloop) == simloop.__all__


def _face() -> tuple[list[str], dict[str, str], dict[str, str], dict[str, str]]:
    """What ``simloop/__init__.py`` says, read from its source: ``__all__``, the names it
    imports at once (name -> module), those of its ``TYPE_CHECKING`` block and those of its
    lazy table."""
    tree = ast.parse((ROOT / "simloop" / "__init__.py").read_text(encoding="utf-8"))
    listed: list[str] = []
    eager: dict[str, str] = {}
    static: dict[str, str] = {}
    lazy: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
            listed = ast.literal_eval(node.value)  # a literal list: an allow-list, never computed
        elif isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            eager.update({a.asname or a.name: node.module for a in node.names if not a.name.startswith("_")})
        elif isinstance(node, ast.If) and getattr(node.test, "id", None) == "_TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.level == 1, ast.unparse(imp)
                static.update({a.asname or a.name: imp.module or "" for a in imp.names})
            [table] = [n for n in ast.walk(ast.Module(body=node.orelse, type_ignores=[])) if isinstance(n, ast.Dict)]
            for module, names in zip(table.keys, table.values):
                lazy.update({name: ast.literal_eval(module) for name in ast.literal_eval(names)})
    return listed, eager, static, lazy


def test_all_is_one_allow_list_that_the_type_checking_block_and_the_lazy_table_repeat():
    listed, eager, static, lazy = _face()
    assert listed == simloop.__all__
    assert len(listed) == len(set(listed))
    assert set(listed) == set(eager) | set(static), "__all__ and the imports (TYPE_CHECKING block included) differ"
    assert not set(eager) & set(static)
    assert static == lazy, "the TYPE_CHECKING block and the lazy table name different names or modules"


def test_every_name_of_all_resolves_to_the_object_its_module_defines():
    _, eager, static, _ = _face()
    for name, module in {**eager, **static}.items():
        assert getattr(simloop, name) is getattr(importlib.import_module(f"simloop.{module}"), name), name


def test_boundary_helpers_are_not_api():
    """The helpers that word simloop's one-line errors at its boundaries (CLI, server) stay
    in errors.py: of its functions only error_source, which explains the transcript's
    ``error.source``, is public."""
    helpers = {n for n in errors.__all__ if inspect.isfunction(getattr(errors, n))}
    assert {"check_known", "first_error", "check_port", "listen_error"} <= helpers
    assert helpers & set(simloop.__all__) == {"error_source"}


def test_all_lists_the_functions_models_protocols_and_every_error():
    assert {"run", "arun", "read_transcripts", "evaluate", "Run"} <= set(simloop.__all__)
    assert {"Transcript", "RunManifest", "RunConfig", "RunSummary", "DialogueScores", "MemoryResults"} <= set(
        simloop.__all__)
    assert {"UserSimulator", "Assistant", "Retriever", "Embedder", "MemoryStrategy"} <= set(simloop.__all__)
    tree = {n for n, v in vars(errors).items() if inspect.isclass(v) and issubclass(v, errors.SimloopError)}
    assert tree <= set(simloop.__all__)
    with pytest.raises(AttributeError):
        simloop.no_such_name  # noqa: B018


@pytest.mark.parametrize("module", ["simloop", "simloop.cli"])  # the CLI's start: every command, every --help
def test_import_is_light(module):
    code = (f"import sys, {module}; heavy = [m for m in ('torch', 'pyserini', 'openai', 'jnius', 'numpy', "
            "'sentence_transformers') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_bad_config_is_one_config_error_and_nothing_written(tmp_path: Path):
    with pytest.raises(simloop.ConfigError, match="concurrency"):
        simloop.run(concurrency=0, out=tmp_path)
    with pytest.raises(TypeError, match="resume"):
        simloop.run(resume=tmp_path, seed=3)
    assert not any(tmp_path.iterdir())


# ----------------------------------------------------------------------------- the real stack


@pytest.mark.slow
async def test_arun_read_and_evaluate_inside_a_running_event_loop(tmp_path: Path, demo_cache: Path):
    """What a notebook does: the loop is already running when the run starts."""
    asyncio.get_running_loop()  # as in Jupyter
    config = {"scenarios": {"personas_dir": str(ROOT / "personas"), "limit": 1}, "out": str(tmp_path),
              "progress": False}
    run = await simloop.arun(config, run_id="api", max_turns=4)
    assert isinstance(run, simloop.Run) and run.dir == tmp_path / "api"
    assert run.manifest.status == "finished" and run.stats.dialogues == 1
    transcripts = list(simloop.read_transcripts(run.dir))
    assert len(transcripts) == 1 and isinstance(transcripts[0], simloop.Transcript)
    assert transcripts[0].turns and transcripts[0].assistant.name == "bm25_extractive"

    summary = simloop.evaluate(run.dir)  # blocking, yet fine inside the running loop
    assert isinstance(summary, simloop.RunSummary) and summary.stats.dialogues == 1
    written = json.loads((run.dir / "summary.json").read_text())
    assert written["schema_version"] == summary.schema_version and (run.dir / "scores.jsonl").is_file()

    with (run.dir / "dialogues.jsonl").open("a") as fh:  # a crash mid-write leaves a torn last line
        fh.write('{"schema_version": "1.0", "run_id": "api", "dialo')
    assert [t.dialogue_id for t in simloop.read_transcripts(run.dir)] == [transcripts[0].dialogue_id]


def test_blocking_run_works_with_or_without_a_running_loop(tmp_path: Path):
    """simloop.run from a script, and from code that already runs a loop (helper thread)."""
    sim, asst = "tests.helpers.plugins:ScriptedSimulator", "tests.helpers.plugins:EchoAssistant"
    config = {"scenarios": {"personas_dir": str(ROOT / "personas"), "limit": 2}, "out": str(tmp_path),
              "simulator": {"name": sim}, "assistant": {"name": asst}, "progress": False}
    plain = simloop.run(config, run_id="plain")

    async def inside() -> simloop.Run:
        return simloop.run(config, run_id="nested", concurrency=1)

    nested = asyncio.run(inside())
    for r in (plain, nested):
        assert r.manifest.status == "finished" and r.stats.dialogues == 2
    assert nested.manifest.config["concurrency"] == 1
    resumed = simloop.run(resume=plain.dir, concurrency=3)  # nothing left to do: still a clean finish
    assert resumed.dir == plain.dir and resumed.stats.dialogues == 0
    assert len(list(simloop.read_transcripts(plain.dir))) == 2
