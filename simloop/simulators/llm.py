"""The LLM user simulator: the rubric policy, an LLM voice and an LLM grader.

The ideas follow the iKAT 2025 organisers' simulator (SIMULATION_API.md §7) — persona
statements in second person as properties to act on, the dialogue shown with roles
swapped, n candidates with the one closest to the rubric question kept, a 0-5
answerability grade — but the prompts are our own wording, and the policy instruction
and behaviour traits (patience, cooperativeness, language skill, verbosity, reveal) are
ours too.

Validated output: every choice the model writes is checked before it is used
(``invalid_reason``): empty, not language (``text.looks_like_language``: "#@! &&&& ~~~"),
a copy of the prompt, the assistant's voice anywhere in it, one of the user's earlier
messages again or a copy of an assistant's reply, a message that says something twice
(``voice_checks``), one far too long, or an explanation instead of a question is rejected.
The check runs inside the ChatModel's retry layer (the one retry layer), so a
rejected answer is asked for again like an empty one, counted in the stage's ``retries``,
never cached and never written.  When every attempt fails the voice raises
``DialogueError`` and the engine records ``stop.reason = error`` with the last reason.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, Field

from ..errors import DialogueError, EmptyCompletionError, InvalidOutputError
from ..run import Context
from ..schema import Behaviour, RubricQuestion, Stage
from ..text import looks_like_language, words
from .offline import RubricSimulator
from .policy import Action, SimContext
from .voice_checks import assistant_voice, repeats_earlier, repeats_itself
from .voices import EmbedderSource, known_keywords

__all__ = ["LLMVoice", "LLMGrader", "LLMSimulator", "second_person", "invalid_reason", "GradeReply"]

_OPENER = "Hi! What can I help you find today?"  # the assistant's turn 0, seen by the role-swapped model
_LABEL = re.compile(r"^\s*(\*\*)?(user|me|you|simulated user)(\*\*)?\s*:\s*", re.I)
_ASKING = ("ask", "reask", "clarify", "answer_clarification", "move_on")

# Second person, longest patterns first; "I" alone only as a word.
_PRONOUNS = [
    (r"\bI am\b", "you are"), (r"\bI'm\b", "you're"), (r"\bI was\b", "you were"), (r"\bI've\b", "you've"),
    (r"\bI'd\b", "you'd"), (r"\bI'll\b", "you'll"), (r"\bI\b", "you"), (r"\bmyself\b", "yourself"),
    (r"\bmine\b", "yours"), (r"\bmy\b", "your"), (r"\bme\b", "you"), (r"\bam\b", "are"),
]


def second_person(statement: str) -> str:
    """"I'm vegetarian and my sister lives in Porto." -> "You're vegetarian and your sister
    lives in Porto." (the persona is described to the model as properties of *you*)."""
    out = statement.strip()
    for pattern, repl in _PRONOUNS:
        out = re.sub(pattern, repl, out, flags=re.I)
    return out[:1].upper() + out[1:]


def _traits(b: Behaviour) -> list[str]:
    lines = []
    if b.language_skill < 0.5:
        lines.append("Your English is weak: write simply and vaguely, drop small words, make a few spelling mistakes.")
    elif b.language_skill < 0.8:
        lines.append("You write casually and not always precisely.")
    if b.verbosity < 0.3:
        lines.append("Be terse: a handful of words per message.")
    elif b.verbosity > 0.7:
        lines.append("You are chatty: an extra sentence about why you ask is fine.")
    reveal = {
        "never": "Do not volunteer anything about yourself; only answer if the assistant asks you directly.",
        "relevant": "Mention something about yourself only when it matters for what you are asking.",
        "eager": "You like to share a relevant detail about yourself early on.",
    }
    lines.append(reveal[b.reveal])
    if b.patience <= 1:
        lines.append("You are impatient and show it when an answer misses the point.")
    if b.cooperativeness < 0.5:
        lines.append("You do not like answering the assistant's questions.")
    return lines


def _instruction(action: Action, context: SimContext) -> str:
    """What the policy wants this turn, in words for the model."""
    q = action.rubric.question if action.rubric else ""
    # Only keywords the user already has: never the answer's words (voices.known_keywords).
    known = known_keywords(action.rubric, context) if action.rubric else []
    focus = f" (what you are after: {', '.join(known)})" if known else ""
    mood = {"annoyed": " You are getting annoyed; let it show a little.",
            "frustrated": " You are frustrated; show it, briefly and emotionally."}.get(action.mood, "")
    kind = action.kind
    if kind == "ask" and action.turn == 1:
        return f"Start the conversation by asking, in your own words, about: {q}"
    if kind == "ask":
        return f"The last answer was helpful. Now ask, in your own words, about: {q}"
    if kind == "reask" and action.ignored_question:
        return (f"The assistant asked you something you would rather not answer. "
                f"Skip it and repeat what you want to know: {q}{mood}")
    if kind == "reask":
        return f"The last answer did not help. Say so briefly and ask again, more specifically, about: {q}{focus}{mood}"
    if kind == "clarify":
        return f"You could not make sense of the last answer. Ask the assistant to clarify it; you wanted to know: {q}"
    if kind == "answer_clarification":
        asked = context.assistant_question or "a question about you"
        return (f'The assistant asked you: "{asked}". '
                f"Answer it briefly from what you know about yourself, then come back to: {q}")
    if kind == "move_on":
        skipped = action.skipped.question if action.skipped else "your previous question"
        return f"You never got an answer to \"{skipped}\". Let it go and ask about: {q}{mood}"
    if kind == "farewell":
        if action.end is not None and action.end.reason != "user_satisfied":
            return ("Several of your questions stayed unanswered and you are leaving. "
                    "Say a short, somewhat disappointed goodbye.")
        return "You have learned what you wanted. Thank the assistant and say goodbye."
    if kind == "give_up":
        return ("You have run out of patience: the assistant keeps missing your question. "
                "Say briefly and emotionally that you give up, and leave.")
    raise ValueError(f"nothing to say for action {kind!r}")


def build_messages(action: Action, context: SimContext) -> list[dict[str, str]]:
    """System prompt plus the dialogue with roles swapped: the model speaks as the user."""
    scenario = context.scenario
    topic = scenario.topic
    facts = "\n".join(f"- {second_person(s)}" for s in scenario.persona.ptkb)
    need = f"\nBackground: {topic.need.strip()}" if topic.need.strip() else ""
    system = (
        f'You are the user of a conversational search assistant. You are interested in "{topic.title}" '
        f"and want to find out as much as you can about it.{need}\n\n"
        "What is true about you (act accordingly; bring up a single fact only when it is needed, "
        f"and never list them):\n{facts}\n\n"
        "How you write: one short message at a time, as a person typing in a chat. You ask, react and "
        "follow up; you answer when the assistant asks you something. You never answer your own "
        "questions, never explain things like an assistant would, and never repeat what you already said.\n"
        + "\n".join(_traits(scenario.behaviour))
        + f"\n\nYour next message: {_instruction(action, context)}\n"
        "Reply with the message only."
    )
    messages = [{"role": "system", "content": system}, {"role": "user", "content": _OPENER}]
    for said, answer in context.history:
        messages += [{"role": "assistant", "content": said}, {"role": "user", "content": answer}]
    return messages


def _clean(text: str) -> str:
    text = _LABEL.sub("", text.strip())
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text


_COPY_WORDS = 7  # this many consecutive words of our own instructions = a copy of the prompt


def prompt_scaffold(action: Action, context: SimContext, system: str) -> set[tuple[str, ...]]:
    """The ``_COPY_WORDS``-word runs of the system prompt that are ours to write, not the
    user's: the topic title, the need and the questions are taken out first (a user may
    well repeat their own question)."""
    text = system
    asked = [action.rubric.question if action.rubric else "", action.skipped.question if action.skipped else "",
             context.assistant_question or "", context.scenario.topic.title, context.scenario.topic.need]
    for part in sorted(filter(None, asked), key=len, reverse=True):
        text = text.replace(part, " | ")
    runs: set[tuple[str, ...]] = set()
    for chunk in text.split("|"):
        w = words(chunk)
        runs.update(tuple(w[i:i + _COPY_WORDS]) for i in range(len(w) - _COPY_WORDS + 1))
    return runs


def invalid_reason(text: str, action: Action, scaffold: set[tuple[str, ...]] | None = None,
                   earlier: Sequence[str] = (), replies: Sequence[str] = ()) -> str | None:
    """Why ``text`` cannot be the user's message, or None when it can.  ``scaffold``: the
    prompt's own word runs (``prompt_scaffold``), for the copy check; ``earlier`` and
    ``replies``: the user's messages and the assistant's replies so far in this dialogue,
    for the repeat checks."""
    if not text.strip():
        return "it was empty"
    if not looks_like_language(text):
        return "it was not language"
    if scaffold:
        w = words(text)
        if any(tuple(w[i:i + _COPY_WORDS]) in scaffold for i in range(len(w) - _COPY_WORDS + 1)):
            return "it copied the instructions instead of writing the message"
    voice = assistant_voice(text)
    if voice:
        return f"it spoke as the assistant, not as the user ({voice})"
    copied = repeats_earlier(text, earlier)
    if copied:
        return f"it repeated the user's message of {copied}"
    copied = repeats_earlier(text, replies)
    if copied:
        return f"it copied the assistant's reply of {copied}"
    doubled = repeats_itself(text)
    if doubled:
        return f"it said the same thing twice ({doubled})"
    n = len(text.split())
    if n > _MAX_WORDS:
        return f"it was far too long for a chat message ({n} words)"
    if action.kind in _ASKING and "?" not in text and n > 60:
        return "it explained things instead of asking"
    return None


# A message longer than _MAX_WORDS words is rejected whatever it says: the tokens past
# that (about 1.3 a word) are never used, and a small model fills a 512-token budget
# (seconds of generation) once it starts explaining.
_MAX_WORDS = 120
_VOICE_MAX_TOKENS = 200


def _voice_max_tokens(model: object) -> int:
    """``_VOICE_MAX_TOKENS``, or the role's own ``max_tokens`` when that is smaller (a
    ChatModel has settings; a scripted stand-in may not)."""
    configured = getattr(getattr(model, "settings", None), "max_tokens", None)
    return min(configured, _VOICE_MAX_TOKENS) if isinstance(configured, int) else _VOICE_MAX_TOKENS


def _request_seed(context: SimContext, action: Action) -> int:
    return (context.scenario.seed + 7919 * action.turn) % 2**31


class LLMVoice:
    """Writes the user's message with the simulator model; keeps the best of ``candidates``."""
    llm_roles = ("simulator",)  # see RubricSimulator.llm_roles

    def __init__(self, ctx: Context, candidates: int = 1, temperature: float | None = None):
        if not 1 <= candidates <= 16:
            raise ValueError("candidates must be between 1 and 16")
        self.ctx = ctx
        self.candidates = candidates
        self.temperature = temperature
        self.embeddings = EmbedderSource(ctx)

    async def speak(self, action: Action, context: SimContext) -> tuple[str, list[Stage]]:
        model = self.ctx.chat("simulator")
        messages = build_messages(action, context)
        scaffold = prompt_scaffold(action, context, messages[0]["content"])
        earlier, replies = context.user_utterances, [reply for _, reply in context.history]
        try:
            # The scenario seed makes repeats of one persona x topic sample (and cache)
            # apart, and a rerun of the same scenario reproducible.
            res = await model.chat(messages, stage="simulator.voice", n=self.candidates, temperature=self.temperature,
                                   max_tokens=_voice_max_tokens(model),
                                   seed=_request_seed(context, action),
                                   check=lambda raw: invalid_reason(_clean(raw), action, scaffold, earlier, replies))
        except (EmptyCompletionError, InvalidOutputError) as exc:  # the ChatModel already retried it
            raise DialogueError(f"simulator voice: no usable user message ({exc})") from exc
        return await self._closest([_clean(t) for t in res.texts], action), [res.stage]

    async def _closest(self, texts: list[str], action: Action) -> str:
        """The candidate most similar to the rubric question (iKAT's selection rule)."""
        if len(texts) == 1 or action.rubric is None:
            return texts[0]
        sims = await self.embeddings.similarities(action.rubric.question, texts)
        return texts[int(np.argmax(sims))]


class GradeReply(BaseModel):
    grade: int = Field(ge=0, le=5, description="0-5: how well the reply answers the question")


_GRADER_SYSTEM = (
    "You check answers for a simulated user of a search assistant. Given the user's question and the "
    "assistant's reply, rate how well the question can be answered from the reply alone, on a 0-5 "
    "scale: 5 = answered fully, correctly and directly; 4 = answered with small gaps; 3 = partly "
    "answered; 2 = on the topic but not an answer; 1 = barely related; 0 = unrelated, a refusal or "
    'no answer. Return JSON: {"grade": <integer 0-5>}.'
)
# With evidence: what the user already knows to be true, and what makes a reply wrong.
_GRADER_EVIDENCE = (
    "\n\nYou also hold notes on what is true about this question (below the question). The reply need "
    "not repeat them and may add facts they lack. But where the reply says something the notes say "
    "otherwise - the opposite statement, another number or date, another person, place or name - "
    "the reply is wrong: grade it 0 or 1, however fluent it is. Sentences about some other subject "
    "do not answer the question: the more of the reply they fill, the lower the grade. A reply that "
    "answers an earlier question instead of this one does not answer it."
)


class LLMGrader:
    """0-5 answerability of the rubric question by the response.

    A reply that does not parse is repaired once by the ChatModel.  When the
    repair fails too, ``StructuredOutputError`` goes up as it is: the LLM could not deliver
    a grade, an infrastructure failure (``error.source = llm``, re-run by ``--retry-errors``).
    It is not turned into a grade of ``None``, which the policy would play as the user
    asking for clarification, so a broken endpoint would be recorded as user behaviour."""
    llm_roles = ("simulator",)

    def __init__(self, ctx: Context):
        self.ctx = ctx

    async def grade(
        self, question: RubricQuestion, response: str, context: SimContext | None = None
    ) -> tuple[float | None, list[Stage]]:
        topic = f'Topic: "{context.scenario.topic.title}"\n' if context is not None else ""
        reference = (f"\n\nYour notes (true; the reply may word things differently):\n{question.reference}"
                     if question.reference else "")
        messages = [
            {"role": "system", "content": _GRADER_SYSTEM + (_GRADER_EVIDENCE if question.reference else "")},
            {"role": "user", "content": f"{topic}Question: {question.question}{reference}\n\nReply:\n{response}"},
        ]
        obj, stage = await self.ctx.chat("simulator").structured(
            messages, GradeReply, stage="simulator.grade", temperature=0.0
        )
        return float(obj.grade), [stage]


class LLMSimulator(RubricSimulator):
    """Rubric policy + LLM voice + LLM grader; either part can be switched to the offline one."""

    def __init__(
        self,
        ctx: Context,
        threshold: float = 3.0,
        retries: int = 3,
        candidates: int = 1,
        voice: str = "llm",
        grader: str = "llm",
        reveal_threshold: float = 0.35,
        max_words: int = 400,
    ):
        super().__init__(ctx, threshold, retries, voice, grader, reveal_threshold=reveal_threshold,
                         candidates=candidates, max_words=max_words)
