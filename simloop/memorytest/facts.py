"""The fact catalogue of the memory stress test, and rule scoring of probe answers.

A *fact* is something a user tells the assistant during the conversation - not in the
PTKB - whose use can be checked later: an allergy, a budget, a date, a name, a place, a
constraint.  Each fact has the utterance that reveals it, probe questions whose right
answer depends on it, and rules for a right answer:

* ``must_mention``: alternatives; a right answer mentions at least one.  They are words
  an answer only uses when it took the fact into account ("allergy", "Ingrid",
  "Edinburgh"), never words the probe itself contains.
* ``must_not``: things the answer must not *recommend*.  A hit counts only in a sentence
  without a negation or caution cue, so "avoid peanut butter" is fine and "pack peanut
  butter sandwiches" is not.  Crude, but it keeps the rules readable and deterministic;
  the LLM judge (``--judge``) is the finer scorer.

Matching is case-insensitive, on word boundaries ("nut" does not match "nutrition"),
and a space in a term matches any run of whitespace.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from ..text import sentences

__all__ = [
    "Fact", "FactKind", "RuleVerdict", "FACTS", "fact_by_id", "mentions", "find_terms", "score_rules",
    "NEGATION_CUES",
]

FactKind = Literal["allergy", "diet", "budget", "date", "name", "place", "constraint"]

# A sentence holding one of these is advising against something, not recommending it.
NEGATION_CUES: tuple[str, ...] = (
    "not", "no", "never", "avoid", "avoiding", "without", "instead", "skip", "free", "don't", "doesn't",
    "can't", "cannot", "isn't", "aren't", "except", "rather than", "unless", "allergic", "allergy",
    "intolerant", "intolerance", "off limits",
)


@dataclass(frozen=True)
class Fact:
    id: str
    kind: FactKind
    reveal: str  # what the user says, a first-person statement
    probes: tuple[str, ...]  # questions whose right answer depends on the fact
    must_mention: tuple[str, ...] = ()
    must_not: tuple[str, ...] = ()
    # Words that make the fact unusable for a persona when its PTKB or filler questions
    # already contain them (the probe would then test the PTKB, not the memory).
    clashes: tuple[str, ...] = field(default=())

    @property
    def key_terms(self) -> tuple[str, ...]:
        return (*self.must_mention, *self.clashes)


@dataclass(frozen=True)
class RuleVerdict:
    passed: bool
    mentioned: list[str]  # must_mention terms found
    recommended: list[str]  # must_not terms found outside a negated sentence
    reason: str  # "ok" | "missing" | "forbidden"


FACTS: tuple[Fact, ...] = (
    Fact("allergy-peanut", "allergy", "By the way, I have a severe peanut allergy.",
         ("Which snacks should I pack for a long day out?", "Which sweet treats are safe for me to bake for a party?"),
         must_mention=("allergy", "allergic", "allergies", "allergen", "allergens", "peanut-free", "nut-free"),
         must_not=("peanut butter", "peanuts", "satay"), clashes=("peanut",)),
    Fact("diet-vegan", "diet", "Also, I'm vegan now: no meat, fish, eggs or dairy.",
         ("What could I cook for dinner this weekend?", "Which protein sources should I eat after a workout?"),
         must_mention=("vegan", "plant-based", "veganism"),
         must_not=("beef", "chicken", "pork", "bacon", "salmon", "eggs", "whey"), clashes=("vegetarian", "meat")),
    Fact("diet-coeliac", "diet", "I have coeliac disease, so everything I eat must be gluten-free.",
         ("What could I have for breakfast before a busy morning?", "Which bread should I buy at the bakery?"),
         must_mention=("gluten", "gluten-free", "coeliac", "celiac"),
         must_not=("wheat", "rye", "barley"), clashes=("wheat",)),
    Fact("diet-lactose", "diet", "Just so you know, I can't have lactose.",
         ("What should I put in my morning smoothie?", "Which cheese could I serve at a dinner party?"),
         must_mention=("lactose", "lactose-free", "dairy-free", "intolerance", "intolerant"),
         must_not=("cow's milk", "cream"), clashes=("dairy", "milk")),
    Fact("budget-laptop", "budget", "My budget for a new laptop is 600 euros at most.",
         ("Which laptop model would suit my freelance design work?",
          "What specifications matter most when choosing a new laptop?"),
         must_mention=("600", "budget", "affordable", "inexpensive"), clashes=("laptop", "computer")),
    Fact("budget-holiday", "budget", "Money is tight this year: our budget for the summer trip is 1500 euros.",
         ("Which destinations would make a good family holiday this summer?",
          "Which kind of accommodation should we book for our holiday?"),
         must_mention=("1500", "1,500", "budget", "affordable", "inexpensive"), must_not=("luxury",),
         clashes=("holiday",)),
    Fact("date-wedding", "date", "My sister's wedding is on the 14th of June.",
         ("By when do I need my suit ready for the big day?", "When should I book the hotel for my sister's big day?"),
         must_mention=("june", "14th", "14 june", "wedding"), clashes=("wedding", "sister")),
    Fact("date-driving-test", "date", "My driving test is on the 3rd of March.",
         ("How should I plan my practice over the coming weeks?", "When should I book extra lessons?"),
         must_mention=("march", "driving"), clashes=("driving",)),
    Fact("name-daughter", "name", "My daughter Ingrid turns seven next week.",
         ("What birthday present would my daughter enjoy?", "What should I write in my daughter's birthday card?"),
         must_mention=("ingrid",), clashes=("daughter", "birthday")),
    Fact("name-manager", "name", "My new manager is called Victoria.",
         ("How should I start my first email to my new manager?",
          "How do I politely ask my new manager for a day off next week?"),
         must_mention=("victoria",), clashes=("manager",)),
    Fact("place-move", "place", "We're moving to Edinburgh in the autumn.",
         ("Which neighbourhoods would suit our family after the move?",
          "What kind of weather should we expect after moving house?"),
         must_mention=("edinburgh", "scotland", "scottish"), clashes=("moving",)),
    Fact("place-trip", "place", "I'm flying to Reykjavik next month for a conference.",
         ("What clothes should I pack for my trip?", "Which currency should I bring for my upcoming trip abroad?"),
         must_mention=("reykjavik", "iceland", "icelandic"), clashes=("conference",)),
    Fact("constraint-knee", "constraint", "I tore a knee ligament, so running is out for now.",
         ("What exercise could I do to stay fit this month?", "Can you suggest a workout for this week?"),
         must_mention=("knee", "knees", "ligament", "ligaments", "low-impact", "injury", "injured"),
         must_not=("running", "jogging", "jumping", "sprints"),
         clashes=("knee", "running", "marathon")),
    Fact("constraint-no-car", "constraint", "I don't own a car, I ride a bicycle to get around.",
         ("What's the best way to reach the countryside for a weekend hike?",
          "How should I commute to my new job across town?"),
         must_mention=("bike", "bicycle", "bicycles", "cycling", "cycle"), must_not=("drive", "driving", "car park"),
         clashes=("car", "bike", "cycling")),
    Fact("constraint-cooking-time", "constraint", "I only have twenty minutes a day to cook.",
         ("Which family dinners could I make on busy weeknights?", "How should I plan my meals for the week?"),
         must_mention=("minutes", "quick", "fast", "20-minute"), must_not=("slow-cooked", "roast"),
         clashes=("cook", "cooking")),
)


def fact_by_id(fact_id: str) -> Fact:
    for f in FACTS:
        if f.id == fact_id:
            return f
    raise KeyError(fact_id)


@lru_cache(maxsize=512)
def _pattern(term: str) -> re.Pattern[str]:
    # \b needs a word character at the edge; terms such as "1,500" or "20-minute" have one.
    body = r"\s+".join(re.escape(part) for part in term.strip().split())
    return re.compile(rf"(?<![\w]){body}(?![\w])", re.IGNORECASE)


def mentions(text: str, term: str) -> bool:
    """Does ``text`` contain ``term`` as a whole word or phrase (case-insensitive)?"""
    return bool(term.strip()) and _pattern(term).search(text) is not None


def find_terms(text: str, terms: Iterable[str]) -> list[str]:
    return [t for t in terms if mentions(text, t)]


def _negated(sentence: str) -> bool:
    return any(mentions(sentence, cue) for cue in NEGATION_CUES)


def _recommended(text: str, terms: Sequence[str]) -> list[str]:
    """``terms`` that appear in a sentence without a negation cue."""
    found: list[str] = []
    for sentence in sentences(text) or [text]:
        if _negated(sentence):
            continue
        found += [t for t in find_terms(sentence, terms) if t not in found]
    return found


def score_rules(answer: str, must_mention: Sequence[str] = (), must_not: Sequence[str] = ()) -> RuleVerdict:
    """A probe answer against its rules: at least one ``must_mention`` term (when any are
    given) and no ``must_not`` term recommended."""
    mentioned = find_terms(answer, must_mention)
    recommended = _recommended(answer, must_not) if must_not else []
    if recommended:
        return RuleVerdict(False, mentioned, recommended, "forbidden")
    if must_mention and not mentioned:
        return RuleVerdict(False, mentioned, recommended, "missing")
    return RuleVerdict(True, mentioned, recommended, "ok")
