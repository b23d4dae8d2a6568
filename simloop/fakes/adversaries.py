"""Adversarial assistants: answers a valid grader must never pass.

* ``Parrot`` restates the user's utterance, wrapped in friendly filler;
* ``OffTopic`` answers with fluent encyclopedic text about an unrelated subject (the top
  BM25 passage of the real index for a subject that shares no word the user said);
* ``Asker`` only ever asks clarifying questions back;
* ``KeywordDump`` lists the utterance's topic and the words that recur in its best BM25
  passages, stating nothing (keyword stuffing: what an assistant has, not the answer key);
* ``Shuffled`` answers from the best BM25 passage for the utterance, with the words of
  each sentence shuffled (the bag of words of an answer, without its grammar);
* ``Negated`` is another assistant (bm25_extractive by default) whose every answer is
  said the other way round (``falsify.negate``): the right subject, the wrong facts.

They are plugins (``--assistant simloop.fakes.adversaries:Parrot``) for the end-to-end
adversary test, and ``restate`` / ``clarifying_question`` also build the labelled
negatives of ``scripts/bench_grader.py``.  Every template below was written for simloop;
none is taken from iKAT.  Wording is drawn from a seeded RNG (scenario seed, turn), so
runs are reproducible and yet varied.
"""

from __future__ import annotations

import importlib
import random
import re
from collections import Counter
from typing import Protocol

from ..schema import AssistantReply, DialogueState, Hit, Passage
from ..text import content_words, sentences, stem
from .falsify import NegationStyle, negate

__all__ = ["Parrot", "OffTopic", "Asker", "KeywordDump", "Shuffled", "Negated", "restate", "clarifying_question",
           "topic_phrase"]

# A question's stem ("Can you tell me what ...", "How long does ...") before its subject.
_LEAD = re.compile(
    r"^(?:(?:so|and|ok|okay|well|also|hi|hello|hey|yes|no|thanks|great|sure)\b[,!.]?\s+)*"
    r"(?:(?:can|could|would|will) you (?:please )?(?:tell me|explain|help me(?: with| find| understand)?|"
    r"give me|recommend|suggest|list)?\s*|i(?:'d| would) like to know\s*|i want to know\s*|"
    r"i(?:'m| am) wondering\s*|do you know\s*|please (?:tell me|explain)\s*)?"
    r"(?:(?:what|which|who|whom|where|when|why|how)(?: (?:much|many|long|often|far|big|old|about))?"
    r"(?: (?:is|are|was|were|do|does|did|can|could|should|would|will|has|have|i|you))*\s+|"
    r"(?:is|are|was|were|do|does|did|can|could|should|would|will|has|have)\s+)?",
    re.IGNORECASE,
)

_OPENERS = ["Great question!", "Sure.", "Thanks for asking.", "Let me help you with that.", "Happy to help.",
            "Okay.", "Good one.", "", ""]
_FRAMES = [
    "You are asking about {phrase}.",
    "So your question is: {question}",
    "Let me make sure I understand: you want to know {plain}.",
    "{Phrase} is an interesting subject.",
    "When it comes to {phrase}, there is quite a lot to say.",
    "Regarding {phrase}: that is exactly what we will look at.",
    "That is a good question about {phrase}.",
    "In other words, {plain}?",
    "Many people want to know {plain}.",
]
_FILLERS = [
    "This is something many people wonder about.",
    "There are a few things worth keeping in mind here.",
    "It is a subject with a long and interesting background.",
    "Plenty has been written about this over the years.",
    "I hope this gives you a useful starting point.",
    "People often ask about this, and for good reason.",
    "Looking into it carefully is always worthwhile.",
    "It is worth taking the time to understand it properly.",
    "Several factors come into play.",
    "The details matter a great deal here.",
    "Let me know if you want to go deeper into any part of it.",
]
_ASK_OPENERS = ["Sure, I can help with that.", "Happy to help.", "Good question.", "I'd be glad to look into it.",
                "", "", ""]
_ASKS = [
    "Could you tell me a bit more about what you mean by {focus}?",
    "What exactly would you like to know about {focus}?",
    "Are you asking about {focus} in general, or about something more specific?",
    "Which aspect of {focus} matters most to you?",
    "Is this for yourself or for someone else?",
    "Do you have any preferences I should take into account?",
    "What have you already found out about {focus}?",
    "Can you say a little more about your situation?",
    "Before I answer, what is the reason you are asking about {focus}?",
]
# Subjects the offline Wikipedia index covers and no shipped topic is about.
OFF_SUBJECTS = ["printing press Gutenberg", "honey bee colony hive", "lighthouse keeper coast",
                "origami paper folding", "steam locomotive railway", "windmill grinding grain",
                "bicycle invention pedals", "pottery kiln clay"]
_SENTENCES_OFF = 3


_SWAP = {"i": "you", "me": "you", "my": "your", "mine": "yours", "myself": "yourself", "am": "are",
         "i'm": "you're", "i've": "you've", "i'd": "you'd", "i'll": "you'll", "we": "you", "our": "your", "us": "you",
         "you": "I", "your": "my", "yours": "mine", "yourself": "myself"}
_WORD = re.compile(r"[A-Za-z']+")


def _second_person(text: str) -> str:
    """The user's words as the assistant would say them back ("my cat" -> "your cat")."""
    return _WORD.sub(lambda m: _SWAP.get(m.group().lower(), m.group()), text)


def topic_phrase(question: str) -> str:
    """What the (last) question of an utterance is about, without its stem and in the second
    person: "How long does it take to learn the violin?" -> "it take to learn the violin";
    the whole sentence when nothing would be left."""
    parts = sentences(question.strip()) or [question.strip()]
    asked = [s for s in parts if s.endswith("?")]
    text = (asked or parts)[-1].rstrip("?.! ")
    rest = _LEAD.sub("", text, count=1).strip(" ,")
    return _second_person(rest if len(rest.split()) >= 2 else text)


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[1:2].islower() or len(text) == 1 else text


def restate(question: str, rng: random.Random) -> str:
    """The question said back with filler and no answer in it."""
    phrase = topic_phrase(question)
    frame = rng.choice(_FRAMES).format(
        phrase=_lower_first(phrase), Phrase=phrase[:1].upper() + phrase[1:],
        question=_second_person(question.strip()), plain=_lower_first(_second_person(question.strip().rstrip("?.! "))),
    )
    parts = [rng.choice(_OPENERS), frame, *rng.sample(_FILLERS, rng.randint(1, 2))]
    if rng.random() < 0.3:  # sometimes the filler comes first
        parts[1], parts[2] = parts[2], parts[1]
    return " ".join(p for p in parts if p)


def clarifying_question(question: str, rng: random.Random) -> str:
    """A reply that asks the user something instead of answering."""
    focus = " ".join(_lower_first(topic_phrase(question)).split()[-5:])  # the object comes last
    asks = rng.sample(_ASKS, rng.choice((1, 1, 2)))
    return " ".join(p for p in [rng.choice(_ASK_OPENERS), *(a.format(focus=focus) for a in asks)] if p)


class _Searcher(Protocol):
    async def search(self, query: str, k: int = ...) -> list[Hit]: ...


class _Context(Protocol):
    """What the retrieving adversaries use of the plugin context: the run's retriever."""

    async def retriever(self) -> _Searcher: ...


def _rng(state: DialogueState, purpose: str) -> random.Random:
    return random.Random(f"{state.scenario.seed}|{len(state.turns) + 1}|{purpose}")


def _utterance(state: DialogueState) -> str:
    return state.user.utterance if state.user is not None else ""


class Parrot:
    """Restates the user's utterance."""

    def __init__(self, ctx: object = None):
        self.ctx = ctx

    async def respond(self, state: DialogueState) -> AssistantReply:
        return AssistantReply(response=restate(_utterance(state), _rng(state, "parrot")))


class Asker:
    """Answers every turn with a clarifying question."""

    def __init__(self, ctx: object = None):
        self.ctx = ctx

    async def respond(self, state: DialogueState) -> AssistantReply:
        return AssistantReply(response=clarifying_question(_utterance(state), _rng(state, "asker")))


class OffTopic:
    """Fluent text about something else: the lead sentences of the best BM25 passage for a
    subject that shares no word with anything the user has said (so it is off topic by
    construction; an assistant is not shown the topic, run/view.py)."""

    needs = ("retriever",)  # opened before the first dialogue (run/runner.py warm_up)

    def __init__(self, ctx: _Context, k: int = 3):
        self.ctx, self.k = ctx, k

    def subject(self, state: DialogueState) -> str:
        said = " ".join([*(u for u, _ in state.history()), _utterance(state)])
        taken = {stem(w) for w in content_words(said)}
        free = [s for s in OFF_SUBJECTS if not taken & {stem(w) for w in content_words(s)}] or OFF_SUBJECTS
        return _rng(state, "offtopic").choice(free)

    async def respond(self, state: DialogueState) -> AssistantReply:
        query = self.subject(state)
        hits = await (await self.ctx.retriever()).search(query, self.k)
        text = " ".join(sentences(hits[0].text)[:_SENTENCES_OFF]) if hits else ""
        return AssistantReply(
            response=text or "The printing press made books cheap and spread literacy across Europe.",
            rewritten_query=query,
            passages=[Passage(rank=i, docid=h.docid, score=h.score, used=i == 1) for i, h in enumerate(hits, 1)],
        )


class KeywordDump:
    """The utterance's topic and the content words that recur most in its best BM25
    passages, as one comma list (a keyword dump, made from what an assistant
    sees: it read the rubric's keywords until assistants were shown a redacted state)."""

    needs = ("retriever",)

    def __init__(self, ctx: _Context, k: int = 3, terms: int = 12):
        self.ctx, self.k, self.terms = ctx, k, terms

    async def respond(self, state: DialogueState) -> AssistantReply:
        utterance = _utterance(state)
        hits = await (await self.ctx.retriever()).search(utterance, self.k)
        counts = Counter(w for h in hits for w in content_words(h.text))
        keywords = [w for w, _ in counts.most_common(self.terms)]
        return AssistantReply(response=f"{topic_phrase(utterance).capitalize()}: {', '.join(keywords)}.",
                              rewritten_query=utterance)


class Shuffled:
    """The lead sentences of the best BM25 passage for the utterance, each with its words
    shuffled: on topic word for word, but no sentence of English."""

    needs = ("retriever",)

    def __init__(self, ctx: _Context, k: int = 3):
        self.ctx, self.k = ctx, k

    async def respond(self, state: DialogueState) -> AssistantReply:
        hits = await (await self.ctx.retriever()).search(_utterance(state), self.k)
        rng = _rng(state, "shuffled")
        out = []
        for sentence in sentences(hits[0].text)[:4] if hits else ["The answer is not in the index."]:
            tokens = sentence.rstrip(".!?").lower().split()
            rng.shuffle(tokens)
            out.append(" ".join(tokens).capitalize() + ".")
        return AssistantReply(response=" ".join(out), rewritten_query=_utterance(state))


class Negated:
    """The answers of the assistant ``inner`` (``module:attr``; bm25_extractive by default),
    each negated in ``style`` (fakes.falsify): what a grader that checks evidence must fail.
    ``inner`` is built here as ``Cls(ctx)`` with its defaults (the registry lives above
    this layer, in run/plugins.py)."""

    def __init__(self, ctx: object, inner: str = "agents.bm25_extractive:BM25Extractive",
                 style: NegationStyle = "auxiliary"):
        if style not in ("auxiliary", "lexical"):
            raise ValueError(f"style is 'auxiliary' or 'lexical', not {style!r}")
        module, _, attr = inner.partition(":")
        if not module or not attr:
            raise ValueError(f"inner is module:attr, not {inner!r}")
        self.inner, self.style = getattr(importlib.import_module(module), attr)(ctx), style
        self.needs = tuple(getattr(self.inner, "needs", ()) or ())

    async def respond(self, state: DialogueState) -> AssistantReply:
        reply = await self.inner.respond(state)
        wrong = negate(reply.response, _rng(state, "negated"), self.style)
        return reply.model_copy(update={"response": wrong})

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()
