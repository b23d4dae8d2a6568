"""Public faces that load on first use (PEP 562).

Every subpackage's ``__init__.py`` names what other packages may use (``__all__``) and
where each name lives.  The names load when first asked for, so importing a face costs
nothing: a command that needs ``RetrievalConfig`` does not pay for numpy, pyserini or
the encoders.  Static tools see the same names through the face's ``TYPE_CHECKING``
imports; ``tests/test_layering.py`` checks that both lists and ``__all__`` agree.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_face"]


def lazy_face(package: str,
              exports: Mapping[str, Sequence[str]]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, whose submodule ``exports[module]`` defines each name.

    A loaded name is bound on the package, so later lookups skip ``__getattr__``."""
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:  # the public names, as ``dir()`` of a plain module lists its own
        return sorted(getattr(sys.modules[package], "__all__", where))

    return __getattr__, __dir__
