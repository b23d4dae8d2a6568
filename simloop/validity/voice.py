"""Voice statistics: do a simulator's utterances read like real iKAT users?

One function (``statistics``) computes every statistic on both sides: the utterances of a
simulated run and every user ``utterance`` of the real topic files.  The utterances of a
simulated dialogue are everything its user says: the turns' ``user.utterance`` and the
closing line (``stop.utterance``, or in transcripts made before the closing line moved
there, the ``farewell``/``give_up`` turn).  The real topic files record the user's closing
thanks as ordinary turns, so counting it keeps the comparison like for like.

Statistics (``tokens`` = lower-cased ``[a-z0-9]+('[a-z]+)?`` matches unless said otherwise):

* ``words_per_utterance`` — mean number of whitespace-separated words per utterance.
  Target: within ±30% of the real mean.
* ``distinct2`` — distinct word bigrams / all word bigrams (bigrams within an utterance, of
  its tokens).  The ratio falls as a set grows, so both sides are measured at one size:
  the mean over 20 seeded random samples of 200 utterances (fewer if the set is smaller).
  Target ≥ 0.55 (the real files give 0.66-0.70 each, whole).
* ``verbatim_rubric_share`` — among utterances that carry a question to answer (simulated:
  turns with a ``rubric_id``; real: every turn, whose ``resolved_utterance`` is the
  self-contained question), the share whose tokens contain the question's tokens as one
  contiguous run, i.e. repeat it word for word.  Target ≤ 0.20 (≤ 0.25 on ``from-ikat``
  personas, whose rubric question is the resolved utterance, which the real 2023 test
  users typed word for word 22% of the time).
* ``backreference_share`` — share of utterances that lead with a back-reference: one of
  it, that, this, they, those among the first four letter-only tokens (``[a-z]+``, so
  "That's" gives "that" and "s"; "OK, and is it ..." counts, a pronoun deep in a long
  question does not; four is the lead length that gives the real users' 0.17).
  Target ≥ 0.10.  ``backreference_request_share``: the same test on the request alone,
  the last sentence with a "?" (else the last sentence); real 0.11.
* ``non_question_share`` — share of utterances with no "?" at all (statements, feedback,
  thanks).  Real 0.27.  Target 0.10-0.40.
* ``top_utterance_share`` — occurrences of the most frequent utterance (compared by its
  tokens) / all utterances.  Target ≤ 0.01.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["REAL_FILES", "IKAT_SETS", "Utterance", "real_utterances", "run_utterances", "statistics", "statistic",
           "tokens", "distinct2", "sampled_distinct2", "leads_with_back_reference", "request_part", "satisfied"]

REAL_FILES = ("2023/2023_train_topics.json", "2023/2023_test_topics.json", "2024/2024_test_topics.json")
# name -> (figure prefix, topic file converted into personas); prefix None: details only, the tuning set
IKAT_SETS = {"ikat23_train": (None, "2023/2023_train_topics.json"),
             "ikat23": ("voice_ikat23", "2023/2023_test_topics.json"),
             "ikat24": ("voice_ikat24", "2024/2024_test_topics.json")}
BACK_REFERENCES = frozenset({"it", "that", "this", "they", "those"})
LEAD_TOKENS = 4
SAMPLE_SIZE, SAMPLES = 200, 20
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_LETTERS = re.compile(r"[a-z]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_CLOSING_INTENTS = {"farewell", "give_up"}  # the closing line, in transcripts that made it a turn

# (text, the question it must not repeat word for word, or None)
Utterance = tuple[str, str | None]


def real_utterances(folder: Path, files: Iterable[str] = REAL_FILES) -> list[Utterance]:
    """Every user utterance of the real topic files, with its resolved question."""
    out: list[Utterance] = []
    for name in files:
        for conv in json.loads((folder / name).read_text(encoding="utf-8")):
            out += [(t["utterance"], t["resolved_utterance"]) for t in conv["turns"]]
    return out


def run_utterances(run_dir: Path, personas_dir: Path) -> tuple[list[list[Utterance]], list[dict[str, Any]]]:
    """(each dialogue's utterances with their rubric questions, the dialogues) of a finished run."""
    from ..inputs import load_personas

    questions = {(t.id, q.id): q.question for p in load_personas(personas_dir) for t in p.topics for q in t.rubric}
    dialogues = [json.loads(line) for line in (run_dir / "dialogues.jsonl").read_text(encoding="utf-8").splitlines()
                 if line.strip()]
    out: list[list[Utterance]] = []
    for d in dialogues:
        topic = d["scenario"]["topic_id"]
        said: list[Utterance] = []
        for turn in d["turns"]:
            rubric = None if turn["user"].get("intent") in _CLOSING_INTENTS else turn["user"].get("rubric_id")
            said.append((turn["user"]["utterance"], questions.get((topic, rubric)) if rubric else None))
        closing = (d.get("stop") or {}).get("utterance")
        if closing:
            said.append((closing, None))
        out.append(said)
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


def statistic(name: str, utts: list[Utterance]) -> float | None:
    """One statistic of ``statistics`` (rounded as there), None when undefined."""
    texts = [t for t, _ in utts]
    n = len(texts)
    if not n:
        return None
    if name == "words_per_utterance":
        return round(sum(len(t.split()) for t in texts) / n, 3)
    if name == "distinct2":
        return round(sampled_distinct2(texts), 4)
    if name == "distinct2_whole":
        return round(distinct2(texts), 4)
    if name == "verbatim_rubric_share":
        asked = [(tokens(t), tokens(q)) for t, q in utts if q]
        return round(sum(_contains(u, q) for u, q in asked) / len(asked), 4) if asked else None
    if name == "backreference_share":
        return round(sum(map(leads_with_back_reference, texts)) / n, 4)
    if name == "backreference_request_share":
        return round(sum(leads_with_back_reference(request_part(t)) for t in texts) / n, 4)
    if name == "non_question_share":
        return round(sum("?" not in t for t in texts) / n, 4)
    if name == "top_utterance_share":
        return round(Counter(" ".join(tokens(t)) for t in texts).most_common(1)[0][1] / n, 4)
    raise ValueError(f"no voice statistic {name!r}")


_NAMES = ("words_per_utterance", "distinct2", "distinct2_whole", "verbatim_rubric_share", "backreference_share",
          "backreference_request_share", "non_question_share", "top_utterance_share")


def statistics(utts: list[Utterance]) -> dict[str, Any]:
    """Every voice statistic of a set of utterances (the same code for simulated and real)."""
    texts = [t for t, _ in utts]
    out: dict[str, Any] = {"utterances": len(texts), **{k: statistic(k, utts) for k in _NAMES}}
    out["top_utterance"] = Counter(" ".join(tokens(t)) for t in texts).most_common(1)[0][0] if texts else None
    return out


def satisfied(dialogues: list[dict[str, Any]], repeat: int | None = None) -> dict[str, int]:
    chosen = [d for d in dialogues if repeat is None or d["dialogue_id"].endswith(f"--{repeat}")]
    return {"dialogues": len(chosen), "user_satisfied": sum(d["stop"]["reason"] == "user_satisfied" for d in chosen)}


voice_statistics = statistics  # the name the face gives it
