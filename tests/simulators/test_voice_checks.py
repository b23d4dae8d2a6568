"""The LLM voice's checks on a message (simulators/voice_checks.py, llm.invalid_reason).

The cases below were written apart from the patterns (other topics, other wordings than
the issue's), and the real iKAT user utterances must all pass: a check that rejects what
real users write would make the simulator less realistic, not more."""

from __future__ import annotations

import json

import pytest

from simloop.schema import RubricQuestion
from simloop.simulators.llm import invalid_reason
from simloop.simulators.policy import Action
from simloop.simulators.voice_checks import assistant_voice, repeats_earlier, repeats_itself
from tests.helpers.data import ikat_file

ASK = Action("ask", rubric=RubricQuestion(id="r1", question="Which ferry goes to Texel?"), turn=3)

# The assistant's voice, somewhere in a message that may begin as a user's would.
ASSISTANT = [
    # the issue's own case
    "I'm glad you like it. What else is there? I'll be happy to help you with the next question.",
    "Thanks for the tips on Porto! We would be delighted to assist you in planning the rest of the trip.",
    "OK, the museum sounds nice. Hope that answers what you wanted to know.",
    "So what about parking near the stadium?\nAssistant: There are three garages within walking distance.",
    "Which trail is the shortest? I'd suggest you start with the coastal path, it is flat.",
    "Is the park open late? You're most welcome, enjoy your visit!",
    "Good to know about the tram. Don't hesitate to reach out if anything is unclear.",
    "Great. Here are a few more options you might like: the Botanical Garden and the old harbour.",
    "What's the weather like in May? As a virtual assistant I cannot look at live forecasts.",
    "Do they take cards? Let me know whether you want the full list of shops.",
    "That explains it. How may I assist with your trip today?",
    "Hmm, the cheaper one then. Is there anything else we can do for your booking?",
    "OK, and the visa fee? That's an excellent question, the fee depends on your passport.",
    "What are your other questions about the route? I can guide you through them.",
    "The harbour is south of the centre. I apologise for the confusion in my last message.",
    "Which lens for birds? I'm pleased to see you're finding the camera guide useful.",
    "Fine, the 9:40 ferry. We can offer a few alternatives if that schedule does not suit.",
    "Is rye bread better? Happy to hear you have enjoyed the recipes so far.",
]
# A user's voice, including the words the assistant patterns are built from.
USER = [
    "Can you help me find a cheap hotel near the station?",
    "I'd like to know if you could recommend a good vegan place nearby.",
    "Thanks, that helps! What about the opening hours on Sunday?",
    "Here in Amsterdam it rains a lot, so what should I pack?",
    "Here is my question: do I need a visa for a week in Brazil?",
    "Sure, I'd prefer something under 50 euros a night.",
    "Did you understand my question? I asked about the night buses.",
    "Let me know the prices, please.",
    "If you have any idea of the costs, tell me, because my budget is small.",
    "I'm glad I asked. Is it very very cold there in January?",
    "You said the castle closes at five. What is the cheapest and what is the fastest way to get there?",
    "Welcome to my problem: my son is allergic to nuts. Which snacks are safe on the plane?",
    "Sorry for the confusion, I meant the old town. Is parking free there?",
    "Glad to hear that! Do they open on Mondays?",
    "I can give you more details about my diet if that helps. Which cereals are low in sugar?",
    "My sister and I want to share some ideas for her wedding. Is a barn venue cheaper?",
]


@pytest.mark.parametrize("text", ASSISTANT)
def test_the_assistants_voice_is_found_anywhere_in_a_message(text):
    assert assistant_voice(text) is not None
    assert "spoke as the assistant" in invalid_reason(text, ASK)


@pytest.mark.parametrize("text", USER)
def test_a_users_voice_passes(text):
    assert assistant_voice(text) is None, assistant_voice(text)
    assert invalid_reason(text, ASK) is None


EARLIER = ["I'm planning a week in Japan next April. Where should I start, Tokyo or Kyoto?",
           "What do trains between the two cities cost?"]


@pytest.mark.parametrize("text", [
    "I'm planning a week in Japan next April. Where should I start, Tokyo or Kyoto?",  # again
    "i'm planning a week in japan next april -- where should i start: tokyo or kyoto",  # case, punctuation
    "Hi. I'm planning a week in Japan next April. Where should I start, Tokyo or Kyoto?",  # a word added
    "What do the trains between the two cities cost?",  # a word added to a short one
])
def test_a_message_that_repeats_an_earlier_one_is_rejected(text):
    assert repeats_earlier(text, EARLIER) is not None
    assert "repeated the user's message" in invalid_reason(text, ASK, earlier=EARLIER)


@pytest.mark.parametrize("text", [
    "Where should I start?",  # a short part of an earlier message: a real follow-up
    "OK, Kyoto then. What do trains from Kyoto to Nara cost?",  # same words, another question
    "What do buses between the two cities cost?",  # the same frame about something else
    "Tell me more.",  # short messages may recur
])
def test_a_new_message_with_old_words_passes(text):
    assert repeats_earlier(text, EARLIER) is None
    assert invalid_reason(text, ASK, earlier=[*EARLIER, "Tell me more."]) is None


def test_the_single_copy_of_a_doubled_message_is_a_repeat():
    """The issue's dialogue: the first message said its paragraph twice, the next one once."""
    paragraph = "I want to visit the north of Scotland in October and I wonder whether the ferries still run then."
    assert repeats_itself(f"{paragraph}\n\n{paragraph}") is not None
    assert repeats_earlier(paragraph, [f"{paragraph}\n\n{paragraph}"]) == "turn 1"


def test_a_copy_of_the_assistants_reply_is_rejected():
    reply = "The ferry to Texel leaves Den Helder every hour from six in the morning."
    assert "copied the assistant's reply" in invalid_reason(reply, ASK, replies=[reply])


@pytest.mark.parametrize("text", [
    "What are the visa rules for Brazil? What are the visa rules for Brazil?",
    "tell me about the tram network tell me about the tram network",  # no punctuation at all
    "Which beaches near Lisbon are quiet in August and easy to reach by train? I ask because of the heat. "
    "Which beaches near Lisbon are quiet in August and easy to reach by train",
])
def test_a_message_that_says_something_twice_is_rejected(text):
    assert repeats_itself(text) is not None
    assert "said the same thing twice" in invalid_reason(text, ASK)


@pytest.mark.parametrize("text", [
    "Is it very very cold there?",
    "What is the cheapest and what is the fastest way?",
    "No. No. That is not what I asked.",
])
def test_repeated_small_words_pass(text):
    assert repeats_itself(text) is None


def _topics(*path: str) -> list[dict]:
    return json.loads(ikat_file(*path).read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", [("2023", "2023_train_topics.json"), ("2023", "2023_test_topics.json"),
                                  ("2024", "2024_test_topics.json")])
def test_no_real_ikat_user_utterance_is_rejected(path):
    """Every utterance, with the same user's earlier ones and the system's earlier responses
    as the dialogue so far: 95 (2023 train), 332 (2023 test) and 218 (2024) utterances."""
    rejected, seen = [], 0
    for topic in _topics(*path):
        said: list[str] = []
        replies: list[str] = []
        for turn in topic["turns"]:
            why = invalid_reason(turn["utterance"], ASK, earlier=said, replies=replies)
            seen += 1
            if why is not None:
                rejected.append((topic["number"], turn["turn_id"], turn["utterance"], why))
            said.append(turn["utterance"])
            replies.append(turn.get("response") or "")
    assert seen >= 90
    assert rejected == []


def test_real_ikat_system_responses_in_the_assistants_voice_are_found():
    """The other side of the data: iKAT's system responses, written by people playing the
    assistant, often speak as one; the check must see it there."""
    responses = [t.get("response") or "" for topic in _topics("2023", "2023_train_topics.json")
                 for t in topic["turns"]]
    found = [r for r in responses if assistant_voice(r)]
    assert any(r.startswith("I can help you with finding a university") for r in found)
    assert len(found) >= 0.15 * len(responses)
