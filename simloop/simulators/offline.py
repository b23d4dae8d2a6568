"""The offline user simulator (the default): rubric policy + template voice + embedding grader.

``RubricSimulator`` composes the three parts and is shared with the LLM simulator, which
only swaps the defaults for voice and grader.  Each part can be chosen by name, so that
e.g. an LLM voice can be paired with the offline grader.

One instance serves every dialogue: all per-dialogue state is in
``state.simulator_memory``.  ``open()`` sees no state, so the first ``next()`` replays the
policy's (pure, deterministic) start into memory before grading.
"""

from __future__ import annotations

from typing import Any

from ..errors import BadInputError, DialogueError
from ..schema import DialogueState, Scenario, SimulatorTurn
from .graders import EmbeddingGrader, Grader
from .policy import Action, Observation, RubricPolicy, SimContext
from .cues import assistant_question
from .voices import TemplateVoice, Voice

__all__ = ["RubricSimulator", "OfflineSimulator", "make_voice", "make_grader"]

VOICES = ("template", "llm")
GRADERS = ("embedding", "llm")


def make_voice(name: str, ctx: Any, *, reveal_threshold: float = 0.35, candidates: int = 1) -> Voice:
    """A voice by name; the LLM one is imported only when asked for."""
    if name == "template":
        return TemplateVoice(ctx, reveal_threshold=reveal_threshold)
    if name == "llm":
        from .llm import LLMVoice

        return LLMVoice(ctx, candidates=candidates)
    raise BadInputError(f"unknown voice {name!r}; choose one of {', '.join(VOICES)}")


def make_grader(name: str, ctx: Any) -> Grader:
    """A grader by name; the LLM one is imported only when asked for."""
    if name == "embedding":
        return EmbeddingGrader(ctx)
    if name == "llm":
        from .llm import LLMGrader

        return LLMGrader(ctx)
    raise BadInputError(f"unknown grader {name!r}; choose one of {', '.join(GRADERS)}")


class RubricSimulator:
    """A user who works through the topic's rubric questions (DESIGN §5)."""

    def __init__(
        self,
        ctx: Any,
        threshold: float = 3.0,
        retries: int = 3,
        voice: str = "template",
        grader: str = "embedding",
        reveal_threshold: float = 0.35,
        candidates: int = 1,
    ):
        if not 0.0 <= threshold < 5.0:
            raise BadInputError(f"threshold must be in [0, 5), got {threshold}")
        if retries < 1:
            raise BadInputError(f"retries must be at least 1, got {retries}")
        self.threshold = threshold
        self.retries = retries
        self.voice = make_voice(voice, ctx, reveal_threshold=reveal_threshold, candidates=candidates)
        self.grader = make_grader(grader, ctx)

    def _policy(self, scenario: Scenario) -> RubricPolicy:
        if not scenario.topic.rubric:
            raise DialogueError(
                f"topic {scenario.topic.id!r} has no rubric questions; replay it with the 'replay' simulator"
            )
        return RubricPolicy(
            scenario.topic.rubric, scenario.behaviour, scenario.seed, threshold=self.threshold, retries=self.retries
        )

    async def open(self, scenario: Scenario) -> SimulatorTurn:
        policy = self._policy(scenario)
        memory: dict[str, Any] = {}
        action = policy.start(memory)
        utterance, stages = await self.voice.speak(action, SimContext(scenario=scenario, memory=memory))
        return _say(action, utterance, stages, grade=None)

    async def next(self, state: DialogueState) -> SimulatorTurn:
        policy = self._policy(state.scenario)
        memory = state.simulator_memory
        if not policy.started(memory):
            policy.start(memory)  # open() had no memory to write to; start() is pure
        ending = policy.pending_end(memory)
        if ending is not None:  # the closing line was answered: leave without grading
            return SimulatorTurn.stop(ending.reason, ending.detail)
        if not state.turns:
            raise DialogueError("simulator.next() called before any assistant reply")
        response = state.turns[-1].assistant.response
        asked = assistant_question(response)
        context = SimContext(
            scenario=state.scenario, history=state.history(), memory=memory, assistant_question=asked
        )
        grade, grade_stages = await self.grader.grade(policy.current(memory), response, context)
        action = policy.step(memory, Observation(grade=grade, assistant_asked=asked is not None))
        if action.kind == "end" and action.end is not None:  # not reached: ending is checked above
            return SimulatorTurn.stop(action.end.reason, action.end.detail, grade=grade, stages=grade_stages)
        utterance, voice_stages = await self.voice.speak(action, context)
        return _say(action, utterance, [*grade_stages, *voice_stages], grade=grade)


def _say(action: Action, utterance: str, stages: list, grade: float | None) -> SimulatorTurn:
    if not utterance.strip():
        raise DialogueError(f"the voice produced an empty utterance for action {action.kind!r}")
    return SimulatorTurn.say(
        utterance,
        rubric_id=action.rubric.id if action.rubric else None,
        intent=action.intent,
        grade=grade,
        stages=stages,
    )


class OfflineSimulator(RubricSimulator):
    """The default simulator: no LLM, no network; deterministic per scenario seed."""

    def __init__(
        self,
        ctx: Any,
        threshold: float = 3.0,
        retries: int = 3,
        voice: str = "template",
        grader: str = "embedding",
        reveal_threshold: float = 0.35,
    ):
        super().__init__(ctx, threshold, retries, voice, grader, reveal_threshold=reveal_threshold)
