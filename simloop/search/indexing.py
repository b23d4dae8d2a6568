"""Building a BM25 index (``simloop index build``, and the demo index): Anserini's indexer
run as a Java child process, into a scratch folder renamed into place when it is complete.

A child process, not the JVM inside simloop: a Java call inside the process cannot be
interrupted until it returns (a minute for the demo corpus on a busy machine), while a
child is ended at once when the build is told to stop (``Step``), and the scratch folder
removed.  Booting a second JVM for the build costs ~1 s of CPU, once per index.

``embeddings``: also fill the vector cache with the MiniLM vector of every passage and
every sentence (``vectors.fill``), after the index is in place; interrupted, the index is
complete and the cache keeps every vector computed so far (the next fill goes on from
there).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from ..errors import BadInputError, RetrievalError, SimloopError
from ..progress import NO_PROGRESS, ProgressSink
from .corpus import validate_corpus
from .jvm import java_command
from .steps import Step, Stopped

__all__ = ["is_lucene_index", "build_index", "fill_vectors", "scratch_prefix", "INDEXER"]

log = logging.getLogger(__name__)

INDEXER = "io.anserini.index.IndexCollection"
_POLL_S = 0.2  # how often a build looks at its stop flag while the indexer runs
_END_WAIT_S = 3.0  # SIGTERM to the indexer, then SIGKILL after this long


def is_lucene_index(path: Path) -> bool:
    """A Lucene index always has a ``segments_N`` commit file."""
    path = Path(path)
    return path.is_dir() and any(path.glob("segments_*"))


def scratch_prefix(out: Path) -> str:
    """The name every scratch folder of a build of ``out`` starts with (next to ``out``)."""
    return f".{Path(out).name}.build-"


def _stage_inputs(files: list[Path], inputs: Path) -> None:
    """Anserini reads a folder; link the validated files so it sees nothing else."""
    inputs.mkdir()
    for i, path in enumerate(files):
        target = inputs / f"{i:04d}-{path.stem}.jsonl"  # the suffix JsonCollection expects
        try:
            target.symlink_to(path.resolve())
        except OSError:  # no symlinks (some filesystems, Windows without privilege)
            shutil.copyfile(path, target)


def _end(proc: subprocess.Popen) -> None:
    """Stop the indexer: SIGTERM, then SIGKILL; reaped either way."""
    proc.terminate()
    try:
        proc.wait(_END_WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _indexer_failed(log_file: Path, code: int, inputs: Path) -> RetrievalError:
    lines = [ln.strip() for ln in log_file.read_text(errors="replace").splitlines() if ln.strip()]
    why = next((ln for ln in reversed(lines) if "Exception" in ln or "ERROR" in ln), lines[-1] if lines else "")
    return RetrievalError(f"Anserini wrote no index from {inputs} (exit status {code}){': ' + why if why else ''}")


def _run_indexer(inputs: Path, index: Path, threads: int, step: Step) -> int | None:
    """Anserini's IndexCollection in a child JVM; the documents it indexed (None when its
    log does not say).  Stops it, and raises ``Stopped``, when ``step`` says stop."""
    log_file = index.parent / "anserini.log"
    cmd = [*java_command(), INDEXER, "-collection", "JsonCollection", "-input", str(inputs), "-index", str(index),
           "-generator", "DefaultLuceneDocumentGenerator", "-threads", str(threads),
           "-storePositions", "-storeDocvectors", "-storeRaw"]  # fmt: skip
    with open(log_file, "wb") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        try:
            while True:
                try:
                    code = proc.wait(_POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    step.check()
        finally:
            if proc.poll() is None:  # stopped, or a Ctrl-C on the main thread
                _end(proc)
    if code in (-signal.SIGINT, -signal.SIGTERM):  # a Ctrl-C on the terminal reached it first
        raise Stopped(f"the indexer ended on signal {-code}")
    if code != 0 or not is_lucene_index(index):
        raise _indexer_failed(log_file, code, inputs)
    found = re.search(r"\bindexed:\s+([\d,]+)", log_file.read_text(errors="replace"))
    return int(found.group(1).replace(",", "")) if found else None


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
                progress: ProgressSink = NO_PROGRESS, *, step: Step | None = None,
                note: str = "indexing (BM25)") -> int:
    """Index a JsonCollection corpus (a .jsonl file or a folder of them) into ``out``.

    The corpus is validated first (DataFileError names file, line and field); the index is
    built in a scratch folder next to ``out`` and renamed into place, so a failure or a
    stop leaves nothing half-written.  ``embeddings``: then fill the vector cache with
    every passage's and sentence's MiniLM vector (``fill_vectors``; ~20-50 ms of CPU per
    passage, ~10 ms per sentence, once per machine).  ``step`` (or ``progress``) hears
    each phase (``note``: what the Lucene phase is called) and counts the embedded texts.
    Returns the number of documents indexed.
    """
    if threads < 1:  # was silently raised to 1: a typo should not pass as a setting
        raise BadInputError(f"--threads {threads}: must be at least 1")
    step = step or Step(progress)
    files, lines = validate_corpus(Path(corpus))
    out = Path(out).expanduser()
    _check_target(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=scratch_prefix(out), dir=out.parent))
    try:
        _stage_inputs(files, scratch / "input")
        log.info("indexing %d documents from %s", lines, corpus)
        step.note(note)  # Anserini reports nothing while it runs
        count = _run_indexer(scratch / "input", scratch / "index", threads, step)
        _install(scratch / "index", out, scratch)
    except (SimloopError, KeyboardInterrupt):
        raise
    except Exception as exc:
        raise RetrievalError(f"indexing {corpus} into {out} failed: {exc}") from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    log.info("indexed %s documents into %s", count if count is not None else lines, out)
    if embeddings:
        fill_vectors(files, step)
    return count if count is not None else lines


def fill_vectors(files: list[Path], step: Step, cache_dir: Path | None = None) -> tuple[int, int]:
    """Every passage and sentence of the corpus ``files`` into the vector cache (MiniLM) of
    ``cache_dir`` (default: ``settings.cache_root``); returns (passages, sentences) in the corpus."""
    from .encoders import load_minilm, vector_cache
    from .minilm import blas_threads
    from .vectors import encode_blocking, fill

    step.note("preparing: MiniLM")
    encode = encode_blocking(load_minilm())
    cache = vector_cache("minilm", cache_dir)
    try:
        # A fill is one long batch job with nothing else to share the cores with, unlike a
        # run (where MiniLM keeps to one thread): every core here, ~1.5x faster on 2.
        with blas_threads(os.cpu_count() or 1):
            return fill(files, encode, cache, step)
    finally:
        cache.close()
