"""The import graph of the checkout, parsed (ast), for tests/test_layering.py.

The modules of simloop/ and agents/ (by dotted name) and of scripts/ and research/*/ (by
folder and bare name: they import each other as ``from bench_common import ...``); every
import of each, at any depth (module level, inside functions, under ``TYPE_CHECKING``),
relative ones made absolute; what each package's face (``__init__.py``) exports; and the
edges between modules of ours, a face's name followed to the module that defines it.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tests.helpers.data import ROOT

PACKAGE = ROOT / "simloop"
# Folders of scripts run as files: their modules import each other by bare name, and a
# research folder puts scripts/ on its path too (research/ptkb imports bench_ptkb).
SCRIPT_DIRS = [ROOT / "scripts", *sorted(p for p in (ROOT / "research").glob("*") if p.is_dir())]


@dataclass(frozen=True)
class Module:
    """A Python file of the checkout: its import name and the folder bare imports search."""

    path: Path
    name: str  # simloop.search.bm25, agents.genaius; scripts/bench_common for a script
    script_dir: Path | None = None  # set for scripts: where its bare imports look first

    @property
    def rel(self) -> str:
        return self.path.relative_to(ROOT).as_posix()


@dataclass(frozen=True)
class Import:
    line: int
    module: str  # the absolute module named (``from X import n``: X)
    name: str | None  # n, for ``from X import n``
    private: bool  # a ``_name`` imported, or a ``_module`` on the path


def _dotted(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> tuple[Module, ...]:
    found = [Module(p, _dotted(p)) for root in (PACKAGE, ROOT / "agents") for p in sorted(root.rglob("*.py"))]
    found += [Module(p, f"{d.relative_to(ROOT).as_posix()}/{p.stem}", d) for d in SCRIPT_DIRS
              for p in sorted(d.glob("*.py"))]
    return tuple(m for m in found if "__pycache__" not in m.path.parts)


@cache
def by_name() -> dict[str, Module]:
    return {m.name: m for m in modules()}


def _type_checking(test: ast.expr) -> bool:
    return isinstance(test, ast.Name) and test.id.lstrip("_") == "TYPE_CHECKING"


@cache
def imports(module: Module) -> tuple[Import, ...]:
    """Every import of the file, at any depth, relative ones made absolute."""
    package = module.name if module.path.name == "__init__.py" else module.name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(module.path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [Import(node.lineno, a.name, None, _private_path(a.name)) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            out += [Import(node.lineno, target, a.name, _private_path(target) or _private(a.name)) for a in node.names]
    return tuple(out)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_path(module: str) -> bool:
    return any(_private(part) for part in module.split("."))


def _is_ours(module: str) -> bool:
    return module.split(".")[0] in ("simloop", "agents")


# ----------------------------------------------------------------------------- faces


@dataclass(frozen=True)
class Face:
    """What a package's ``__init__.py`` says it exports, three ways."""

    package: str
    typed: dict[str, str]  # name -> module, from the TYPE_CHECKING imports
    lazy: dict[str, str] | None  # name -> module, from the lazy_face table (None: no lazy table)
    eager: dict[str, str]  # name -> module, imported at module level
    all: list[str] | None

    def home(self, name: str) -> str | None:
        """The module defining ``name``, as the face says."""
        module = self.eager.get(name) or self.typed.get(name) or (self.lazy or {}).get(name)
        return f"{self.package}.{module}" if module else None


def _from_imports(body: list[ast.stmt], package: str) -> dict[str, str]:
    """name -> submodule for ``from .mod import name`` statements directly in ``body``."""
    out = {}
    for node in body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            out.update({a.asname or a.name: node.module for a in node.names})
    return out


@cache
def face(package: str) -> Face:
    path = ROOT.joinpath(*package.split("."), "__init__.py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typed: dict[str, str] = {}
    lazy: dict[str, str] | None = None
    for node in tree.body:
        if isinstance(node, ast.If) and _type_checking(node.test):
            typed.update(_from_imports(node.body, package))
            for call in (n for n in ast.walk(ast.Module(node.orelse, [])) if isinstance(n, ast.Call)):
                if isinstance(call.func, ast.Name) and call.func.id.lstrip("_") == "lazy_face":
                    table = call.args[1]
                    assert isinstance(table, ast.Dict), f"{path}: the lazy table must be a dict literal"
                    lazy = {n: ast.literal_eval(k)
                            for k, names in zip(table.keys, table.values) if k is not None
                            for n in ast.literal_eval(names)}
    eager = {name: module for name, module in _from_imports(tree.body, package).items() if not name.startswith("_")}
    names = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            names = list(ast.literal_eval(node.value))
    return Face(package, typed, lazy, eager, names)


def subpackages() -> list[str]:
    return sorted(_dotted(p.parent) for p in PACKAGE.rglob("__init__.py") if "__pycache__" not in p.parts)


def _resolve(imp: Import) -> str | None:
    """The module of ours an import reaches (a face's name goes to the module defining it);
    None for another distribution's."""
    if not _is_ours(imp.module):
        return None
    if imp.name is not None:
        sub = f"{imp.module}.{imp.name}"
        if sub in by_name():
            return sub
        if imp.module in by_name() and by_name()[imp.module].path.name == "__init__.py":
            return face(imp.module).home(imp.name) or imp.module
    parts = imp.module.split(".")
    while parts and ".".join(parts) not in by_name():  # ``import a.b.Name`` style paths
        parts.pop()
    return ".".join(parts) or None


def _script_target(module: Module, imp: Import) -> str | None:
    """The script a bare import in a script names: its own folder first, then scripts/."""
    for folder in (module.script_dir, ROOT / "scripts"):
        assert folder is not None
        name = f"{folder.relative_to(ROOT).as_posix()}/{imp.module.split('.')[0]}"
        if name in by_name():
            return name
    return None


def edges() -> Iterator[tuple[Module, Import, str]]:
    """(importer, import, module of ours it reaches) for every import between our modules."""
    for module in modules():
        for imp in imports(module):
            target = (_script_target(module, imp) if module.script_dir else None) or _resolve(imp)
            if target is not None and target != module.name:
                yield module, imp, target


def unit(module: str) -> str | None:
    """``simloop.search.bm25`` -> ``search``; ``simloop.errors`` -> ``errors``; None outside simloop."""
    parts = module.split(".")
    if parts[0] != "simloop":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def package_of(module: str) -> str | None:
    """The subpackage of simloop a module sits in (``simloop.search`` for ``simloop.search.bm25``)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "simloop" and len(parts) > 2 else None


def cycles() -> list[list[str]]:
    """Modules importing each other round: the strongly connected components of more than
    one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {m.name: set() for m in modules()}
    for module, _, target in edges():
        graph[module.name].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def third_party(module: Module, imp: Import) -> str | None:
    """The top-level name of another distribution an import names, or None."""
    top = imp.module.split(".")[0]
    if not top or top in sys.stdlib_module_names or top in ("simloop", "agents", "__future__"):
        return None
    if module.script_dir is not None and _script_target(module, imp) is not None:
        return None
    return top
