"""What the assistant under test is shown: the dialogue as a real iKAT system sees it.

The session keeps the full ``DialogueState`` for the simulator, which must know the topic's
rubric, its gold turns and its own grades.  Handing that state to the assistant would hand
it the answer key: an assistant reading the current question's keywords satisfied every
real-topic user in a review.  In TREC iKAT a system gets the utterances, its own earlier
responses and the PTKB, nothing more, so the assistant gets a ``DialogueState`` holding:

* ``dialogue_id``, ``max_turns``, the scenario's ``seed`` and ``repeat`` (to seed its own
  sampling), the persona's ``id`` and PTKB and the topic's ``id`` (iKAT's conversation
  ids name both);
* ``turns``: each finished turn's user utterance and the assistant's own output
  (response, rewritten query, passages, PTKB provenance, context) and latency;
* ``user``: the utterance to answer now;
* ``assistant_memory``: the session's own dict, the same object on every call.

Never in it: the topic's title, need, rubric and gold turns, the persona's name, traits
and other topics, the user's behaviour (``Behaviour()`` defaults stand in), a turn's
``gold``, ``grade``, ``rubric_id`` and ``intent``, the stages that produced or graded
an utterance, and ``simulator_memory``.

The view is built once per dialogue and grows by one turn per answer (``add_turn``):
a 40-turn dialogue never copies its history.  A turn's ``assistant`` part is the recorded
object itself (it is the assistant's own output); every user part is a fresh ``UserTurn``
holding the utterance alone, so a grade filed on the turn later does not show through.
"""

from __future__ import annotations

from ..schema import Behaviour, BehaviourSpec, DialogueState, Persona, Scenario, Topic, Turn, UserTurn

__all__ = ["assistant_view", "add_turn", "ask"]


def _scenario(scenario: Scenario) -> Scenario:
    persona = Persona(id=scenario.persona.id, ptkb=scenario.persona.ptkb, behaviour=BehaviourSpec())
    # A topic without rubric or gold turns is refused as input (nothing to pursue); here the
    # emptiness is the point, so the topic and the scenario holding it skip that check.
    topic = Topic.model_construct(id=scenario.topic.id, title="", need="", rubric=[], gold_turns=[])
    return Scenario.model_construct(dialogue_id=scenario.dialogue_id, persona=persona, topic=topic,
                                    behaviour=Behaviour(), seed=scenario.seed, repeat=scenario.repeat)


def _turn(turn: Turn, user: UserTurn | None = None) -> Turn:
    # Validated, not model_construct'ed: pydantic's validation is the faster of the two here.
    return Turn(index=turn.index, user=user or UserTurn(utterance=turn.user.utterance), assistant=turn.assistant,
                latency_ms=turn.latency_ms)


def assistant_view(state: DialogueState) -> DialogueState:
    """The assistant's view of ``state`` as it stands (its turns so far, its open utterance);
    it shares ``state.assistant_memory`` (the dict itself: the assistant's writes land in
    the session's, which ``dump()`` saves; validation would copy it)."""
    view = DialogueState.model_construct(
        dialogue_id=state.dialogue_id, scenario=_scenario(state.scenario), turns=[_turn(t) for t in state.turns],
        user=None, max_turns=state.max_turns, assistant_memory=state.assistant_memory, simulator_memory={})
    ask(view, state.user)
    return view


def add_turn(view: DialogueState, turn: Turn) -> None:
    """``turn`` has been answered: the view gains its redacted copy and has no open utterance.
    The copy's user part is the one the assistant was shown (``ask``), if it was."""
    shown = view.user if view.user is not None and view.user.utterance == turn.user.utterance else None
    view.turns.append(_turn(turn, shown))
    view.user = None


def ask(view: DialogueState, user: UserTurn | None) -> None:
    """``user`` is the utterance to answer now (None: none is open)."""
    view.user = UserTurn(utterance=user.utterance) if user is not None else None
