"""`simloop eval`: score a run directory and write ``scores.jsonl`` and ``summary.json``.

``summary.json`` keys (DESIGN §11): ``"stats"`` always; ``"ptkb"`` when gold PTKB
provenance exists; ``"passages"`` with ``--qrels``; ``"judge"`` with ``--judge``.
``scores.jsonl`` holds one line per dialogue with its per-turn values, so a user can
find the turns that pulled a mean down.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..errors import BadInputError, ConfigError, DataFileError, first_error
from ..files import atomic_write, check_in_file, check_run_dir, file_sha256
from ..loop import run as run_loop
from ..progress import NO_PROGRESS, ProgressSink
from ..run import DIALOGUES, ReadReport, read_manifest, read_transcripts
from ..schema import RunManifest, Transcript
from .formats import (
    DialogueJudgeScores,
    DialogueScores,
    EvaluatedInput,
    PassageMetrics,
    PtkbMetrics,
    PtkbReference,
    ReadNotes,
    RunSummary,
    TurnScores,
)
from .provenance import ikat_qid, passage_scores, ptkb_scores, read_passage_qrels, read_ptkb_qrels, turn_key
from .stats import mean_grade, run_stats

if TYPE_CHECKING:
    from ..llm import LLMConfig
    from .judge import ChatLike, JudgeResult

__all__ = [
    "EvalOptions", "Evaluation", "check_options", "evaluate_run", "evaluate_transcripts", "write_evaluation",
    "load_summary", "load_scores", "IKAT23_PTKB", "is_ikat2023_run", "resolve_source",
    "load_run", "SUMMARY", "SCORES", "stale_reason", "reeval_options",
]

SUMMARY = "summary.json"
SCORES = "scores.jsonl"

# Official iKAT 2023 PTKB statement ranking, from the NII paper's Table II.
IKAT23_PTKB = {
    "baseline": {"nDCG@3": 0.3434, "P@3": 0.2687, "R@3": 0.3099},
    "best": {"nDCG@3": 0.7254, "P@3": 0.4626, "R@3": 0.6964},
    "source": "TREC iKAT 2023 PTKB statement ranking (NII paper, Table II)",
}
_IKAT23_TOPIC = re.compile(r"^\d+-\d+$")


@dataclass
class EvalOptions:
    qrels: Path | None = None
    ptkb_qrels: Path | None = None
    judge: bool = False
    judge_base_url: str | None = None
    judge_model: str | None = None
    judge_concurrency: int = 8


def check_options(opts: EvalOptions) -> None:
    """Bad evaluation input, found before anything is read or written."""
    if opts.judge_concurrency < 1:
        raise BadInputError("--judge-concurrency must be at least 1")
    for flag, path in (("--qrels", opts.qrels), ("--ptkb-qrels", opts.ptkb_qrels)):
        if path is not None:
            check_in_file(path, flag=flag)


@dataclass
class Evaluation:
    summary: RunSummary
    scores: list[DialogueScores] = field(default_factory=list)


def resolve_source(path: str | Path, run_dir: Path) -> Path | None:
    """A path recorded in run.json: as written (absolute, or relative to where the run
    started), else relative to the folder holding ``transcripts/`` (runs usually start at
    the repo root) or the run folder.  A run
    copied to another checkout or machine records paths that are not there: the path's
    tails are then tried under the repo root and the folder beside it
    (``/old/simloop/personas`` -> ``ROOT/personas``, ``/old/shared/data/x.json`` ->
    ``ROOT/../shared/data/x.json``), the longest first."""
    p = Path(path)
    root = Path(run_dir).resolve().parent.parent
    tails = [Path(*p.parts[i:]) for i in range(1, len(p.parts))] if p.is_absolute() else []
    cands = [p, root / p, Path(run_dir) / p] + [base / tail for tail in tails for base in (root, root.parent)]
    return next((cand for cand in cands if cand.exists()), None)


def _topic_file(path: Path | None) -> tuple[int | None, int | None]:
    """(year: 2023, 2024 or 2025 from its shape, conversations in it) of an iKAT topic file
    (see data/ikat/README.md); None for what cannot be told."""
    try:
        entries = json.loads(path.read_text(encoding="utf-8")) if path is not None else None
    except (OSError, ValueError):
        return None, None
    if not isinstance(entries, list) or not entries or not isinstance(entries[0], dict):
        return None, None
    first = entries[0]
    year = 2025 if "responses" in first else 2024 if isinstance(first.get("number"), int) else \
        2023 if "turns" in first else None
    return year, len(entries) if year == 2023 else None  # a 2023 entry is one conversation


def _replayed_topic_file(manifest: RunManifest | None, run_dir: Path | None) -> Path | None:
    topics = ((manifest.config.get("scenarios") or {}).get("topics") if manifest is not None else None)
    return resolve_source(topics, run_dir or Path(".")) if topics else None


def is_ikat2023_run(transcripts: Sequence[Transcript], manifest: RunManifest | None = None,
                    run_dir: Path | None = None) -> bool:
    """Did the run replay iKAT 2023 topics?  2025 topics are also numbered ``<n>-<m>``, so
    the topic file named in run.json decides when it can be read; the ids otherwise."""
    replayed = bool(transcripts) and all(
        _IKAT23_TOPIC.match(t.scenario.topic_id) and any(x.gold is not None for x in t.turns) for t in transcripts
    )
    year, _ = _topic_file(_replayed_topic_file(manifest, run_dir))
    return replayed and year in (None, 2023)


def _ptkb_reference(transcripts: Sequence[Transcript], scored: PerTurn, manifest: RunManifest | None,
                    run_dir: Path | None) -> PtkbReference:
    """The official figures, with how many of the topic file's conversations the run scored."""
    conversations = {t.scenario.topic_id for t in transcripts if any(turn_key(t, x) in scored for x in t.turns)}
    _, total = _topic_file(_replayed_topic_file(manifest, run_dir))
    return PtkbReference.model_validate({**IKAT23_PTKB, "conversations": len(conversations),
                                         "conversations_total": total})


PerTurn = dict[str, dict[str, float]]  # turn_key -> metric -> value


def _turn_rows(t: Transcript, ptkb_per: PerTurn, psg_per: PerTurn) -> list[TurnScores]:
    return [TurnScores(index=turn.index, qid=ikat_qid(t, turn), grade=turn.user.grade, rubric_id=turn.user.rubric_id,
                       latency_ms=turn.latency_ms, ptkb=ptkb_per.get(turn_key(t, turn)),
                       passages=psg_per.get(turn_key(t, turn)))
            for turn in t.turns]


def _score_lines(transcripts: Sequence[Transcript], ptkb_per: PerTurn, psg_per: PerTurn,
                 judge_per: dict[str, DialogueJudgeScores] | None) -> list[DialogueScores]:
    return [DialogueScores(
        run_id=t.run_id, dialogue_id=t.dialogue_id, persona_id=t.scenario.persona_id, topic_id=t.scenario.topic_id,
        stop_reason=t.stop.reason, turn_count=len(t.turns), mean_grade=mean_grade(t),
        turns=_turn_rows(t, ptkb_per, psg_per),
        judge=(judge_per or {}).get(t.dialogue_id),
    ) for t in transcripts]


def _judge_config(manifest: RunManifest, opts: EvalOptions) -> LLMConfig:
    """The run's own LLM config with the CLI's ``judge`` overrides on top."""
    from ..llm import LLMConfig, role_setting

    try:
        cfg = LLMConfig.model_validate(manifest.config.get("llm") or {})
    except ValidationError as exc:  # one line, as every config error (a key in an old run's base_url)
        where, msg = first_error(exc)
        raise ConfigError(f"run.json config.llm.{where}: {msg}") from None
    over = {k: role_setting(flag, k, v) for k, v, flag in (("base_url", opts.judge_base_url, "--judge-base-url"),
                                                           ("model", opts.judge_model, "--judge-model")) if v}
    if over:
        judge = cfg.roles.get("judge")
        roles = {**cfg.roles, "judge": {**(judge.settings() if judge else {}), **over}}
        cfg = LLMConfig.model_validate({**cfg.model_dump(exclude_unset=True), "roles": roles})
    return cfg


def check_judge(manifest: RunManifest, opts: EvalOptions) -> None:
    """``--judge``: an endpoint to call, and one that answers ``GET /models``, found before
    any scoring and before anything is written (DESIGN §12), as `simloop run` does for its
    roles; else every call fails after its retries and the scores are null."""
    from ..llm import check_endpoints, check_judge_llm

    cfg = _judge_config(manifest, opts)
    check_judge_llm(cfg.resolve("judge"), "--judge-base-url and --judge-model")
    check_endpoints(cfg, ["judge"], flag="--judge-base-url")


async def _run_judge(transcripts: Sequence[Transcript], manifest: RunManifest | None, opts: EvalOptions,
                     chat: ChatLike | None, progress: ProgressSink) -> JudgeResult:
    """The judge over every dialogue: ``chat`` when given, else the ``judge`` role of the
    run's own LLM config with the CLI's overrides on top."""
    from ..llm import LLMPool
    from .judge import judge_transcripts

    if chat is not None:
        return await judge_transcripts(transcripts, chat, opts.judge_concurrency, model=opts.judge_model,
                                       progress=progress)
    if manifest is None:
        raise BadInputError("--judge needs the run's run.json (for the judge model) "
                            "or --judge-model/--judge-base-url")
    cfg = _judge_config(manifest, opts)
    pool = LLMPool(cfg)
    try:
        return await judge_transcripts(transcripts, pool.model("judge"), opts.judge_concurrency,
                                       model=cfg.resolve("judge").model, progress=progress)
    finally:
        await pool.aclose()


async def evaluate_transcripts(transcripts: Sequence[Transcript], opts: EvalOptions,
                               manifest: RunManifest | None = None, chat: ChatLike | None = None,
                               run_dir: Path | None = None, progress: ProgressSink = NO_PROGRESS) -> Evaluation:
    """Everything ``simloop eval`` computes, without touching the disk (the report uses it too).

    ``chat`` lets tests and callers hand in a ready judge model; otherwise it is built from
    the run's config.  ``progress`` counts the judge's calls (minutes on a large run).
    """
    summary = RunSummary(stats=run_stats(transcripts))
    ptkb_qrels = read_ptkb_qrels(opts.ptkb_qrels) if opts.ptkb_qrels else None
    ptkb = ptkb_scores(transcripts, ptkb_qrels)
    if ptkb_qrels is not None and ptkb.summary is None and transcripts:
        # Asked for explicitly, so never dropped without a word (DESIGN §12: bad input, exit 2).
        example = next((ikat_qid(t, turn) for t in transcripts for turn in t.turns), "none")
        raise DataFileError(
            f"{opts.ptkb_qrels}: none of its {len(ptkb_qrels)} query ids (e.g. {next(iter(ptkb_qrels), 'none')!r}) "
            f"names a turn of this run (e.g. {example!r}); PTKB qrels fit runs that replay the same iKAT topics "
            "(--simulator replay --topics FILE)")
    if ptkb.summary is not None:
        summary.ptkb = PtkbMetrics.model_validate({**ptkb.summary, "gold": _ptkb_gold_name(opts, manifest)})
        if is_ikat2023_run(transcripts, manifest, run_dir):
            summary.ptkb_reference = _ptkb_reference(transcripts, ptkb.per_turn, manifest, run_dir)
    psg_per: PerTurn = {}
    if opts.qrels is not None:
        psg = passage_scores(transcripts, read_passage_qrels(opts.qrels))
        summary.passages = PassageMetrics.model_validate({**psg.summary, "qrels": opts.qrels.name})
        psg_per = psg.per_turn
    judge_per = None
    if opts.judge:
        judged = await _run_judge(transcripts, manifest, opts, chat, progress)
        summary.judge, judge_per = judged.summary, judged.per_dialogue
    return Evaluation(summary, _score_lines(transcripts, ptkb.per_turn, psg_per, judge_per))


def _ptkb_gold_name(opts: EvalOptions, manifest: RunManifest | None) -> str:
    """What the PTKB metrics were scored against, as eval and the report show it: the
    official 2023 figures come from NIST's qrels, a replay's topic file has its own gold."""
    if opts.ptkb_qrels is not None:
        return Path(opts.ptkb_qrels).name
    topics = (manifest.config.get("scenarios") or {}).get("topics") if manifest is not None else None
    return f"topic file {Path(topics).name}" if topics else "topic file"


def _absolute(path: Path | None) -> str | None:
    return str(Path(path).resolve()) if path is not None else None


def _with_header(summary: RunSummary, run_dir: Path, manifest: RunManifest | None, report: ReadReport,
                 evaluated: EvaluatedInput) -> RunSummary:
    head: dict[str, Any] = {"run_dir": str(run_dir), "evaluated_at": datetime.now(UTC),
                            "evaluated": evaluated}
    if manifest is not None:
        head.update(run_id=manifest.run_id, assistant=manifest.assistant.name, simulator=manifest.simulator.name,
                    status=manifest.status)
    if report.torn_tail or report.bad_lines:
        head["read_notes"] = ReadNotes(torn_tail=report.torn_tail, bad_lines=report.bad_lines)
    return summary.model_copy(update=head)


def load_run(run_dir: Path) -> tuple[RunManifest | None, list[Transcript], ReadReport]:
    """Manifest (None when run.json is missing: a copied dialogues file still evaluates)."""
    check_run_dir(run_dir)
    report = ReadReport()
    # run.json first: a run of another schema version is refused by its name there.
    manifest = read_manifest(run_dir) if (Path(run_dir) / "run.json").exists() else None
    transcripts = list(read_transcripts(run_dir, report))
    return manifest, transcripts, report


def evaluate_run(run_dir: Path, opts: EvalOptions, chat: ChatLike | None = None,
                 progress: ProgressSink = NO_PROGRESS) -> Evaluation:
    # The digest before the read: a run still writing then looks stale later, never fresh.
    digest = file_sha256(Path(run_dir) / DIALOGUES)
    manifest, transcripts, report = load_run(run_dir)
    if opts.judge and chat is None and manifest is not None:
        check_judge(manifest, opts)
    ev = run_loop(evaluate_transcripts(transcripts, opts, manifest, chat, Path(run_dir), progress))
    evaluated = EvaluatedInput(dialogues=len(transcripts), dialogues_sha256=digest, qrels=_absolute(opts.qrels),
                               ptkb_qrels=_absolute(opts.ptkb_qrels), judge=opts.judge)
    ev.summary = _with_header(ev.summary, Path(run_dir), manifest, report, evaluated)
    return ev


def stale_reason(run_dir: Path, summary: RunSummary, transcripts: Sequence[Transcript]) -> str | None:
    """Why ``summary.json`` (and ``scores.jsonl``, written with it) no longer describes the
    run's transcripts, as after a ``--resume``; None when it still does.  Summaries written
    before the digest existed are checked by their dialogue count."""
    ev = summary.evaluated
    counted = ev.dialogues if ev is not None else summary.stats.dialogues
    if len(transcripts) != counted:
        return f"it evaluated {counted} dialogue(s), {DIALOGUES} now holds {len(transcripts)}"
    if ev is not None and ev.dialogues_sha256 and ev.dialogues_sha256 != file_sha256(Path(run_dir) / DIALOGUES):
        return f"{DIALOGUES} changed after it was evaluated"
    return None


def reeval_options(summary: RunSummary | None) -> tuple[EvalOptions, list[str]]:
    """Options to score a run again as its last `simloop eval` did, without the judge (it
    costs money); notes say what could not be redone."""
    ev = summary.evaluated if summary is not None else None
    if ev is None:
        return EvalOptions(), []
    opts, notes = EvalOptions(), []
    for attr, flag in (("qrels", "--qrels"), ("ptkb_qrels", "--ptkb-qrels")):
        path = getattr(ev, attr)
        if path and Path(path).is_file():
            setattr(opts, attr, Path(path))
        elif path:
            notes.append(f"{flag} {path} is gone; those metrics are left out")
    if ev.judge:
        notes.append("judge scores are left out (re-run `simloop eval --judge` for them)")
    return opts, notes


def write_evaluation(run_dir: Path, ev: Evaluation) -> tuple[Path, Path]:
    run_dir = Path(run_dir)
    scores, summary = run_dir / SCORES, run_dir / SUMMARY
    atomic_write(scores, "".join(line.to_json_line() for line in ev.scores))
    atomic_write(summary, ev.summary.to_json())
    return scores, summary


def load_summary(run_dir: Path) -> RunSummary | None:
    """``summary.json`` of a run, validated; None when the run was not evaluated."""
    path = Path(run_dir) / SUMMARY
    if not path.exists():
        return None
    try:
        return RunSummary.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        where, msg = first_error(exc)
        raise BadInputError(f"{path}: {where or 'not valid JSON'}: {msg}; rerun `simloop eval {run_dir}`") from None


def load_scores(run_dir: Path) -> list[DialogueScores] | None:
    """``scores.jsonl`` of a run, validated; None when the run was not evaluated."""
    path = Path(run_dir) / SCORES
    if not path.exists():
        return None
    lines = []
    for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if raw.strip():
            try:
                lines.append(DialogueScores.model_validate_json(raw))
            except ValidationError as exc:
                where, msg = first_error(exc)
                raise BadInputError(f"{path}:{lineno}: {where}: {msg}; rerun `simloop eval {run_dir}`") from None
    return lines
