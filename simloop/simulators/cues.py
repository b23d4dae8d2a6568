"""What the simulated user reads in the dialogue: a clarifying question in the assistant's
reply, a persona fact already said.  Built on the one text toolkit (``simloop.text``, whose
``is_asking`` is the one asking rule: re-exported here for the grader and the policy)."""

from __future__ import annotations

import re

from ..text import content_terms, is_asking, sentences

__all__ = ["assistant_question", "is_asking", "mentions_statement"]


# Offers that end a reply ("Do you want me to list ...?") are not clarifying questions:
# iKAT reference responses end with them all the time and users simply go on.
_OFFER = re.compile(
    r"\b(would you like|do you want|want me to|like me to|shall i|should i|can i help|"
    r"anything else|is there anything|let me know|may i help|can i assist)\b"
)
_YOU = re.compile(r"\b(you|your|yours|you're|you've)\b")


def assistant_question(response: str) -> str | None:
    """The clarifying question the assistant asks the user, if any: a sentence that asks
    (``is_asking``: "?" or a request such as "Please tell me your budget."), addresses the
    user and is not an offer to say more."""
    for sent in reversed(sentences(response)):
        if not is_asking(sent):
            continue
        low = sent.lower()
        if _YOU.search(low) and not _OFFER.search(low):
            return sent
    return None


def mentions_statement(utterance: str, statement: str, share: float = 0.7) -> bool:
    """Whether ``utterance`` already states ``statement`` (most of its content words occur),
    so a persona fact is not volunteered twice."""
    terms = content_terms(statement)
    if not terms:
        return False
    have = set(content_terms(utterance))
    return sum(1 for t in terms if t in have) >= share * len(terms)
