"""iKAT topics → personas the rubric simulator can talk to (`simloop personas from-ikat`).

One conversation of an iKAT topic file (any of the 2023, 2024, 2025 schemas, read by
``inputs.ikat``) becomes one persona: its PTKB, default behaviour, and one topic whose
rubric questions are the information needs the real user pursued, in order, each with
its evidence as ``reference``: the gold responses, then the texts of the
passages they cite where the topic file has a ``_psg_text.jsonl`` beside it (2023; at most
``REFERENCE_PASSAGE_WORDS`` words of passages per question, inputs/ikat.py).

How turns become questions (rules chosen by reading ``2023_train_topics.json`` only;
the 2023 test and 2024 files were converted with them unchanged):

* A turn *asks* when one of its sentences is a question or a request ("Can you ...",
  "Tell me ...", "I'm looking for ...").  The question is the turn's resolved utterance
  without its acknowledgements ("Thanks for that suggestion.", "Wow!").
* A turn that does not ask (an answer to the assistant's clarifying question, "Near
  Utrecht.", or a preference, "I'd like to stay in the Netherlands.") continues the
  question before it: its gold response joins that question's reference.
* An asking turn that asks the same thing again is merged into the one before: it says
  so ("I meant ...", "but I'm looking for ...") or its content words, minus the topic
  title's, overlap the previous question's by at least ``SAME_QUESTION`` (Jaccard; on
  train, 0.6 merges the rephrased re-asks and keeps "How does GIS help?" apart from
  "Is GIS used in every country?", 0.57).
* A reference leaves out gold responses that are only a clarifying question (at most two
  sentences, ending with "?") and the reply to a closing thank-you that asks nothing.

Behaviour: the organisers' 2025 simulator never gives up (it moves on after three asks and
ends with thanks when the questions run out), so converted users get the largest
``patience`` (``IKAT_PATIENCE``); the other traits keep their defaults.  Edit the files to
model other users.

Personas are validated exactly like hand-written ones: written to a temporary folder,
read back by ``load_personas``, and only then moved into the output folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..errors import DataFileError
from ..schema import Behaviour, BehaviourSpec, GoldTurn, Persona, RubricQuestion, Topic
from ..text import content_terms, content_words, sentences
from .ikat import load_ikat_topics, load_passage_texts, passage_evidence
from .personas import load_personas

__all__ = ["SAME_QUESTION", "IKAT_PATIENCE", "rubric_from_turns", "personas_from_ikat", "check_prefix", "persona_toml",
           "write_personas"]

SAME_QUESTION = 0.6
# the largest patience a persona may have (Behaviour's own bound, so the two cannot drift apart)
IKAT_PATIENCE = next(m.le for m in Behaviour.model_fields["patience"].metadata if getattr(m, "le", None) is not None)

_ASKS = re.compile(
    r"\?\s*$|\b(?:can|could|would|will) you\b|^(?:please\s+)?(?:tell|give|show|list|suggest|recommend|compare|explain"
    r"|describe|help|find|provide|name)\b|(?:^|[,;:]\s*)(?:what|which|who|whom|whose|when|where|why|how|is there"
    r"|are there|any)\b|\bi(?:'d| would) like to (?:know|learn|find|see)\b|\bi (?:want|need) to (?:know|learn|find)\b"
    r"|\bi(?:'m| am) (?:looking for|curious|wondering)\b",
    re.IGNORECASE,
)
# "That is not what I asked": the user is re-asking the question before.
_CORRECTION = re.compile(
    r"\b(?:i meant|i mean|not what i|that was not|that's not what|wasn't what|but i'?m looking for"
    r"|i was asking|i asked)\b",
    re.IGNORECASE,
)
# Words of a sentence that only acknowledges ("Thanks for those suggestions!").
_ACK = frozenset(
    "thanks thank great wow nice interesting sure indeed perfect cool hello hi hey sounds sound helpful useful "
    "delicious wonderful amazing excellent answer suggestion suggestions information tips makes sense sorry meant "
    "looking right awesome appreciate glad maybe detailed valuable guidance fine alright points steps help there "
    "intriguing".split()
)


def _asks(sentence: str) -> bool:
    return bool(_ASKS.search(sentence.strip()))


def _question_text(utterance: str) -> str:
    """The utterance without sentences that only acknowledge the last answer."""
    kept = [s for s in sentences(utterance) if _asks(s) or not set(content_words(s)) <= _ACK]
    return " ".join(kept) or utterance.strip()


def _clarifying(response: str) -> bool:
    """A gold response that is only a question back to the user, not an answer."""
    parts = sentences(response)
    return bool(parts) and len(parts) <= 2 and response.rstrip().endswith("?")


def _same_question(new: str, previous: str, title_terms: set[str]) -> bool:
    if _CORRECTION.search(new):
        return True
    a = set(content_terms(" ".join(s for s in sentences(new) if _asks(s)))) - title_terms
    b = set(content_terms(" ".join(s for s in sentences(previous) if _asks(s)))) - title_terms
    return bool(a | b) and len(a & b) / len(a | b) >= SAME_QUESTION


class _Group:
    """One rubric question and the gold turns that pursued it."""

    def __init__(self, question: str, turn: GoldTurn):
        self.question = question
        self.turns = [turn]


def _groups(turns: Sequence[GoldTurn], title: str) -> list[_Group]:
    title_terms = set(content_terms(title))
    groups: list[_Group] = []
    for t in turns:
        text = _question_text(t.resolved_utterance or t.utterance)
        asks = any(_asks(s) for s in sentences(text))
        if groups and (not asks or _same_question(text, groups[-1].question, title_terms)):
            groups[-1].turns.append(t)
        else:
            groups.append(_Group(text, t))
    return groups


def _reference(group: _Group, last_turn: GoldTurn, passages: dict[str, str]) -> str | None:
    # The topic's last turn, folded into an earlier question (a closing thank-you), adds no evidence.
    used = [t for t in group.turns if not (t is last_turn and t is not group.turns[0])]
    answers = [t.response.strip() for t in used if t.response.strip() and not _clarifying(t.response)]
    cited = passage_evidence([pid for t in used for pid in t.response_provenance], passages)
    return " ".join([*answers, *([cited] if cited else [])]) or None


def rubric_from_turns(turns: Sequence[GoldTurn], title: str,
                      passages: dict[str, str] | None = None) -> list[RubricQuestion]:
    """Ordered rubric questions (ids ``t<first turn id>``) with their references
    (``passages``: passage texts by id, for the evidence the gold responses cite)."""
    groups = _groups(turns, title)
    return [RubricQuestion(id=f"t{g.turns[0].turn_id}", question=g.question,
                           reference=_reference(g, turns[-1], passages or {})) for g in groups]


# What may go into a persona id, which is also its file name in the output folder.
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def check_prefix(prefix: str) -> str:
    """``--prefix`` becomes part of every file name in the output folder: a '/' or '..'
    would put files outside it, other characters make names the shell or TOML ids trip
    over, and a leading '.' hides the files.  Refused before anything is read or written."""
    if _UNSAFE.search(prefix) or ".." in prefix or prefix.startswith("."):
        raise DataFileError(f"--prefix {prefix!r}: it becomes part of file names, so use letters, digits, "
                            "'_', '-' and '.' (neither '..' nor a leading '.')")
    return prefix


def personas_from_ikat(path: str | Path, prefix: str = "") -> list[Persona]:
    """One persona per conversation of an iKAT topic file (ids ``<prefix><number>``)."""
    check_prefix(prefix)
    passages = load_passage_texts(path)
    out = []
    for conv in load_ikat_topics(path):
        [topic] = conv.topics
        pid = prefix + _UNSAFE.sub("-", conv.id)
        rubric = rubric_from_turns(topic.gold_turns, topic.title, passages)
        out.append(Persona(id=pid, name=f"iKAT {conv.id}", ptkb=conv.ptkb,
                           behaviour=BehaviourSpec(patience=IKAT_PATIENCE),
                           topics=[Topic(id=pid, title=topic.title, rubric=rubric)]))
    return out


# ----------------------------------------------------------------------------- TOML
def _s(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, except that DEL must be escaped too."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def persona_toml(p: Persona, source: str) -> str:
    lines = [f"# Converted by `simloop personas from-ikat` from {source}.",
             "# Rubric question ids name the first iKAT turn that asked them; references are the gold responses",
             "# and the passages they cite (where the topic file's passage texts were beside it).",
             f"id = {_s(p.id)}", f"name = {_s(p.name)}", "ptkb = ["]
    lines += [f"  {_s(s)}," for s in p.ptkb] + ["]", ""]
    lines += ["[behaviour]", "# The iKAT 2025 simulator never gives up: the largest patience.",
              f"patience = {p.behaviour.patience}", ""]
    for t in p.topics:
        lines += ["[[topics]]", f"id = {_s(t.id)}", f"title = {_s(t.title)}", ""]
        for q in t.rubric:
            lines += ["[[topics.rubric]]", f"id = {_s(q.id)}", f"question = {_s(q.question)}"]
            lines += [f"reference = {_s(q.reference)}"] if q.reference else []
            lines.append("")
    return "\n".join(lines)


def write_personas(personas: Sequence[Persona], out: Path, source: str) -> list[Path]:
    """Validate the personas as hand-written files (alone and with what ``out`` already
    holds), then move them into ``out``; on any problem nothing is written there."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise DataFileError(f"{out}: exists and is not a folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".from-ikat-", dir=out.parent))
    try:
        for p in personas:
            (tmp / f"{p.id}.toml").write_text(persona_toml(p, source), encoding="utf-8")
        load_personas(tmp)
        _check_with_existing(tmp, out)
        out.mkdir(exist_ok=True)
        written = []
        for f in sorted(tmp.iterdir()):
            os.replace(f, out / f.name)
            written.append(out / f.name)
        return written
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _check_with_existing(tmp: Path, out: Path) -> None:
    """Persona and topic ids must stay unique next to the files already in ``out``."""
    kept = [f for f in sorted(out.glob("*.toml")) if not (tmp / f.name).exists()] if out.is_dir() else []
    if not kept:
        return
    both = tmp / "both"
    both.mkdir()
    for f in [*kept, *sorted(tmp.glob("*.toml"))]:
        shutil.copyfile(f, both / f.name)
    try:
        load_personas(both)
    except DataFileError as exc:
        problem = str(exc).replace(str(both), str(out))
        raise DataFileError(f"{out} already holds personas that clash with the new ones ({problem}); "
                            "convert into another folder or pass --prefix") from None
    finally:
        shutil.rmtree(both, ignore_errors=True)
