"""The demo index: the offline Wikipedia summaries (``corpus.py``) indexed once into
``<cache>/index/wiki-<key>`` (``<cache>``: ``settings.cache_root``) and reused by every run
that leaves ``retrieval.index`` unset.

The first build takes about a minute (Lucene only: nothing is embedded ahead of need; a run
embeds what it retrieves, into the vector cache).  It says so while it runs; a process that
finds another one building waits for it on a file lock and, after a few seconds, names the
pid it waits for.  Stopped (a run's SIGINT/SIGTERM), it leaves neither a half-written
corpus nor a half-built index, and the next call starts again from a clean state.

``SIMLOOP_DEMO_VECTORS=1`` (or ``embeddings=True``) also fills the vector cache with the
vectors of every passage and sentence, up front, once (10-25 minutes of CPU on 2 cores):
for those who would rather wait once than have first runs embed as they go.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pydantic import BaseModel, ValidationError

from ..files import atomic_write
from ..settings import cache_root
from ..settings import demo_vectors as _demo_vectors_env
from .corpus import demo_key, wiki_source, write_wiki_corpus
from .indexing import build_index, fill_vectors, is_lucene_index, scratch_prefix
from .steps import Step, held_lock

__all__ = ["demo_index", "demo_index_path", "demo_index_ready", "demo_vectors", "FilledStamp", "FILLED_FILE"]

FILLED_FILE = "simloop-vectors.json"  # in the index folder (Lucene leaves files it does not know alone)


class FilledStamp(BaseModel):
    """``simloop-vectors.json``: the vector cache was filled with this index's passages and
    sentences, by this encoder (a cache trimmed since then re-embeds what it dropped, as
    any run does)."""

    encoder: str
    passages: int
    sentences: int


def demo_index_path(cache_dir: Path | None = None) -> Path:
    """Where ``demo_index`` keeps the demo index (nothing is built)."""
    return cache_root(cache_dir) / "index" / f"wiki-{demo_key(wiki_source())}"


def demo_vectors(embeddings: bool | None = None) -> bool:
    """Whether the vector cache is filled up front for the demo index: ``embeddings``, else
    ``$SIMLOOP_DEMO_VECTORS`` is ``1`` (the default is no: a run embeds as it goes)."""
    return _demo_vectors_env() if embeddings is None else embeddings


def _filled(index: Path) -> bool:
    from .encoders import encoder_id

    try:
        stamp = FilledStamp.model_validate_json((index / FILLED_FILE).read_bytes())
    except (OSError, ValidationError, ValueError):
        return False
    return stamp.encoder == encoder_id("minilm")


def demo_index_ready(cache_dir: Path | None = None, embeddings: bool | None = None) -> bool:
    """Whether ``demo_index`` would return at once (nothing left to build or fill)."""
    out = demo_index_path(cache_dir)
    return is_lucene_index(out) and (not demo_vectors(embeddings) or _filled(out))


def _clean_scratch(out: Path) -> None:
    """Scratch folders of builds that died without cleaning up (a SIGKILL); only called with
    the build lock held, so no live build is writing into them."""
    for stale in out.parent.glob(scratch_prefix(out) + "*"):
        shutil.rmtree(stale, ignore_errors=True)


def demo_index(cache_dir: Path | None = None, embeddings: bool | None = None, step: Step | None = None) -> Path:
    """The Wikipedia-summaries index, built once into ``<cache>/index/wiki-<key>`` (blocking).

    ``<cache>`` is ``cache_dir``, ``$SIMLOOP_CACHE`` or ``~/.cache/simloop``.  A file lock makes
    concurrent first calls (threads or processes) build it only once.  ``embeddings`` (default:
    ``$SIMLOOP_DEMO_VECTORS``): also fill the vector cache with its passages and sentences.
    ``step`` hears what is being waited for and may stop the build.
    """
    step = step or Step()
    out = demo_index_path(cache_dir)
    if not is_lucene_index(out):
        with held_lock(out.parent / f".{out.name}.lock", "building the demo index", step):
            if not is_lucene_index(out):  # another process may have built it while we waited
                _clean_scratch(out)
                build_index(_corpus(out, step), out, step=step,
                            note=f"building the demo index (Lucene, about a minute, once) into {out}")
    if demo_vectors(embeddings) and not _filled(out):
        with held_lock(out.parent / f".{out.name}.vectors.lock", "embedding the demo corpus", step):
            if not _filled(out):
                _fill(out, step, cache_dir)
    return out


def _corpus(out: Path, step: Step) -> Path:
    """The corpus file the index ``out`` is built from, written first if it is missing."""
    corpus = out.parent.parent / "corpus" / f"{out.name}.jsonl"
    if not corpus.is_file():
        write_wiki_corpus(corpus, step)
    return corpus


def _fill(out: Path, step: Step, cache_dir: Path | None) -> None:
    from .encoders import encoder_id

    corpus = _corpus(out, step)
    step.note("embedding the demo corpus into the vector cache (SIMLOOP_DEMO_VECTORS=1; 10-25 minutes, once)")
    passages, sentences = fill_vectors([corpus], step, cache_dir=cache_dir)
    atomic_write(out / FILLED_FILE, FilledStamp(encoder=encoder_id("minilm"), passages=passages,
                                                sentences=sentences).model_dump_json())
