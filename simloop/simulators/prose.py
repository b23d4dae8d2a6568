"""Is an answer written as prose?  Two cheap form checks the offline grader caps on.

MiniLM and keyword coverage see a bag of words: a comma list of the topic's keywords or
the real answer with its words shuffled scores like the answer itself.  What such text
lacks is grammar, and the function words carry it:

* ``states_nothing``: no clause with a verb-like function word ("is", "are", "can",
  "include" ...) outside a heading such as "Why smoking is so hard to quit:", and few
  stop words overall: a keyword list ("Understanding gout: uric acid, joint, ...");
* ``scrambled_pairs``: a determiner directly followed by a function word ("the of",
  "an is") or a sentence ending in a determiner or "and": word order English never has.

Both thresholds were chosen on the human responses of iKAT 2023 train (see graders.py,
``EmbeddingGrader``); the numbers on 2023 test and 2024 are in docs/simulators.md.
"""

from __future__ import annotations

import re

from ..text import STOPWORDS, content_words, sentences, words

__all__ = ["states_nothing", "scrambled_pairs", "stop_share"]

# Words that make a clause a statement: auxiliaries, copulas and the verbs a list is led
# in with ("Popular ones include ...").
_VERBISH = frozenset(
    """is are was were be been being am isn't aren't wasn't weren't has have had hasn't haven't do does did
    can could will would should may might must shall can't cannot won't don't doesn't it's that's there's
    here's they're we're you're include includes including contain contains consist consists""".split()
)
# A segment led by one of these is a heading or an indirect question, not a statement.
_WH = frozenset("why how what when where which who whom whose".split())
_SEGMENT = re.compile(r"[:;,.!?()\[\]\n]+")

# Shuffled word order: a determiner directly before a function word, or ending a sentence.
_DETERMINERS = frozenset({"the", "a", "an"})
_NEVER_AFTER_DETERMINER = frozenset(
    "the a an of and or to in on at by for with from is are was were be been that which as but nor into".split()
)
_NEVER_LAST = frozenset({"the", "a", "an", "and", "or"})
_TOKEN_EDGE = "\"'“”‘’([{"


def stop_share(text: str) -> float:
    """Share of the words of ``text`` that are stop words (1.0 for no words)."""
    ws = words(text)
    return sum(w in STOPWORDS for w in ws) / len(ws) if ws else 1.0


def states_nothing(answer: str, max_stop_share: float, echo: str = "") -> bool:
    """No clause of ``answer`` states anything, and under ``max_stop_share`` of its words
    are stop words: a list of terms, not an answer.

    Clauses whose content words all come from ``echo`` (the question and the utterance)
    are left out first: a list led in by the question restated ("The great white shark and
    what are its teeth like: shark, jaws, ...") has a verb, but only the user's."""
    said = set(content_words(echo))
    segments = [seg for seg in _SEGMENT.split(answer) if set(content_words(seg)) - said]
    if stop_share(" ".join(segments)) >= max_stop_share:
        return False
    for segment in segments:
        ws = words(segment)
        # A clause has a few words: a lone "include" is one more term of the list.
        if len(ws) >= 3 and ws[0] not in _WH and any(w in _VERBISH for w in ws):
            return False
    # A list of names ("Samsung Galaxy S22, Xiaomi 12, ...") answers a "which ...?"
    # question: a capitalised word inside the answer, not opening it or a sentence.
    return not _NAME.search(answer)


_NAME = re.compile(r"(?<=[,;:(]\s)[A-Z]|(?<=[a-z0-9]\s)[A-Z]")


def scrambled_pairs(answer: str) -> int:
    """How often ``answer`` puts words in an order English does not (see the module notes).

    Case and punctuation matter: "Sagittarius A*, abbreviated" or "a B.A in" are a letter,
    not the article, and a comma between two words breaks their adjacency."""
    count = 0
    for sentence in sentences(answer):
        tokens = sentence.split()
        for i, (left, right) in enumerate(zip(tokens, tokens[1:])):
            article = left.strip(_TOKEN_EDGE).lower() in _DETERMINERS and left[-1].isalpha() and (i == 0 or left != "A")
            if article and right.strip(_TOKEN_EDGE + ".,;:!?)").lower() in _NEVER_AFTER_DETERMINER:
                count += 1
        last = tokens[-1] if tokens else ""
        if last.endswith((".", "!")) and last[:-1] in _NEVER_LAST:
            count += 1
    return count
