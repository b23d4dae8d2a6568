"""Memory probe scenarios: reveal a fact at turn r, probe it at exactly turn r + d.

A scenario's script lives in its topic: ``topic.rubric`` holds one entry per user turn
(``filler-N``, ``reveal``, ``probe``), so a transcript says by itself which turn revealed
what and which turn probed it, and ``ProbeSimulator`` (the scripted user of
``simloop memory``) only has to play the entries in order.  Filler turns are the
persona's own rubric questions, topic after topic, so the conversation keeps going on
what this user cares about while the fact recedes.

Scoring: rules (``memoryfacts.score_rules``) by default; ``ProbeJudge`` asks an LLM
whether the answer used the earlier fact (role ``judge``).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import BadInputError, SimloopError
from ..schema import DialogueState, Persona, RubricQuestion, Scenario, SimulatorTurn, Stage, Topic
from ..text import content_words, first_lower, stem
from .facts import FACTS, Fact, find_terms
from .formats import ProbeVerdict

if TYPE_CHECKING:
    from ..run import Context

__all__ = [
    "ProbePlan", "eligible_facts", "deal_facts", "fillers_for", "build_script", "build_probes",
    "ProbeSimulator", "VerdictChat", "ProbeJudge", "query_kept", "REVEAL", "PROBE",
]

REVEAL, PROBE = "reveal", "probe"
_FILLER = "filler"
# Only stop words around the question: the offline rewrite reads earlier user turns, and
# an "Interesting." would turn up in its queries.
_ASK = ["{q}", "Thanks. {q}", "OK. {q}", "Got it. {q}", "And {ql}", "Great, thanks. {q}"]
_NEW_TOPIC = "Something else now. {q}"
_AGAIN = "Once more: {ql}"
_BACK = "So, {ql}"


@dataclass(frozen=True)
class ProbePlan:
    """Where a scenario reveals its fact and probes it; ``probe_turn - reveal_turn == distance``."""

    dialogue_id: str
    persona_id: str
    fact_id: str
    kind: str
    distance: int
    reveal_turn: int
    probe_turn: int
    reveal: str
    question: str
    must_mention: tuple[str, ...]
    must_not: tuple[str, ...]


# ----------------------------------------------------------------------------- facts per persona


def eligible_facts(persona: Persona, facts: Sequence[Fact] = FACTS) -> list[Fact]:
    """Facts the persona's PTKB does not already state (the probe must test the memory,
    not the profile)."""
    ptkb = " ".join(persona.ptkb)
    return [f for f in facts if not find_terms(ptkb, f.key_terms)]


def _stable(text: str) -> int:
    return zlib.crc32(text.encode())  # unlike hash(), the same in every process


def deal_facts(personas: Sequence[Persona], n: int, seed: int = 0,
               facts: Sequence[Fact] = FACTS) -> dict[str, list[Fact]]:
    """``n`` facts per persona, dealt round-robin from the catalogue over the personas in
    order (from position ``seed``), skipping facts a persona's PTKB already states: a run
    probes as many different facts as it has persona x fact slots, and every distance of
    a persona probes the same facts (distance is the only thing that varies)."""
    cursor, out = seed % len(facts), {}
    for persona in personas:
        eligible = {f.id for f in eligible_facts(persona, facts)}
        if not eligible:
            raise BadInputError(f"persona {persona.id!r}: every chosen fact clashes with its PTKB")
        chosen: list[Fact] = []
        for step in range(len(facts)):
            fact = facts[(cursor + step) % len(facts)]
            if fact.id in eligible:
                chosen.append(fact)
                if len(chosen) == min(n, len(eligible)):
                    cursor = (cursor + step + 1) % len(facts)
                    break
        out[persona.id] = chosen
    return out


def fillers_for(persona: Persona, fact: Fact) -> list[tuple[str, str]]:
    """(topic id, question) of every rubric question of the persona that does not give
    the fact's words away, in persona order."""
    out = [(t.id, q.question) for t in persona.topics for q in t.rubric if not find_terms(q.question, fact.key_terms)]
    if not out:
        raise BadInputError(f"persona {persona.id!r} has no rubric questions to fill the conversation with")
    return out


# ----------------------------------------------------------------------------- scripts


def _filler_text(fillers: list[tuple[str, str]], i: int, turn: int, after_fact: bool = False) -> str:
    """The ``i``-th filler question as the user puts it at ``turn``: a second round or a
    new topic is announced, right after a fact the user goes back to the topic, the rest
    gets a rotating acknowledgement."""
    topic, q = fillers[i % len(fillers)]
    fill = {"q": q, "ql": first_lower(q)}
    if i >= len(fillers):
        return _AGAIN.format(**fill)
    if after_fact:
        return _BACK.format(**fill)
    if turn == 1:
        return q
    if i and fillers[i - 1][0] != topic:
        return _NEW_TOPIC.format(**fill)
    return _ASK[turn % len(_ASK)].format(**fill)


def build_script(fillers: list[tuple[str, str]], fact: Fact, probe: str, distance: int,
                 reveal_turn: int) -> list[RubricQuestion]:
    """One entry per user turn: fillers, the reveal at ``reveal_turn`` (which also asks
    the next filler question, so the topic keeps going), fillers, the probe at exactly
    ``reveal_turn + distance``."""
    if distance < 1 or reveal_turn < 1:
        raise BadInputError("distances and the reveal turn must be at least 1")
    script: list[RubricQuestion] = []
    used = 0
    for turn in range(1, reveal_turn + distance + 1):
        if turn == reveal_turn + distance:
            script.append(RubricQuestion(id=PROBE, question=probe, keywords=list(fact.must_mention)))
            continue
        text = _filler_text(fillers, used, turn, after_fact=turn == reveal_turn)
        used += 1
        if turn == reveal_turn:
            script.append(RubricQuestion(id=REVEAL, question=f"{fact.reveal} {text}", keywords=list(fact.must_mention)))
        else:
            script.append(RubricQuestion(id=f"{_FILLER}-{turn}", question=text))
    return script


def build_probes(personas: Iterable[Persona], distances: Sequence[int], reveal_turn: int = 2,
                 facts_per_persona: int = 1, seed: int = 0, prefix: str = "mem",
                 facts: Sequence[Fact] = FACTS) -> list[tuple[Scenario, ProbePlan]]:
    """Scenarios (persona x fact x distance) and where each one reveals and probes."""
    personas = list(personas)
    dealt = deal_facts(personas, facts_per_persona, seed, facts)
    out: list[tuple[Scenario, ProbePlan]] = []
    for persona in personas:
        for fact in dealt[persona.id]:
            fillers = fillers_for(persona, fact)
            probe = fact.probes[_stable(f"{persona.id}|{fact.id}") % len(fact.probes)]
            title = next(t.title for t in persona.topics if t.id == fillers[0][0])
            for d in distances:
                did = f"{prefix}-{persona.id}-{fact.id}-d{d}"
                topic = Topic(
                    id=f"memory-{fact.id}-d{d}", title=title,
                    need=f"Memory probe: '{fact.reveal}' said at turn {reveal_turn}, needed at turn {reveal_turn + d}.",
                    rubric=build_script(fillers, fact, probe, d, reveal_turn),
                )
                dseed = seed + _stable(did) % 10_000
                scenario = Scenario(dialogue_id=did, persona=persona, topic=topic,
                                    behaviour=persona.behaviour.sample(dseed), seed=dseed)
                plan = ProbePlan(did, persona.id, fact.id, fact.kind, d, reveal_turn, reveal_turn + d, fact.reveal,
                                 probe, fact.must_mention, fact.must_not)
                out.append((scenario, plan))
    return out


def query_kept(query: str | None, plan: ProbePlan) -> bool:
    """Did the probe's rewritten query carry a word of the reveal that the probe question
    lacks?  Offline, this is what decides whether retrieval can use the fact."""
    if not query:
        return False
    have = {stem(w) for w in content_words(plan.question)}
    wanted = {stem(w) for w in content_words(plan.reveal)} - have
    return bool(wanted & {stem(w) for w in content_words(query)})


# ----------------------------------------------------------------------------- the scripted user


class ProbeSimulator:
    """Plays a memory-probe script (``topic.rubric``, one entry per turn), then ends
    satisfied.  Stateless: the next turn is ``len(state.turns) + 1``."""

    def __init__(self, ctx: Context | None = None):
        self.ctx = ctx

    @staticmethod
    def _turn(scenario: Scenario, n: int) -> SimulatorTurn:
        script = scenario.topic.rubric
        if n > len(script):
            return SimulatorTurn.stop("user_satisfied", f"probe script done ({len(script)} turns)")
        entry = script[n - 1]
        intent = entry.id if entry.id in (REVEAL, PROBE) else _FILLER
        return SimulatorTurn.say(entry.question, rubric_id=entry.id, intent=intent)

    async def open(self, state: DialogueState) -> SimulatorTurn:
        return self._turn(state.scenario, 1)

    async def next(self, state: DialogueState) -> SimulatorTurn:
        return self._turn(state.scenario, len(state.turns) + 1)


# ----------------------------------------------------------------------------- LLM scoring


_JUDGE_SYSTEM = """You check whether an assistant remembered something a user told it earlier in a conversation.
You see what the user said earlier, the question they asked later, and the assistant's answer to that question.
- uses_fact: true when the answer visibly takes the earlier statement into account (names it, adapts to it,
  or builds on it); false when the answer is generic or ignores it.
- contradicts_fact: true when the answer recommends or assumes something the earlier statement rules out.
Reply with JSON only: a short justification first, then the two booleans."""


def judge_messages(plan: ProbePlan, response: str) -> list[dict[str, str]]:
    user = (f"Earlier, the user said:\n{plan.reveal}\n\n"
            f"{plan.distance} turns later, the user asked:\n{plan.question}\n\n"
            f"The assistant answered:\n{response or '(no answer)'}")
    return [{"role": "system", "content": _JUDGE_SYSTEM}, {"role": "user", "content": user}]


class VerdictChat(Protocol):
    """The judge's model: a validated ``ProbeVerdict`` for ``messages``, and the stage it cost."""

    async def structured(self, messages: Sequence[dict[str, Any]], schema: type[ProbeVerdict], *, stage: str
                         ) -> tuple[ProbeVerdict, Stage]: ...


class ProbeJudge:
    """LLM scoring of probe answers, at most ``concurrency`` calls at a time.  A failed
    call yields ``None`` (the caller falls back to the rules) and its error."""

    def __init__(self, chat: VerdictChat, concurrency: int = 8):
        self.chat = chat
        self._sem = asyncio.Semaphore(max(1, concurrency))

    async def judge(self, plan: ProbePlan, response: str) -> tuple[ProbeVerdict | None, Stage | None, str | None]:
        async with self._sem:
            try:
                verdict, stage = await self.chat.structured(judge_messages(plan, response), ProbeVerdict,
                                                            stage="judge.memory")
            except SimloopError as exc:  # one failed call costs one LLM score, not the test
                failed = getattr(exc, "stage", None)
                return None, failed if isinstance(failed, Stage) else None, f"{type(exc).__name__}: {exc}"
        return verdict, stage, None
