"""Voices: turn a policy action into what the simulated user types.

``TemplateVoice`` is the offline voice.  It is deterministic for a (scenario seed, turn)
and varied across seeds, and it is calibrated to read like the real iKAT 2023/2024 users
(``scripts/bench_realism.py`` measures it; targets in bench/results.json): short turns
(real mean about 12 words), the rubric question reworded rather than repeated, one part
at a time (``wording.py`` over ``needs.py`` and ``paraphrase.py``), back-references
("That's too general ...", "And is it ..."), statements and feedback as well as
questions, and closing lines built from parts so that no line recurs across dialogues.
How often each form is drawn was set by hand on the shipped personas (offline, policy fed
seeded pass/fail grades: ``test_shipped_personas_talk_like_real_ikat_users``) and on the
``personas from-ikat`` personas of ``2023_train_topics.json`` against that file's real
users; the 2023 test and 2024 files are only reported.  No real utterance is copied into
a template.

This module says how the request is dressed: the reaction before it (a complaint after a
failed answer, sometimes none), a persona fact where one bears on the question, small
talk by ``verbosity``, typos and dropped words by ``language_skill`` (a stock line keeps
its words: only the request loses them), and a closing line that fits how the dialogue
went.  Persona facts come out one at a time as the ``reveal`` trait allows (never the
PTKB wholesale).  A re-ask never tells the assistant the answer's words, which the user
does not know and the grader scores.  The voice never plays the assistant: it asks,
re-asks, answers a question put to it, or says a closing line.  The LLM voice
(``simulators/llm.py``) implements the same ``Voice``.
"""

from __future__ import annotations

import random
from typing import Protocol, runtime_checkable

import numpy as np

from ..run import Context
from ..schema import Stage
from ..search import Embedder, cosine
from ..text import first_lower
from .cues import mentions_statement
from .paraphrase import PREPOSITIONS, misspell, sentence
from .policy import Action, SimContext, seeded_rng
from .voice_lines import closing_line, pick
from .wording import follow_up, known_keywords, request

__all__ = ["Voice", "TemplateVoice", "EmbedderSource", "known_keywords"]


@runtime_checkable
class Voice(Protocol):
    async def speak(self, action: Action, context: SimContext) -> tuple[str, list[Stage]]: ...


class EmbedderSource:
    """Gets the shared embedder lazily (``ctx.embedder()``, or the one given) so that a
    simulator that never needs embeddings never loads MiniLM.  The real embedder caches
    recurring texts (PTKB statements, rubric questions) itself."""

    def __init__(self, ctx: Context | None = None, embedder: Embedder | None = None):
        self._ctx, self._embedder = ctx, embedder

    async def get(self) -> Embedder:
        if self._embedder is None:
            if self._ctx is None:
                raise ValueError("no embedder: pass ctx or embedder")
            self._embedder = await self._ctx.embedder()
        return self._embedder

    async def similarities(self, query: str, texts: list[str]) -> np.ndarray:
        """Cosine of ``query`` with each of ``texts``."""
        vecs = np.asarray(await (await self.get()).encode([query, *texts]), dtype=np.float32)
        return cosine(vecs[:1], vecs[1:])[0]


# How often a re-ask opens with a complaint, by mood, and a move to the next question with
# letting the last one go: real users mostly just ask again (set on 2023 train, see wording.py).
COMPLAIN_SHARE = {"calm": 0.4, "annoyed": 0.45, "frustrated": 1.0}
SKIP_SHARE = 0.45
_DROPPABLE = {"the", "a", "an", "is", "are", "do", "does", "to", "of", "for", "it", "i"}
_ENDS = (".", "?", "!", ":")  # a token ending in one of these ends its sentence, for the noise


def _short_sentences(tokens: list[str], most: int = 3) -> list[bool]:
    """For each token: whether its sentence (up to a token ending in one of ``_ENDS``) has
    at most ``most`` words."""
    out: list[bool] = []
    start = 0
    for i, tok in enumerate(tokens):
        if tok.endswith(_ENDS) or i == len(tokens) - 1:
            out += [i + 1 - start <= most] * (i + 1 - start)
            start = i + 1
    return out


def _noise(text: str, skill: float, rng: random.Random, drop: bool = True) -> str:
    """Low language skill: dropped function words (``drop``), misspellings, sloppy casing.

    A word that opens a sentence is never dropped: without it the rest reads as a fragment
    glued to whatever came before ("That's wrong again. came up at dinner.").  Nor is a word
    of a sentence of three words or fewer ("Where's it?" without "it" asks about nothing),
    nor an "it" after a preposition ("who lived in it before ..." without it has lost what
    it was about; "lived in city", without its article, is how a learner writes).  The
    draw is made all the same, so that the other words keep their noise."""
    if skill >= 1.0:
        return text
    lack = 1.0 - skill
    out: list[str] = []
    tokens = text.split()
    short = _short_sentences(tokens)
    for i, w in enumerate(tokens):
        bare = w.lower().strip(",.?!:")
        opens = not out or out[-1].endswith(_ENDS)
        if drop and not opens and bare in _DROPPABLE and rng.random() < 0.35 * lack and not short[i] \
                and not (bare == "it" and out[-1].lower() in PREPOSITIONS):
            tail = w[len(w.rstrip(",.?!:")):]
            if tail:  # "what a chickpea is?" -> "what a chickpea?", never without its "?"
                out[-1] = out[-1].rstrip(",.?!:") + tail
            continue
        if rng.random() < 0.3 * lack:
            core = w.rstrip(",.?!:")
            w = misspell(core, rng) + w[len(core) :]
        out.append(w)
    text = " ".join(out) or text
    return text.lower() if skill < 0.5 else text


def _introduce(fact: str, rng: random.Random) -> str:
    """A volunteered fact with its lead-in ("Some context: ..."); after a comma the fact's
    first word is lower-cased unless it is "I" or a name."""
    line = pick(rng, "fact")
    return line.format(fact=first_lower(fact) if ", {fact}" in line else fact)


def _closing_kind(action: Action) -> str:
    """Which closing line fits how the dialogue went: full thanks only when every question
    was answered; a satisfied user who had to let some go thanks for the rest."""
    if action.kind == "give_up":
        return "give_up"
    if action.end is not None and action.end.reason != "user_satisfied":
        return "unhappy"
    counts = action.counts
    if counts and counts.get("answered", 0) < counts.get("questions", 0):
        return "mostly"
    return "thanks"


class TemplateVoice:
    """Offline voice: seeded templates over the policy action, persona and topic."""

    def __init__(self, ctx: Context | None = None, reveal_threshold: float = 0.35, embedder: Embedder | None = None):
        self.embeddings = EmbedderSource(ctx, embedder)
        self.reveal_threshold = reveal_threshold

    async def speak(self, action: Action, context: SimContext) -> tuple[str, list[Stage]]:
        scenario = context.scenario
        rng = seeded_rng(scenario.seed, action.turn, "voice")
        fact = await self._fact(action, context)
        segments = self._compose(action, context, fact, rng)
        skill = scenario.behaviour.language_skill
        noise_rng = seeded_rng(scenario.seed, action.turn, "noise")
        # Persona facts keep their words (so a fact is recognised as told) but not their casing;
        # stock lines (reactions, small talk) get typos only, so each stays a whole sentence.
        parts = [(s.lower() if skill < 0.5 else s) if kind == "fact" else _noise(s, skill, noise_rng, kind == "request")
                 for s, kind in segments]
        text = " ".join(p for p in parts if p).strip()
        return text or " ".join(s for s, _ in segments), []

    # ------------------------------------------------------------------ persona facts

    def _unrevealed(self, context: SimContext) -> list[int]:
        said = context.user_utterances
        ptkb = context.scenario.persona.ptkb
        return [i for i, f in enumerate(ptkb) if not any(mentions_statement(u, f) for u in said)]

    async def _fact(self, action: Action, context: SimContext) -> str | None:
        """The one PTKB statement this utterance states, if any.

        ``eager``: the most related fact in the first turn whatever its similarity, later
        like ``relevant``; ``relevant``: the most related untold fact when its cosine with
        the question reaches ``reveal_threshold``; ``never``: none volunteered.  Each fact
        is told at most once (told = already in an earlier user utterance)."""
        ptkb = context.scenario.persona.ptkb
        b = context.scenario.behaviour
        if action.rubric is None:
            return None
        if action.kind == "answer_clarification":
            # Answering a direct question is not volunteering: done for every reveal mode.
            # Facts already told are not repeated (the assistant has them in the history).
            candidates = self._unrevealed(context)
            if not candidates:
                return None
            query = f"{context.assistant_question or ''} {action.rubric.question}"
            sims = await self.embeddings.similarities(query, [ptkb[i] for i in candidates])
            best = int(np.argmax(sims))
            return ptkb[candidates[best]] if sims[best] >= self.reveal_threshold / 2 else None
        if b.reveal == "never" or action.kind not in ("ask", "reask", "move_on"):
            return None
        candidates = self._unrevealed(context)
        if not candidates:
            return None
        sims = await self.embeddings.similarities(action.rubric.question, [ptkb[i] for i in candidates])
        best = int(np.argmax(sims))
        if b.reveal == "eager" and action.turn == 1:
            return ptkb[candidates[best]]
        # Chatty users share a little more readily.
        threshold = self.reveal_threshold * (0.85 if b.verbosity >= 0.7 else 1.0)
        return ptkb[candidates[best]] if sims[best] >= threshold else None

    # ------------------------------------------------------------------ composition

    def _compose(self, action: Action, context: SimContext, fact: str | None,
                 rng: random.Random) -> list[tuple[str, str]]:
        """[(segment, kind)]: "request" (the need in the user's words: every kind of noise),
        "line" (a stock reaction, small talk or closing line: typos only) or "fact" (a
        persona fact: kept verbatim)."""
        b = context.scenario.behaviour
        kind = action.kind
        if kind in ("farewell", "give_up"):
            return [(closing_line(_closing_kind(action), rng, b.verbosity), "line")]
        fact_text = sentence(fact, ".") if fact else ""
        lead, body = self._lead_and_body(action, context, bool(fact), rng)
        if b.verbosity < 0.3 and not lead.endswith("!") and body:
            # Terse users skip pleasantries, but anger still shows; and a lead with no request
            # after it ("I don't follow." for a clarification) is the message itself.
            lead = ""
        if kind == "answer_clarification":
            segments = [(lead, "line"), (fact_text, "fact"), (body, "request")]
        else:  # a volunteered fact comes before the request: context first, as people do
            segments = [(lead, "line"), (_introduce(fact_text, rng) if fact_text else "", "fact"),
                        (body, "request")]
        if kind != "clarify" and rng.random() < max(0.0, b.verbosity - 0.55) * 1.5:
            # Small talk mostly before the request, so that the turn still ends on it.
            at = len(segments) if rng.random() < 0.3 else len(segments) - 1
            segments.insert(at, (pick(rng, "chatty"), "line"))
        return [(s.strip(), n) for s, n in segments if s.strip()]

    def _lead_and_body(self, action: Action, context: SimContext, has_fact: bool,
                       rng: random.Random) -> tuple[str, str]:
        """(the feeling or reaction, the request) for a non-closing action."""
        kind, mood, b = action.kind, action.mood, context.scenario.behaviour
        chat = 0.15 + 0.5 * b.verbosity  # how often a reaction precedes the request
        if kind == "ask":
            key = "greet" if action.turn == 1 else "ack"
            lead = pick(rng, key) if rng.random() < (chat * 0.6 if key == "greet" else chat) else ""
            return lead, request(action, context, rng)
        if kind == "reask" and action.ignored_question:
            return pick(rng, "decline"), request(action, context, rng)
        if kind == "reask":
            lead = pick(rng, f"complain.{mood}") if rng.random() < COMPLAIN_SHARE[mood] else ""
            return lead, follow_up(action, context, rng)
        if kind == "move_on":
            frustrated = mood == "frustrated"
            lead = pick(rng, "skip.frustrated" if frustrated else "skip.calm") \
                if frustrated or rng.random() < SKIP_SHARE else ""
            return lead, request(action, context, rng)
        if kind == "clarify":
            return pick(rng, "confused"), (request(action, context, rng) if rng.random() < 0.4 else "")
        if kind == "answer_clarification":
            if has_fact:
                return "", request(action, context, rng) if rng.random() < 0.6 else ""
            return pick(rng, "no_answer"), request(action, context, rng)
        raise ValueError(f"nothing to say for action {kind!r}")
