"""Realism — do the offline simulator's utterances read like real iKAT users? (issue 11)

A demo run (offline simulator + ``bm25_extractive`` over ``personas/``, a real ``simloop
run`` subprocess; the full bench runs every persona x topic twice, ``--repeat 2``, so the
figures also see variation across seeds) is compared with every user ``utterance`` of the
real topic files ``2023_train_topics.json``, ``2023_test_topics.json`` and
``2024_test_topics.json``.  One function computes every statistic on both sides.

The utterances of a demo dialogue are everything its user says: the turns' ``user.utterance``
and the closing line (``stop.utterance``, or in transcripts made before the closing line
moved there, the ``farewell``/``give_up`` turn).  The real topic files record the user's
closing thanks as ordinary turns, so counting it keeps the comparison like for like.

Statistics (``tokens`` = lower-cased ``[a-z0-9]+('[a-z]+)?`` matches unless said otherwise):

* ``words_per_utterance`` — mean number of whitespace-separated words per utterance.
  Target: within ±30% of the real mean.
* ``distinct2`` — distinct word bigrams / all word bigrams (bigrams within an utterance, of
  its tokens).  The ratio falls as a set grows, so both sides are measured at one size:
  the mean over 20 seeded random samples of 200 utterances (fewer if the set is smaller).
  Target ≥ 0.55 (the real files give 0.66-0.70 each, whole).
* ``verbatim_rubric_share`` — among utterances that carry a question to answer (demo: turns
  with a ``rubric_id``; real: every turn, whose ``resolved_utterance`` is the self-contained
  question), the share whose tokens contain the question's tokens as one contiguous run,
  i.e. repeat it word for word.  Target ≤ 0.20.
* ``backreference_share`` — share of utterances that lead with a back-reference: one of
  it, that, this, they, those among the first four letter-only tokens (``[a-z]+``, so
  "That's" gives "that" and "s"; "OK, and is it ..." counts, a pronoun deep in a long
  question does not; four is the lead length that gives the real 0.17 quoted in issue 11).
  Target ≥ 0.10.  A reaction such as "That's nice." counts too (it does refer back), so the
  details also give ``backreference_request_share``: the same test on the request alone,
  the last sentence with a "?" (else the last sentence); real 0.11.
* ``non_question_share`` — share of utterances with no "?" at all (statements, feedback,
  thanks).  Real 0.27.  Target 0.10-0.40.
* ``top_utterance_share`` — occurrences of the most frequent utterance (compared by its
  tokens) / all utterances.  Target ≤ 0.01.

Also reported (details): the demo's satisfied share (all dialogues and the first repeat,
which is the default demo), and per-file real values.  Skips with one line when the iKAT
data folder is missing (set ``SIMLOOP_IKAT_DATA`` to point at it).

The voice on real iKAT personas (issue 34): each topic file is converted with ``simloop
personas from-ikat`` and the offline simulator runs ``bm25_extractive`` over the personas
(a real ``simloop run`` subprocess, each persona once; with ``--quick`` the first
``IKAT_QUICK_LIMIT`` dialogues), compared with the real users of the same file.  Figures
``voice_ikat23_*`` (the 2023 test topics) and ``voice_ikat24_*`` (the 2024 topics), with the
targets of the demo: words per utterance within ±30% of that file's real mean, distinct-2
≥ 0.55, and word-for-word rubric questions ≤ 0.25 (the rubric question of such a persona
is the resolved utterance, which the real 2023 test users typed word for word 22% of the
time).  The voice was tuned on the personas of ``2023_train_topics.json`` (reported in the
details as ``ikat23_train``, with no figure) and never on the two report files.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from bench_common import ROOT, figure, ikat_dir, info, range_figure

REAL_FILES = ("2023/2023_train_topics.json", "2023/2023_test_topics.json", "2024/2024_test_topics.json")
# figure prefix -> topic file converted into personas (None: details only, the tuning set)
IKAT_SETS = {"ikat23_train": (None, "2023/2023_train_topics.json"),
             "ikat23": ("voice_ikat23", "2023/2023_test_topics.json"),
             "ikat24": ("voice_ikat24", "2024/2024_test_topics.json")}
IKAT_QUICK_LIMIT = 6
IKAT_VERBATIM_TARGET = 0.25
BACK_REFERENCES = frozenset({"it", "that", "this", "they", "those"})
LEAD_TOKENS = 4
SAMPLE_SIZE, SAMPLES = 200, 20
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_LETTERS = re.compile(r"[a-z]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_CLOSING_INTENTS = {"farewell", "give_up"}  # the closing line, in transcripts that made it a turn

# (text, the question it must not repeat word for word, or None)
Utterance = tuple[str, str | None]


def real_utterances(folder: Path, files: tuple[str, ...] = REAL_FILES) -> list[Utterance]:
    out: list[Utterance] = []
    for name in files:
        for conv in json.loads((folder / name).read_text()):
            out += [(t["utterance"], t["resolved_utterance"]) for t in conv["turns"]]
    return out


def demo_utterances(run_dir: Path, personas_dir: Path) -> tuple[list[Utterance], list[dict[str, Any]]]:
    """(utterances with their rubric questions, transcripts) of a finished run."""
    from simloop.inputs import load_personas

    questions = {(t.id, q.id): q.question for p in load_personas(personas_dir) for t in p.topics for q in t.rubric}
    dialogues = [json.loads(line) for line in (run_dir / "dialogues.jsonl").read_text().splitlines() if line.strip()]
    out: list[Utterance] = []
    for d in dialogues:
        topic = d["scenario"]["topic_id"]
        for turn in d["turns"]:
            rubric = None if turn["user"].get("intent") in _CLOSING_INTENTS else turn["user"].get("rubric_id")
            out.append((turn["user"]["utterance"], questions.get((topic, rubric)) if rubric else None))
        closing = (d.get("stop") or {}).get("utterance")
        if closing:
            out.append((closing, None))
    return out, dialogues


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def distinct2(texts: list[str]) -> float:
    bigrams = [bg for t in texts for bg in zip(tokens(t), tokens(t)[1:])]
    return len(set(bigrams)) / len(bigrams) if bigrams else 0.0


def sampled_distinct2(texts: list[str], size: int = SAMPLE_SIZE, samples: int = SAMPLES) -> float:
    """distinct-2 at a fixed set size (see the module docstring)."""
    rng = random.Random(0)
    k = min(size, len(texts))
    return sum(distinct2(rng.sample(texts, k)) for _ in range(samples)) / samples


def _contains(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return n > 0 and any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


def leads_with_back_reference(text: str) -> bool:
    return bool(BACK_REFERENCES & set(_LETTERS.findall(text.lower())[:LEAD_TOKENS]))


def request_part(text: str) -> str:
    """The last sentence that asks something, else the last sentence."""
    sents = [s for s in _SENTENCE.split(text.strip()) if s]
    return ([s for s in sents if "?" in s] or sents or [""])[-1]


def statistics(utts: list[Utterance]) -> dict[str, Any]:
    """Every realism statistic of a set of utterances (the same code for demo and real)."""
    texts = [t for t, _ in utts]
    n = len(texts)
    asked = [(tokens(t), tokens(q)) for t, q in utts if q]
    top, top_count = Counter(" ".join(tokens(t)) for t in texts).most_common(1)[0]
    return {
        "utterances": n,
        "words_per_utterance": round(sum(len(t.split()) for t in texts) / n, 3),
        "distinct2": round(sampled_distinct2(texts), 4),
        "distinct2_whole": round(distinct2(texts), 4),
        "verbatim_rubric_share": round(sum(_contains(u, q) for u, q in asked) / len(asked), 4) if asked else None,
        "backreference_share": round(sum(map(leads_with_back_reference, texts)) / n, 4),
        "backreference_request_share": round(sum(leads_with_back_reference(request_part(t)) for t in texts) / n, 4),
        "non_question_share": round(sum("?" not in t for t in texts) / n, 4),
        "top_utterance_share": round(top_count / n, 4),
        "top_utterance": top,
    }


def _simloop(args: list[str], timeout: int) -> str:
    """``python -m simloop ARGS`` in a subprocess (offline); its stdout."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "simloop", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"simloop {args[0]} failed ({proc.returncode}): {proc.stderr[-800:]}")
    return proc.stdout


def demo_run(out: Path, repeat: int, limit: int | None, run_id: str = "realism", personas: Path | None = None) -> Path:
    """``simloop run`` (the embedded demo, or the personas in ``personas``) as a subprocess;
    returns the run directory."""
    cmd = ["run", "--repeat", str(repeat), "--out", str(out), "--run-id", run_id, "--no-progress"]
    cmd += ["--limit", str(limit)] if limit else []
    cmd += ["--personas", str(personas)] if personas else []
    return Path(_simloop(cmd, timeout=1500).strip().splitlines()[-1])


def ikat_voice(folder: Path, tmp: Path, name: str, topics: str, limit: int | None) -> dict[str, Any]:
    """The voice on ``personas from-ikat`` personas of ``topics`` against that file's real users."""
    personas = tmp / f"personas-{name}"
    _simloop(["personas", "from-ikat", str(folder / topics), "--out", str(personas)], timeout=300)
    run_dir = demo_run(tmp, 1, limit, run_id=name, personas=personas)
    utts, dialogues = demo_utterances(run_dir, personas)
    sim, real = statistics(utts), statistics(real_utterances(folder, (topics,)))
    info(f"realism {name}: {len(dialogues)} dialogues, {sim['utterances']} utterances vs {real['utterances']} real "
         f"({topics})")
    for key in ("words_per_utterance", "distinct2", "verbatim_rubric_share", "backreference_share",
                "non_question_share"):
        info(f"  {key}: simulated {sim[key]}  real {real[key]}")
    return {"topics": topics, "simulated": sim, "real": real, "satisfied": satisfied(dialogues), "limit": limit}


def ikat_figures(prefix: str, found: dict[str, Any]) -> dict[str, Any]:
    sim, mean = found["simulated"], found["real"]["words_per_utterance"]
    return {
        f"{prefix}_words_per_utterance": range_figure(sim["words_per_utterance"], round(0.7 * mean, 3),
                                                      round(1.3 * mean, 3)),
        f"{prefix}_distinct2": figure(sim["distinct2"], 0.55, better="higher"),
        f"{prefix}_verbatim_rubric_share": figure(sim["verbatim_rubric_share"], IKAT_VERBATIM_TARGET),
    }


def satisfied(dialogues: list[dict[str, Any]], repeat: int | None = None) -> dict[str, int]:
    chosen = [d for d in dialogues if repeat is None or d["dialogue_id"].endswith(f"--{repeat}")]
    return {"dialogues": len(chosen), "user_satisfied": sum(d["stop"]["reason"] == "user_satisfied" for d in chosen)}


def figures_for(demo: dict[str, Any], real: dict[str, Any]) -> dict[str, Any]:
    mean = real["words_per_utterance"]  # target: within ±30% of the real mean
    return {
        "voice_words_per_utterance": range_figure(demo["words_per_utterance"], round(0.7 * mean, 3),
                                                  round(1.3 * mean, 3)),
        "voice_distinct2": figure(demo["distinct2"], 0.55, better="higher"),
        "voice_verbatim_rubric_share": figure(demo["verbatim_rubric_share"], 0.20),
        "voice_backreference_share": figure(demo["backreference_share"], 0.10, better="higher"),
        "voice_non_question_share": range_figure(demo["non_question_share"], 0.10, 0.40),
        "voice_top_utterance_share": figure(demo["top_utterance_share"], 0.01),
    }


async def run(quick: bool, out_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    folder = ikat_dir(REAL_FILES)
    if folder is None:
        info("realism: skipped (no iKAT topic files; set SIMLOOP_IKAT_DATA to the folder of 2023/ and 2024/)")
        return {}, {"skipped": "iKAT topic files not found"}
    real_utts = real_utterances(folder)
    real = statistics(real_utts)
    per_file = {name: statistics(real_utterances(folder, (name,))) for name in REAL_FILES}
    repeat, limit = (1, 12) if quick else (2, None)
    ikat: dict[str, Any] = {}
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="simloop-realism-") as tmp:
        run_dir = demo_run(Path(tmp), repeat, limit)
        demo_utts, dialogues = demo_utterances(run_dir, ROOT / "personas")
        for name, (prefix, topics) in IKAT_SETS.items():
            if quick and prefix is None:
                continue  # the tuning set is for the full run's record
            ikat[name] = ikat_voice(folder, Path(tmp), name, topics, IKAT_QUICK_LIMIT if quick else None)
            figures.update(ikat_figures(prefix, ikat[name]) if prefix else {})
    demo = statistics(demo_utts)
    sat_all, sat_first = satisfied(dialogues), satisfied(dialogues, repeat=0)
    info(f"realism: {len(dialogues)} demo dialogues, {demo['utterances']} utterances vs {real['utterances']} real")
    for key in ("words_per_utterance", "distinct2", "verbatim_rubric_share", "backreference_share",
                "non_question_share", "top_utterance_share"):
        info(f"  {key}: demo {demo[key]}  real {real[key]}")
    info(f"  user_satisfied: {sat_first['user_satisfied']}/{sat_first['dialogues']} (first repeat), "
         f"{sat_all['user_satisfied']}/{sat_all['dialogues']} (all)")
    return {**figures_for(demo, real), **figures}, {"demo": demo, "real": real, "real_per_file": per_file,
                                                    "satisfied": sat_all, "satisfied_first_repeat": sat_first,
                                                    "repeat": repeat, "limit": limit, "ikat": ikat}


if __name__ == "__main__":  # python scripts/bench_realism.py RUN_DIR: the statistics of an existing run
    sys.path.insert(0, str(ROOT))
    found = ikat_dir(REAL_FILES)
    shown = {"demo": statistics(demo_utterances(Path(sys.argv[1]), ROOT / "personas")[0])}
    if found:
        shown["real"] = statistics(real_utterances(found))
    print(json.dumps(shown, indent=1))
