"""Answers made wrong on purpose: what a grader that checks evidence must fail.

* ``negate``: every statement said the other way round.  Two styles, so that a grader
  tuned on one is checked on the other: ``"auxiliary"`` puts "not" after the first
  auxiliary or copula ("is" -> "is not", "can" -> "cannot") or "Do not" before an
  instruction, takes away a negation that is there, and changes the numbers (doubled; a
  year moved by seven); ``"lexical"`` swaps
  a word for its opposite (its own word list, written apart from the grader's), or says
  "never" / "no longer", and changes numbers another way (a count plus one to three, a
  year moved by eleven, other values times three).
* ``swap_entities``: every name replaced by another; which one is the caller's choice
  (scripts/bench_grader.py draws them from other topics, or from the same topic's other
  turns).

Both are plain text rewrites written for simloop; draws come from a seeded RNG.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Literal

from ..text import sentences

__all__ = ["negate", "negate_sentence", "swap_entities", "change_numbers", "NegationStyle"]

NegationStyle = Literal["auxiliary", "lexical"]

_AUX = ("is are was were am can could will would should may might must has have had does do did shall "
        "isn't aren't wasn't weren't can't couldn't won't wouldn't shouldn't mustn't hasn't haven't hadn't "
        "doesn't don't didn't cannot").split()
_NEGATED_AUX = {"isn't": "is", "aren't": "are", "wasn't": "was", "weren't": "were", "can't": "can", "cannot": "can",
                "couldn't": "could", "won't": "will", "wouldn't": "would", "shouldn't": "should", "mustn't": "must",
                "hasn't": "has", "haven't": "have", "hadn't": "had", "doesn't": "does", "don't": "do", "didn't": "did"}
_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*")
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w])")
# The lexical style's opposites: its own list (the grader's is in simulators/claims.py), so
# that the held-out check also meets pairs the grader was never given.
_OPPOSITES_TEXT = """
increases/decreases increase/decrease increased/decreased higher/lower lower/higher high/low low/high
more/less less/more most/least best/worst better/worse good/bad large/small larger/smaller largest/smallest
big/tiny long/brief longer/shorter early/late earlier/later before/after after/before warm/cold hot/cool
cold/hot easy/hard difficult/easy safe/hazardous dangerous/harmless healthy/harmful common/uncommon
popular/unknown cheap/costly expensive/inexpensive strong/feeble weak/strong fast/sluggish slow/rapid
ancient/recent recent/ancient permanent/temporary temporary/permanent rough/smooth smooth/rough tight/loose
loose/tight public/private private/public include/exclude includes/excludes allowed/banned allows/bans
required/optional necessary/pointless possible/impossible effective/useless rich/poor north/south south/north
east/west west/east first/last last/first young/old old/young new/old modern/old-fashioned open/closed
wet/arid dry/humid full/empty heavy/light light/heavy deep/shallow wide/narrow rare/widespread
often/seldom always/never many/few frequently/occasionally increase/reduce rises/falls grew/shrank
""".split()
_OPPOSITES = dict(pair.split("/") for pair in _OPPOSITES_TEXT)
# Verbs an instruction opens with ("Add the oil.", "Visit the souk."): negated as "Do not ...".
_IMPERATIVES = frozenset("""add apply ask avoid book bring buy call check choose combine consider contact cook cut
drink eat enjoy explore find follow get give go have head keep let look make mix order pick place plan prepare
put read remember remove roll serve slice spend start stay stir take try use visit wait walk watch wear""".split())
_VERBS_3RD = frozenset("""contains includes causes requires helps offers provides uses makes takes gives
needs allows supports produces reduces increases improves protects affects lives grows eats feeds lasts
covers remains stays becomes means shows runs works""".split())


def negate(text: str, rng: random.Random, style: NegationStyle = "auxiliary") -> str:
    """``text`` with every sentence said the other way round (sentences that give the
    style no handle, as a bare list of names, stay as they are)."""
    return " ".join(negate_sentence(s, rng, style) for s in sentences(text))


def negate_sentence(sentence: str, rng: random.Random, style: NegationStyle = "auxiliary") -> str:
    if style == "auxiliary":
        out = _flip_auxiliary(sentence)
        return change_numbers(out, rng, "double")
    for rewrite in (_swap_opposite, _never_or_no_longer):
        out = rewrite(sentence)
        if out != sentence:
            return change_numbers(out, rng, "shift")
    return change_numbers(_flip_auxiliary(sentence), rng, "shift")


def _flip_auxiliary(sentence: str) -> str:
    """The first auxiliary negated, or its negation taken away ("is" <-> "is not")."""
    tokens = sentence.split(" ")
    for i, tok in enumerate(tokens):
        word = tok.strip(",;:.!?\"'()").lower().replace("’", "'")
        if word not in _AUX:
            continue
        nxt = tokens[i + 1].strip(",;:.!?").lower() if i + 1 < len(tokens) else ""
        if word in _NEGATED_AUX:  # "isn't" -> "is"
            tokens[i] = _case(tok, tok.lower().replace("’", "'").replace(word, _NEGATED_AUX[word]))
        elif nxt in ("not", "never"):
            del tokens[i + 1]
        elif word == "can":
            tokens[i] = _case(tok, tok.lower().replace("can", "cannot", 1))
        else:
            tokens.insert(i + 1, "not")
        return " ".join(tokens)
    if tokens and tokens[0].lower() in _IMPERATIVES:  # "Add the oil." -> "Do not add the oil."
        return "Do not " + tokens[0].lower() + (" " + " ".join(tokens[1:]) if len(tokens) > 1 else "")
    return sentence


def _swap_opposite(sentence: str) -> str:
    for m in _WORD.finditer(sentence):
        opposite = _OPPOSITES.get(m.group().lower())
        if opposite:
            return sentence[:m.start()] + _case(m.group(), opposite) + sentence[m.end():]
    return sentence


def _never_or_no_longer(sentence: str) -> str:
    """"X is Y" -> "X is no longer Y"; "X contains Y" / "X founded Y" -> "X never contains Y"."""
    tokens = sentence.split(" ")
    for i, tok in enumerate(tokens):
        word = tok.strip(",;:.!?").lower()
        if i and word in ("is", "are", "was", "were") and i + 1 < len(tokens) and tokens[i + 1].lower() != "not":
            tokens.insert(i + 1, "no longer")
            return " ".join(tokens)
        if i and (word in _VERBS_3RD or (word.endswith("ed") and len(word) > 4)) and tokens[i - 1][:1].isalpha():
            tokens.insert(i, "never")
            return " ".join(tokens)
    return sentence


def change_numbers(text: str, rng: random.Random, how: Literal["double", "shift"] = "double") -> str:
    """Every number in ``text`` replaced by another: a year (1000-2100) moved by 7
    (``double``) or 11 (``shift``) years; other values doubled, or (``shift``) a count up to
    20 raised by one to three and anything larger multiplied by three."""

    def repl(m: re.Match[str]) -> str:
        whole, frac = m.group(1), m.group(2) or ""
        value = int(whole.replace(",", ""))
        if 1000 <= value <= 2100 and "," not in whole and not frac:
            return str(value + (7 if how == "double" else -11))
        if how == "double":
            new = value * 2 if value else 3
        else:
            new = value + rng.randint(1, 3) if value <= 20 else value * 3
        return (f"{new:,}" if "," in whole else str(new)) + frac

    return _NUMBER.sub(repl, text)


def swap_entities(text: str, spans: list[str], replace: Callable[[str], str | None]) -> str:
    """``text`` with each of ``spans`` (the names it contains, claims.entities) replaced by
    ``replace(span)``; a span ``replace`` has nothing for stays."""
    out = text
    for span in sorted(set(spans), key=len, reverse=True):
        new = replace(span)
        if new:
            out = re.sub(rf"(?<![\w]){re.escape(span)}(?![\w])", new, out)
    return out


def _case(template: str, word: str) -> str:
    """``word`` in the case of ``template`` (with its punctuation)."""
    core = template.strip(",;:.!?\"'()")
    lead = template[:template.find(core)] if core else ""
    tail = template[template.find(core) + len(core):] if core else ""
    w = word.strip(",;:.!?\"'()")
    if core[:1].isupper():
        w = w[:1].upper() + w[1:]
    return lead + w + tail
