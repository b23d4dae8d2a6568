"""Every LLM role of simloop, run once each through the real CLI against one endpoint, and
what its output says about the protocol (shared by scripts/bench_real_llm.py and
tests/llm/test_real_model.py).

A role is a command line: the LLM simulator with an offline assistant, each LLM reference
agent with the offline simulator, the ``summary`` and ``adaptive`` memories with their LLM
(GenAIus's summary, ACMS's LLM block compression), ``simloop memory`` with an LLM
assistant, ``rehearse`` against ``simloop serve`` whose user is the LLM simulator, and
``eval --judge``.  Each runs bounded (one dialogue, a few turns).

``check`` reads what the role wrote and sorts every failure:

* a protocol error: the endpoint refused what simloop sent (an HTTP error status: a
  parameter it does not take, a prompt longer than its window) or answered with something
  that is not a chat completion.  The target is none.
* a botched output, which the model is allowed: rejected and asked again (``retries``),
  repaired (structured output), or, when every attempt failed, recorded as the dialogue's
  or the stage's error with its reason.
* an invalid output recorded as a user's utterance: a recorded utterance the LLM voice's
  own check rejects now.  The target is none.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_common import ROOT, _free_port

MODEL = "smollm2"
TOKEN_ENV = "REAL_LLM_BENCH_TOKEN"  # rehearse's bearer token for the local serve (not a SIMLOOP_* setting)
AGENTS = ("genaius", "nii_rtg", "nii_gtr", "iiuot", "acms")
# Protocol failures: the endpoint refused the request or did not answer with a completion.
PROTOCOL_TYPES = ("LLMStatusError", "ContextOverflowError")
NOT_A_COMPLETION = "did not answer with a chat completion"
# The roles' completion budget.  A 135M model that loses the thread writes until the budget
# is spent (JSON that never closes, a lecture instead of a question), ~25-40 tokens a second
# on 2 shared cores: at the default 512 one such call costs 15-20 s.  The outputs the roles
# need are shorter than this; a cut one is a botched output like any other.
MAX_TOKENS = 256

__all__ = ["Role", "ROLES", "RoleResult", "run_role", "check", "MODEL", "AGENTS", "GENAIUS"]


@dataclass(frozen=True)
class Role:
    name: str
    args: tuple[str, ...]  # after `simloop`, before the endpoint flags
    kind: str = "run"  # run | memory | rehearse | eval (eval judges the run of `judges`)
    judges: str = ""


_RUN = ("--limit", "1", "--no-progress")
# GenAIus puts its top-k passages in one prompt; k=5 instead of 20 keeps that prompt near
# 1,000 tokens (prompt processing is most of a call's time on 2 CPU cores).
GENAIUS = ("--assistant", "genaius", "--assistant-param", "k=5")
ROLES: tuple[Role, ...] = (
    Role("simulator_llm", ("run", "--simulator", "llm", "--assistant", "bm25_extractive", "--max-turns", "3", *_RUN)),
    *(Role(f"agent_{a}", ("run", "--simulator", "offline", *(GENAIUS if a == "genaius" else ("--assistant", a)),
                          "--max-turns", "2", *_RUN)) for a in AGENTS),
    Role("memory_summary", ("run", "--simulator", "offline", *GENAIUS, "--assistant-param", "memory=summary",
                            "--max-turns", "3", *_RUN)),
    # ACMS with the LLM compressor and a small budget, so that older turns fall out of the
    # window into blocks the LLM condenses.
    Role("memory_adaptive", ("run", "--simulator", "offline", "--assistant", "acms", "--assistant-param",
                             "compressor=llm", "--assistant-param", "token_budget=700", "--assistant-param",
                             "system_tokens=100", "--max-turns", "6", *_RUN)),
    Role("memory_command", ("memory", *GENAIUS, "--strategies", "summary", "--distances", "2",
                            "--persona", "aroha", "--facts-per-persona", "1", "--no-progress"), kind="memory"),
    Role("rehearse_llm_simulator", ("rehearse", "--assistant", "bm25_extractive", "--limit", "1"), kind="rehearse"),
    Role("eval_judge", ("eval",), kind="eval", judges="simulator_llm"),
)


@dataclass
class RoleResult:
    name: str
    code: int | None = None
    seconds: float = 0.0
    run_dirs: list[str] = field(default_factory=list)
    dialogues: int = 0
    dialogues_without_error: int = 0
    dialogues_without_protocol_error: int = 0
    llm_calls: int = 0  # stages that asked the model (each 1 + retries requests)
    llm_failed: int = 0
    retries: int = 0  # rejected or failed answers asked again, and structured repairs
    verdicts: int = 0  # eval --judge: the judge's grades that came out
    protocol_errors: list[str] = field(default_factory=list)
    botched: list[str] = field(default_factory=list)  # errors a model's output caused, with their reasons
    unexplained: list[str] = field(default_factory=list)  # an error recorded without a reason
    invalid_utterances: list[str] = field(default_factory=list)
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        """Finished at least one dialogue (for eval: judged one) without a protocol error,
        and ended as a command should (0, or 1 for "every dialogue or call failed", which
        says why; no traceback).  A model's botched output may end a dialogue: the error
        records its reason, and the protocol worked."""
        return (self.code in (0, 1) and "Traceback" not in self.stderr_tail
                and self.dialogues_without_protocol_error > 0)

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "stderr_tail"}
        out.update(ok=self.ok, protocol_errors=self.protocol_errors[:5], botched=self.botched[:5],
                   invalid_utterances=self.invalid_utterances[:5])
        out["counts"] = {"protocol_errors": len(self.protocol_errors), "botched": len(self.botched),
                         "invalid_utterances": len(self.invalid_utterances)}
        if not self.ok:
            out["stderr_tail"] = self.stderr_tail[-1500:]
        return out


def _cli(args: Sequence[str], env: dict[str, str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "simloop", *args], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=timeout_s, stdin=subprocess.DEVNULL)


@contextmanager
def _serve(url: str, out: Path, env: dict[str, str]) -> Iterator[str]:
    """``simloop serve`` whose user is the LLM simulator, on 127.0.0.1; its API URL."""
    port = _free_port()
    log = open(out / "serve.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "simloop", "serve", "--simulator", "llm", "--base-url", url,
                             "--model", MODEL, "--port", str(port), "--out", str(out / "served"), "--max-turns", "3",
                             "--no-access-log"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log_text = (out / "serve.log").read_text()[-500:]
                    raise RuntimeError(f"simloop serve did not start: {log_text}") from None
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()  # by its pid: our own child
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def run_role(role: Role, url: str, out: Path, done: dict[str, RoleResult] | None = None,
             timeout_s: float = 900, max_tokens: int | None = MAX_TOKENS) -> RoleResult:
    """Run ``role`` against the endpoint ``url`` with its output under ``out``; checked.
    ``max_tokens``: every role's completion budget (``SIMLOOP_LLM__DEFAULT__MAX_TOKENS``)."""
    out.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in (TOKEN_ENV,)}
    if max_tokens is not None:
        env["SIMLOOP_LLM__DEFAULT__MAX_TOKENS"] = str(max_tokens)
    endpoint = ("--base-url", url, "--model", MODEL)
    t0 = time.perf_counter()
    result = RoleResult(role.name)
    if role.kind == "eval":
        target = (done or {}).get(role.judges)
        if target is None or not target.run_dirs:
            result.stderr_tail = f"no run of {role.judges} to judge"
            return result
        run_dir = target.run_dirs[0]
        p = _cli(["eval", run_dir, "--judge", "--judge-base-url", url, "--judge-model", MODEL], env, timeout_s)
        result.run_dirs = [run_dir]
    elif role.kind == "rehearse":
        env[TOKEN_ENV] = "bench-token"
        try:
            with _serve(url, out, {**env, "SIMLOOP_SERVE_TOKENS": f"bench={env[TOKEN_ENV]}"}) as api:
                p = _cli([*role.args, "--api", api, "--token-env", TOKEN_ENV, "--out", str(out / "rehearse"),
                          "--run-id", "rehearse-real-llm"], env, timeout_s)
        except RuntimeError as exc:  # the server did not start: the role failed, the others go on
            result.stderr_tail = str(exc)
            return result
        result.run_dirs = [str(d.parent) for d in sorted((out / "served").glob("*/dialogues.jsonl"))]
    else:
        p = _cli([*role.args, *endpoint, "--out", str(out)], env, timeout_s)
    result.code, result.seconds = p.returncode, round(time.perf_counter() - t0, 1)
    result.stderr_tail = p.stderr[-3000:]
    if role.kind in ("run", "memory") and p.stdout.strip():
        result.run_dirs = [p.stdout.strip().splitlines()[-1]]
    check(role, result)
    return result


def _is_protocol(kind: str, message: str) -> bool:
    return kind in PROTOCOL_TYPES or NOT_A_COMPLETION in message


def _stage_error(result: RoleResult, error: str) -> None:
    kind = error.split(":", 1)[0]
    if _is_protocol(kind, error):
        result.protocol_errors.append(error[:300])
    elif len(error.split(":", 1)) < 2 or not error.split(":", 1)[1].strip():
        result.unexplained.append(error)
    else:
        result.botched.append(error[:300])


def _count_calls(result: RoleResult, calls: Any) -> bool:
    """Count LLM ``calls`` (stages) into ``result``; True when one failed on the protocol."""
    protocol = False
    for s in calls:
        result.llm_calls += 1
        result.retries += s.retries
        if s.error:
            result.llm_failed += 1
            before = len(result.protocol_errors)
            _stage_error(result, s.error)
            protocol = protocol or len(result.protocol_errors) > before
    return protocol


def check(role: Role, result: RoleResult) -> None:
    """Fill ``result`` from what ``role`` wrote in ``result.run_dirs``."""
    from simloop.run import read_transcripts

    if role.kind == "eval":
        _check_judge(result)
        return
    for run_dir in result.run_dirs:
        for t in read_transcripts(Path(run_dir)):
            result.dialogues += 1
            stages = t.all_stages()
            protocol = _count_calls(result, [s for s in stages if s.is_llm_call()])
            if t.error is not None:
                if _is_protocol(t.error.type, t.error.message):
                    protocol = True
                    result.protocol_errors.append(f"{t.error.type}: {t.error.message[:300]}")
                elif not t.error.message.strip():
                    result.unexplained.append(t.error.type)
            result.dialogues_without_error += t.error is None
            result.dialogues_without_protocol_error += not protocol
            if t.simulator.name == "llm":
                result.invalid_utterances += invalid_utterances(t)


def invalid_utterances(t: Any) -> list[str]:
    """The recorded user utterances (and closing line) that the LLM voice's check rejects."""
    from simloop.simulators import Action, invalid_reason

    bad: list[str] = []
    said: list[str] = []
    replies: list[str] = []
    for turn in t.turns:
        intent = turn.user.intent if turn.user.intent in ("ask", "reask", "clarify", "move_on") else "ask"
        why = invalid_reason(turn.user.utterance, Action(intent), earlier=said, replies=replies)  # type: ignore[arg-type]
        if why is not None:
            bad.append(f"turn {turn.index}: {why}: {turn.user.utterance[:120]!r}")
        said.append(turn.user.utterance)
        replies.append(turn.assistant.response)
    if t.stop.utterance:
        why = invalid_reason(t.stop.utterance, Action("farewell"), earlier=said, replies=replies)
        if why is not None:
            bad.append(f"closing line: {why}: {t.stop.utterance[:120]!r}")
    return bad


def _check_judge(result: RoleResult) -> None:
    from simloop.evaluate import DialogueScores

    for run_dir in result.run_dirs:
        path = Path(run_dir) / "scores.jsonl"
        raws = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        for raw in filter(str.strip, raws):
            judge = DialogueScores.model_validate_json(raw).judge
            if judge is None:
                continue
            result.dialogues += 1
            verdicts = len(judge.rubric_groups) + (judge.dialogue_scores is not None)
            result.verdicts += verdicts
            protocol = _count_calls(result, judge.stages)
            result.dialogues_without_error += not judge.errors and verdicts > 0
            result.dialogues_without_protocol_error += not protocol  # judged; failures said why
