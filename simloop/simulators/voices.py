"""Voices: turn a policy action into what the simulated user types (DESIGN §5).

``TemplateVoice`` is the offline voice: deterministic for a scenario seed and turn index,
yet varied across seeds (several templates per action, picked by a seeded RNG).  It talks
like iKAT users do: later questions drop the topic noun once the topic is clear ("And how
long does it take?"), a re-ask adds the words the user is after, persona facts come out
one at a time as the ``reveal`` trait allows, and low ``language_skill`` makes the wording
vague and misspelt.  It never reveals the PTKB wholesale (at most one statement per
utterance) and never plays the assistant (it only asks, re-asks, answers a question put to
it, or says goodbye).  The LLM voice (``simulators/llm.py``) implements the same ``Voice``.
"""

from __future__ import annotations

import random
import re
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..search.embeddings import Embedder, cosine
from ..schema import RubricQuestion, Stage
from .policy import Action, SimContext, seeded_rng
from ..text import STOPWORDS, content_terms, first_lower, stem, words
from .cues import mentions_statement

__all__ = ["Voice", "TemplateVoice", "elide_topic", "misspell", "EmbedderSource"]


@runtime_checkable
class Voice(Protocol):
    async def speak(self, action: Action, context: SimContext) -> tuple[str, list[Stage]]: ...


class EmbedderSource:
    """Gets the shared embedder lazily (``ctx.embedder()``, or the one given) so that a
    simulator that never needs embeddings never loads MiniLM.  The real embedder caches
    recurring texts (PTKB statements, rubric questions) itself."""

    def __init__(self, ctx: Any = None, embedder: Embedder | None = None):
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


# ---------------------------------------------------------------------------- templates
# Prefixes carry the feeling (acknowledgement, complaint); bodies carry the request.
# {q} full question, {ql} the same with a lower-case start, {spec} what to focus on,
# {title} the topic title in lower case.

_PREFIX: dict[str, list[str]] = {
    "first": ["Hi!", "Hello.", "Hey there.", "Hi, quick question.", "Hello, I hope you can help."],
    "ask": ["Thanks, that helps.", "Great, thanks.", "OK, got it.", "That's useful.", "Good to know.", "Makes sense.", "Perfect."],
    "reask.calm": ["That doesn't really answer my question.", "Hmm, not quite what I meant.", "That's not what I was asking.", "Could you be more specific?"],
    "reask.annoyed": ["That still doesn't answer it.", "You're not really answering me.", "No, that's not it either.", "I asked something else."],
    "reask.frustrated": ["Seriously, this is getting frustrating!", "Ugh, that's not helpful at all!", "Why is this so hard? I already asked!", "Come on, just answer my question!"],
    "ignore": ["I don't want to get into that.", "That's not important right now.", "Never mind about me.", "Let's not go there."],
    "clarify": ["Sorry, I don't follow.", "I'm confused by that answer.", "Hmm, what do you mean?", "I don't get it."],
    "move_on.calm": ["OK, never mind that one.", "Let's leave that.", "Fine, I'll look that up elsewhere.", "Alright, skip it."],
    "move_on.frustrated": ["Whatever, forget it.", "This isn't going anywhere.", "Forget it!", "Never mind, you clearly don't know."],
    "answer": ["Good question.", "Sure.", "To answer your question:", "Well,", "Oh, right."],
}
_BODY: dict[str, list[str]] = {
    "first": ["{q}", "I was wondering: {ql}", "I'm looking into {title}. {q}", "Can you help me with something? {q}"],
    "ask": ["{q}", "And {ql}", "Next, {ql}", "Now, {ql}", "One more thing: {ql}"],
    "reask": ["{q}{spec}", "Again: {ql}{spec}", "My question was: {ql}{spec}"],
    "ignore": ["Just tell me: {ql}", "{q}", "Please just answer: {ql}"],
    "clarify": ["Can you explain that more simply?", "What do you mean exactly? I asked: {ql}", "Could you rephrase that?", "How does that answer my question about {title}?"],
    "move_on": ["{q}", "Let's move on. {q}", "Next question: {ql}", "Different question: {ql}"],
    "answer.fact": ["{fact} So, {ql}", "{fact} With that in mind, {ql}", "{fact} {q}"],
    "answer.none": ["I'm not sure, nothing in particular. {q}", "No preference, really. {q}", "I don't know, to be honest. {q}"],
    "farewell": ["Thanks, that's all I needed!", "Great, thank you for your help. Bye!", "Perfect, that covers everything. Thanks!", "That's really helpful, thank you. Goodbye!"],
    "farewell.unhappy": ["OK, I guess that's it. Thanks anyway.", "Well, not everything was clear, but thanks. Bye.", "I'll find the rest elsewhere. Bye."],
    "give_up": ["Forget it, this is useless. I'll look somewhere else.", "I give up. You keep missing my question.", "This is a waste of my time. Bye.", "Never mind, I'll ask someone else."],
}
_SPEC = [" I mean specifically {kw}.", " I'm especially interested in {kw}.", " Please focus on {kw}.", " What about {kw}?"]
_FACT = ["{fact}", "For context, {factl}", "Just so you know, {factl}"]
_CHATTY = [
    "I really want to get this right.", "This matters a lot to me.", "I've been thinking about {title} for a while.",
    "Any details would help.", "I keep reading different things about this.", "Sorry if that's a basic question.",
    "A friend asked me about this too.", "I'd like to understand it properly.",
]

_DETS = {"the", "a", "an", "my", "this", "that", "these", "those", "your", "our"}
_PREPS = {"of", "for", "in", "about", "with", "on", "to", "at", "from", "into", "during", "regarding"}
_AUX = {"is", "are", "was", "does", "do", "did", "can", "could", "should", "will", "would"}
_LEAD_IT = _PREPS | {"take", "use", "learn", "visit", "play", "buy", "get", "try", "start", "find", "choose"}
_BOUNDARY = _PREPS | _AUX | {"and", "or", "but", "if", "when", "so", "than", "as", "before", "after", "while"}
_WH = {"what", "who", "which", "where"}
_DROPPABLE = {"the", "a", "an", "is", "are", "do", "does", "to", "of", "for", "it", "i"}
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]*")


def elide_topic(question: str, title_stems: set[str]) -> str | None:
    """Drop the topic noun phrase once the topic is clear from context: "What are the side
    effects of ibuprofen?" -> "What are the side effects?"; elsewhere it becomes "it".
    None when nothing (sensible) can be dropped."""
    toks = list(_TOKEN.finditer(question))
    span: tuple[int, int] | None = None
    i = 0
    while i < len(toks):
        j, has = i, False
        while j < len(toks) and (toks[j].group().lower() in _DETS or stem(toks[j].group()) in title_stems):
            has = has or stem(toks[j].group()) in title_stems
            j += 1
        while j > i and toks[j - 1].group().lower() in _DETS:  # never end on "the"
            j -= 1
        if has and (span is None or j - i > span[1] - span[0]):
            span = (i, j)
        i = max(j, i + 1)
    if span is None:
        return None
    i, j = span
    start, end = toks[i].start(), toks[j - 1].end()
    rest = question[end:]
    before = toks[i - 1].group().lower() if i > 0 else ""
    after = toks[j].group().lower() if j < len(toks) else ""
    if (not rest.strip(" ?.!") and before in _PREPS) or (before == "for" and after == "to"):
        # "... of ibuprofen?" -> "...?";  "take for aspirin to work" -> "take to work"
        new = question[: toks[i - 1].start()].rstrip() + (" " + rest.strip() if rest.strip(" ?.!") else rest.strip())
    elif i >= 2 and before in {"is", "are", "was"} and toks[i - 2].group().lower() in _WH:
        return None  # "What is a stroke?" asks what the thing is: "What is it?" would lose it
    elif _pronoun_fits(before, after) and not _plural(toks[j - 1].group()):
        # "it" only where English allows a pronoun: "Is ibuprofen safe" -> "Is it safe",
        # never "How much ibuprofen" -> "How much it" or "on a rugby team" -> "on it team".
        new = question[:start] + ("It" if start == 0 else "it") + question[end:]
    else:
        return None
    return new if len(words(new)) >= 3 and new != question else None


def _pronoun_fits(before: str, after: str) -> bool:
    """Whether the noun phrase between ``before`` and ``after`` is a whole phrase that
    "it" can stand for: the subject after an auxiliary ("Does X work"), or an object
    that ends where a clause or preposition starts ("about X and ...")."""
    if before in _AUX:
        return True
    if before == "" or before in _LEAD_IT:
        return after == "" or after in _BOUNDARY
    return False


def _plural(word: str) -> bool:
    w = word.lower()
    return w.endswith("s") and not w.endswith(("ss", "us", "is"))


def misspell(word: str, rng: random.Random) -> str:
    """One deterministic typo: swapped, dropped or doubled letter."""
    if len(word) < 4 or not word.isalpha():
        return word
    k = rng.randrange(1, len(word) - 1)
    op = rng.randrange(3)
    if op == 0:
        return word[:k] + word[k + 1] + word[k] + word[k + 2 :]
    if op == 1:
        return word[:k] + word[k + 1 :]
    return word[:k] + word[k] + word[k:]


def _vague(question: str) -> str:
    """What a user who cannot put the need into words types: the content words only."""
    kept = [w for w in question.rstrip("?").split() if w.lower().strip(",.") not in STOPWORDS]
    return (" ".join(kept[:6]) or question).lower() + "?"


def _noise(text: str, skill: float, rng: random.Random) -> str:
    """Low language skill: dropped function words, misspellings, sloppy casing."""
    if skill >= 1.0:
        return text
    lack = 1.0 - skill
    out = []
    for w in text.split():
        bare = w.lower().strip(",.?!:")
        if bare in _DROPPABLE and rng.random() < 0.35 * lack:
            continue
        if rng.random() < 0.3 * lack:
            core = w.rstrip(",.?!:")
            w = misspell(core, rng) + w[len(core) :]
        out.append(w)
    text = " ".join(out) or text
    return text.lower() if skill < 0.5 else text


def _rotate(pool: list[str], seed: int, turn: int, purpose: str) -> str:
    """A seeded starting point, then the next line each turn: lines that recur in a
    dialogue (thanks, small talk) do not repeat until the pool is used up."""
    start = seeded_rng(seed, 0, purpose).randrange(len(pool))
    return pool[(start + turn) % len(pool)]


def _with_period(s: str) -> str:
    s = s.strip()
    return s if s[-1:] in ".!?" else s + "."


class TemplateVoice:
    """Offline voice: seeded templates over the policy action, persona and topic."""

    def __init__(self, ctx: Any = None, reveal_threshold: float = 0.35, embedder: Embedder | None = None):
        self.embeddings = EmbedderSource(ctx, embedder)
        self.reveal_threshold = reveal_threshold

    async def speak(self, action: Action, context: SimContext) -> tuple[str, list[Stage]]:
        scenario = context.scenario
        rng = seeded_rng(scenario.seed, action.turn, "voice")
        fact = await self._fact(action, context)
        clean, noisy = self._compose(action, context, fact, rng)
        skill = scenario.behaviour.language_skill
        noise_rng = seeded_rng(scenario.seed, action.turn, "noise")
        # Persona facts keep their words (so a fact is recognised as told) but not their casing.
        parts = [_noise(p, skill, noise_rng) if p_noisy else (p.lower() if skill < 0.5 else p) for p, p_noisy in noisy]
        text = " ".join(p for p in parts if p).strip()
        return (text or clean), []

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

    def _question(self, action: Action, context: SimContext, rng: random.Random) -> str:
        """The rubric question as this user would put it at this point."""
        q = action.rubric.question.strip() if action.rubric else ""
        b = context.scenario.behaviour
        if action.turn > 1 and action.kind in ("ask", "answer_clarification", "move_on") and rng.random() < 0.6:
            title_stems = set(content_terms(context.scenario.topic.title))
            said = {t for u in context.user_utterances for t in content_terms(u)}
            known = title_stems & said  # only what the user already named is clear from context
            if known:
                q = elide_topic(q, known) or q
        if b.language_skill < 0.5 and action.kind != "reask" and rng.random() < 1.0 - b.language_skill:
            q = _vague(q)
        return q

    def _spec(self, rubric: RubricQuestion, context: SimContext, rng: random.Random) -> str:
        """What a more specific re-ask adds: the question's keywords (or its content words)."""
        terms = list(rubric.keywords)
        if not terms:
            title = set(content_terms(context.scenario.topic.title))
            terms = [w for w in words(rubric.question) if w not in STOPWORDS and stem(w) not in title]
        if context.scenario.behaviour.language_skill < 0.5:
            terms = terms[:1]
        terms = terms[:3]
        if not terms:
            return ""
        kw = terms[0] if len(terms) == 1 else ", ".join(terms[:-1]) + " and " + terms[-1]
        return rng.choice(_SPEC).format(kw=kw)

    def _compose(
        self, action: Action, context: SimContext, fact: str | None, rng: random.Random
    ) -> tuple[str, list[tuple[str, bool]]]:
        """(clean text, [(segment, may be noised)]): persona facts are kept verbatim."""
        scenario = context.scenario
        b = scenario.behaviour
        kind = action.kind
        fill: dict[str, str] = {"title": scenario.topic.title.lower(), "spec": ""}
        if action.rubric is not None:
            q = self._question(action, context, rng)
            fill.update(q=q, ql=first_lower(q))
        if kind == "reask" and action.rubric is not None:
            fill["spec"] = self._spec(action.rubric, context, rng)
        body_key, prefix_key = self._keys(action)
        if kind == "answer_clarification" and fact:
            body_key, prefix_key = "answer.fact", "answer"
        body = rng.choice(_BODY[body_key])
        prefix = _rotate(_PREFIX[prefix_key], scenario.seed, action.turn, prefix_key) if prefix_key else ""
        terse = b.verbosity < 0.3
        if terse and not prefix_key.endswith("frustrated"):
            prefix = ""  # terse users skip pleasantries, but anger still shows
        segments: list[tuple[str, bool]] = [(prefix, True)]
        fact_text = _with_period(fact) if fact else ""
        if "{fact}" in body:  # answering the assistant's question with a persona fact
            head, tail = body.split("{fact}", 1)
            segments += [(head.format(**fill), True), (fact_text, False), (tail.format(**fill).strip(), True)]
        else:
            if fact_text:  # volunteered before the request, as people give context first
                form = rng.choice(_FACT)
                segments.append((form.format(fact=fact_text, factl=first_lower(fact_text)), False))
            segments.append((body.format(**fill), True))
        if b.verbosity >= 0.7 and kind not in ("farewell", "give_up", "clarify"):
            segments.append((_rotate(_CHATTY, scenario.seed, action.turn, "chatty").format(**fill), True))
        clean = " ".join(s for s, _ in segments if s)
        return clean, [(s.strip(), n) for s, n in segments if s.strip()]

    @staticmethod
    def _keys(action: Action) -> tuple[str, str]:
        """(body template key, prefix template key) for an action."""
        mood = action.mood
        if action.kind == "ask":
            return ("first", "first") if action.turn == 1 else ("ask", "ask")
        if action.kind == "reask":
            if action.ignored_question:
                return "ignore", "ignore"
            return "reask", f"reask.{mood}"
        if action.kind == "move_on":
            return "move_on", "move_on.frustrated" if mood == "frustrated" else "move_on.calm"
        if action.kind == "clarify":
            return "clarify", "clarify"
        if action.kind == "answer_clarification":
            return "answer.none", ""  # with a fact to tell: "answer.fact" (see _compose)
        if action.kind == "farewell":
            happy = action.end is None or action.end.reason == "user_satisfied"
            return ("farewell" if happy else "farewell.unhappy"), ""
        if action.kind == "give_up":
            return "give_up", ""
        raise ValueError(f"nothing to say for action {action.kind!r}")
