"""The template voice's phrase pools (written for simloop; no real iKAT utterance is copied).

Pools are wide on purpose: the realism bench requires that no utterance makes up more
than 1% of a run, and that word pairs stay varied (distinct-2), so a reaction or a closing
line must rarely recur across dialogues.  Closing lines are assembled from three parts
(hundreds of combinations) for the same reason.  Placeholders: ``{x}`` a noun phrase or
an embedded question, ``{kw}`` the words a re-ask is after (only words the user has:
the question's, the topic title's or their own), ``{q}`` a question put again, ``{fact}``
a persona fact.
"""

from __future__ import annotations

import random

__all__ = ["LINES", "closing_line", "pick"]

LINES: dict[str, list[str]] = {
    # Reactions before the next question (after an answer that passed).
    "ack": [
        "Interesting.", "OK.", "Oh, nice.", "Got it.", "I see.", "Makes sense.", "Good to know.", "Huh.", "Right.",
        "Cool.", "Wow.", "Thanks.", "Thank you.", "That's interesting.", "That helps.", "That makes sense.",
        "That's useful.", "That's good to know.", "That clears it up.", "This is helpful.", "That's neat.",
        "It's fascinating.", "Ah, OK.", "Fair enough.", "Great, thanks.", "Hmm, OK.", "Alright.", "Nice one.",
        "That was quick.", "Oh, I didn't know that.", "That's more than I expected.", "This is great.",
    ],
    "greet": ["Hi!", "Hello.", "Hey.", "Hi there.", "Good morning.", "Hello there.", "Hey, quick question."],
    # "Tell me about X": X is the subject of a "What is X" question.
    "about": [
        "Tell me about {x}.", "Tell me more about {x}.", "I'd like to know about {x}.", "I want to learn about {x}.",
        "What can you tell me about {x}?", "Can you tell me about {x}?", "Some background on {x}, please.",
        "I'm curious about {x}.", "Can you give me an overview of {x}?",
        "What do you know about {x}?", "I'm reading up on {x}.",
        "Any info on {x}?", "Do you know much about {x}?",
    ],
    # X is an embedded question: "where Fiji is".
    "indirect": [
        "Can you tell me {x}?", "I'd like to know {x}.", "I wonder {x}.", "Do you know {x}?",
        "I'm not sure {x}.", "I want to find out {x}.", "Could you explain {x}?", "Please explain {x}.",
        "I've never understood {x}.", "Any idea {x}?",
    ],
    # Connectors: "and" ones continue the thread (the question refers back), "next" ones move on.
    "and": ["And", "So", "Also,", "OK, and", "And then", "But"],
    "next": ["Now,", "Then", "One more:", "Next,", "Another thing:", "Oh, one more thing:", "OK, now"],
    # A re-ask: what the user is after, in words the user has (never the answer's).
    "spec": [
        "I need something on {kw}.", "What about {kw}?", "I mean {kw}.", "I'm after {kw}.",
        "I was asking about {kw}.", "Anything about {kw}?", "Cover {kw}, please.", "Say something about {kw}.",
        "I want details on {kw}.", "Does it mention {kw}?", "Could you focus on {kw}?", "How about {kw}?",
        "Shouldn't it mention {kw}?", "Is there anything on {kw}?", "And {kw}?",
        "I'm interested in {kw}.", "Specifically {kw}.", "Just {kw}, please.", "Mainly {kw}.",
        "The part about {kw}, please.", "Focus on {kw}.", "Does that cover {kw}?", "I care about {kw}.",
        "Tell me about {kw} then.", "Only {kw}.", "I meant {kw}.", "Can we talk about {kw}?", "Any details on {kw}?",
        "Let's stick to {kw}.", "What do you have on {kw}?",
    ],
    # A re-ask that puts the question again ({q}: the question, lower-cased first letter).
    "restate": [
        "My question was: {q}", "I asked: {q}", "Again, {q}", "Simply put, {q}", "I'm asking: {q}",
        "What I want to know is: {q}", "Let me put it again: {q}", "Just tell me: {q}", "Once more: {q}",
        "In short: {q}", "Put simply, {q}", "So, {q}", "Really, {q}", "My point is: {q}", "Basically, {q}",
    ],
    # ... and as an embedded question ({x}: "where cinnamon comes from").
    "restate.indirect": [
        "I asked {x}.", "I want to know {x}.", "I was asking {x}.", "My question is {x}.",
        "I just need to know {x}.", "All I want to know is {x}.",
    ],
    "complain.calm": [
        "That's too general.", "That's not quite it.", "That doesn't answer it.", "This isn't what I asked.",
        "Hmm, not really.", "Not quite.", "That's a bit vague.", "That's not what I meant.", "It doesn't say that.",
        "You missed my point.", "I don't see the answer there.", "Close, but no.", "That's beside the point.",
        "That's not my question.", "Sorry, that isn't it.",
        "Hmm, that's something else.", "That's not really my question.", "Not what I was after.",
        "That doesn't help me much.", "I was hoping for something else.", "That's a different topic.", "Not exactly.",
        "That's off the mark.", "Hmm, no.", "I don't think that answers it.",
    ],
    "complain.annoyed": [
        "That still doesn't answer it.", "That's still too vague.", "No, that's not it either.",
        "You're not answering me.", "Again, not what I asked.", "That misses it again.", "It still isn't there.",
        "Still not it.", "That's the same thing again.",
        "Still nothing on my question.", "That's not it again.", "You keep missing it.", "Again, that's off.",
        "Nope, still not it.", "That isn't what I need.", "Once again, no.", "That still misses the point.",
        "Not that again.", "Still off topic.", "That doesn't get any closer.", "Hmm, still no.",
        "I already said that isn't it.", "That's still beside the point.",
    ],
    "complain.frustrated": [
        "Come on, that's not it!", "Seriously, that's useless!", "Ugh, not again!", "That's not helpful at all!",
        "This is getting frustrating!", "No! Just answer the question!", "That's wrong again!",
    ],
    "decline": [
        "I'd rather not say.", "That's not important.", "Doesn't matter.", "Let's not go there.",
        "Never mind about me.", "Skip that.", "That's beside the point.", "I'd rather keep that to myself.",
    ],
    "skip.calm": [
        "OK, never mind.", "Let's leave that.", "Fine, skip it.", "Never mind that one.", "I'll look that up later.",
        "Moving on.", "Forget that part.", "Let's drop it.",
        "OK, let's move on.", "No matter.", "Let's skip that.", "Fine, next thing.", "Leave that for now.",
        "I'll find that elsewhere.", "Doesn't matter, then.", "OK, something else.", "That's fine, forget it.",
        "Let's try another thing.",
    ],
    "skip.frustrated": [
        "Whatever, forget it.", "Forget it!", "This isn't going anywhere.", "Never mind, you don't know.",
        "Fine, forget that!",
    ],
    "confused": [
        "Sorry, I don't follow.", "I don't get it.", "What do you mean?", "That's confusing.", "Huh?",
        "Can you say that more simply?", "I'm lost.", "That went over my head.",
    ],
    "no_answer": [
        "Not really.", "No, nothing specific.", "No preference.", "I don't know, honestly.", "Nothing in particular.",
        "Not sure.", "No idea.",
    ],
    # How a volunteered persona fact is introduced (the fact itself is never reworded).
    "fact": ["{fact}", "{fact}", "{fact}", "Background: {fact}", "Some context: {fact}", "For context, {fact}",
             "FYI, {fact}", "Just so you know, {fact}"],
    # Small talk of chatty users (verbosity).
    "chatty": [
        "I'm really curious.", "It matters to me.", "Any detail helps.", "I keep reading mixed things.",
        "Sorry if that's basic.", "A friend asked me too.", "I want to get it right.", "No rush.", "Just curious.",
        "I've wondered for ages.", "It came up at dinner.", "Everyone asks me this.", "I'm taking notes.",
    ],
}

# Closing lines: opener + core + tail.  None asks anything or states a persona fact.
_CLOSING: dict[str, tuple[list[str], list[str], list[str]]] = {
    "thanks": (
        ["", "Great.", "Perfect.", "OK,", "Alright,", "Brilliant.", "Lovely.", "Awesome.", "Super.", "Nice."],
        ["thanks!", "thank you.", "thanks a lot.", "many thanks.", "thanks, that helps.", "thanks for the help.",
         "thank you so much.", "that's all I needed, thanks.", "that answers everything, thank you.",
         "that was helpful, thanks.", "thanks for explaining."],
        ["", "Bye.", "Bye!", "That's everything for now.", "I've got what I need.", "That covers it.",
         "See you.", "Have a good day.", "I learned a lot.", "Talk later."],
    ),
    # Satisfied, but some questions were let go: thanks for what helped, nothing more.
    "mostly": (
        ["", "OK.", "Alright.", "Well,", "OK,", "Hmm, OK."],
        ["thanks for the rest.", "most of that was useful, thanks.", "thanks, I'll look up the rest myself.",
         "not all of it, but thanks.", "thanks for what you found.", "that's most of it, thanks.",
         "thanks, the rest I'll ask elsewhere.", "thanks, partly useful."],
        ["", "Bye.", "See you.", "Take care.", "That's it for now.", "Goodbye."],
    ),
    "unhappy": (
        ["OK.", "Well.", "Hmm.", "", "Alright."],
        ["thanks anyway.", "I guess that's it.", "not everything was clear, but thanks.",
         "I'll check the rest elsewhere.", "that will have to do.", "some of it helped."],
        ["Bye.", "", "Maybe another time.", "Goodbye."],
    ),
    "give_up": (
        ["", "Look,", "Honestly,", "OK,", "Sorry,"],
        ["forget it, I'll look elsewhere.", "I give up.", "this isn't working.", "you keep missing my question.",
         "this is a waste of time.", "never mind, I'll ask someone else.", "I'm done here."],
        ["Bye.", "", "Goodbye.", "I'll try somewhere else."],
    ),
}


def closing_line(kind: str, rng: random.Random, verbosity: float) -> str:
    """A closing line of ``kind`` (thanks, mostly, unhappy, give_up); terse users skip the tail."""
    openers, cores, tails = _CLOSING[kind]
    opener, core = rng.choice(openers), rng.choice(cores)
    tail = rng.choice(tails) if verbosity >= 0.3 else ""
    if opener.endswith(".") or not opener:
        core = core[0].upper() + core[1:]
    return " ".join(p for p in (opener, core, tail) if p)


def pick(rng: random.Random, key: str) -> str:
    """One line of the pool ``key``."""
    return rng.choice(LINES[key])
