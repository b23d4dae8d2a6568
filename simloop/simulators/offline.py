"""The offline user simulator (the default): rubric policy + template voice + embedding grader.

``RubricSimulator`` composes the three parts and is shared with the LLM simulator, which
only swaps the defaults for voice and grader.  Each part is chosen by name (registry.py),
so that e.g. an LLM voice can be paired with the offline grader.

One instance serves every dialogue: all per-dialogue state is in
``state.simulator_memory``.  When the policy closes the dialogue (``farewell`` or
``give_up``) the voice writes the closing line and the simulator ends with it
(``stop.utterance``); the assistant is not called for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import BadInputError, DialogueError
from ..run import Context, plugin_llm_roles
from ..schema import DialogueState, Persona, Scenario, SimulatorTurn, Stage
from .cues import assistant_question
from .policy import Action, Observation, RubricPolicy, SimContext
from .registry import make_grader, make_voice
from .voices import EmbedderSource

if TYPE_CHECKING:
    from ..config import RunConfig

__all__ = ["RubricSimulator", "OfflineSimulator"]


class RubricSimulator:
    """A user who works through the topic's rubric questions (DESIGN §5)."""

    def __init__(
        self,
        ctx: Context,
        threshold: float = 3.0,
        retries: int = 3,
        voice: str = "template",
        grader: str = "embedding",
        reveal_threshold: float = 0.35,
        candidates: int = 1,
        max_words: int = 400,
    ):
        if not 0.0 <= threshold < 5.0:
            raise BadInputError(f"threshold must be in [0, 5), got {threshold}")
        if retries < 1:
            raise BadInputError(f"retries must be at least 1, got {retries}")
        if not -1.0 <= reveal_threshold <= 1.0:  # a cosine cut-off: outside, every fact or none is revealed
            raise BadInputError(f"reveal_threshold must be in [-1, 1] (a cosine similarity), got {reveal_threshold}")
        if max_words < 1:  # the longest answer that can pass (embedding grader): iKAT allows 250 tokens
            raise BadInputError(f"max_words must be at least 1 (words of an answer that can pass), got {max_words}")
        self.threshold = threshold
        self.retries = retries
        self.voice = make_voice(voice, ctx, reveal_threshold=reveal_threshold, candidates=candidates)
        self.grader = make_grader(grader, ctx, max_words=max_words)

    @property
    def llm_roles(self) -> tuple[str, ...]:
        """The LLM roles its voice and grader call (none for the template voice and embedding grader)."""
        return tuple(dict.fromkeys((*plugin_llm_roles(self.voice), *plugin_llm_roles(self.grader))))

    def check_sources(self, personas: list[Persona], cfg: RunConfig) -> None:
        """Before the run: every topic needs rubric questions (an iKAT topic file has none)."""
        only = set(cfg.scenarios.topic_ids)
        bare = [t.id if t.id == p.id else f"{p.id}/{t.id}"
                for p in personas for t in p.topics if not t.rubric and (not only or t.id in only)]
        if bare:
            where = f" in {cfg.scenarios.topics}" if cfg.scenarios.topics else ""
            raise BadInputError(
                f"{len(bare)} topic(s){where} have no rubric questions (first: {bare[0]}), which this simulator "
                "works through; replay them with --simulator replay, or turn them into personas with "
                "`simloop personas from-ikat TOPICS.json --out DIR` and run with --personas DIR")

    @property
    def needs(self) -> tuple[str, ...]:
        """The run's embedder when the voice or grader fetches it (opened before the first
        dialogue: run/runner.py warm_up)."""
        parts = (self.voice, self.grader)
        fetches = any(isinstance(getattr(part, "embeddings", None), EmbedderSource) for part in parts)
        return ("embedder",) if fetches else ()

    def _policy(self, scenario: Scenario) -> RubricPolicy:
        if not scenario.topic.rubric:
            raise DialogueError(
                f"topic {scenario.topic.id!r} has no rubric questions; replay it with the 'replay' simulator"
            )
        return RubricPolicy(
            scenario.topic.rubric, scenario.behaviour, scenario.seed, threshold=self.threshold, retries=self.retries
        )

    async def open(self, state: DialogueState) -> SimulatorTurn:
        policy = self._policy(state.scenario)
        action = policy.start(state.simulator_memory)
        context = SimContext(scenario=state.scenario, memory=state.simulator_memory)
        utterance, stages = await self.voice.speak(action, context)
        return _say(action, utterance, stages)

    async def next(self, state: DialogueState) -> SimulatorTurn:
        if not state.turns:
            raise DialogueError("simulator.next() called before any assistant reply")
        policy = self._policy(state.scenario)
        response = state.turns[-1].assistant.response
        asked = assistant_question(response)
        context = SimContext(
            scenario=state.scenario, history=state.history(), memory=state.simulator_memory, assistant_question=asked
        )
        grade, grade_stages = await self.grader.grade(policy.current(state.simulator_memory), response, context)
        action = policy.step(state.simulator_memory, Observation(grade=grade, assistant_asked=asked is not None))
        if action.end is None and len(state.turns) >= state.max_turns:  # no call for words never put
            return SimulatorTurn.capped(state.max_turns, grade=grade, grade_stages=grade_stages)
        if action.end is None:
            utterance, stages = await self.voice.speak(action, context)
            return _say(action, utterance, stages, grade=grade, grade_stages=grade_stages)
        # farewell / give_up: the closing line ends the dialogue; "end" (a step after it) says nothing.
        utterance, stages = ("", []) if action.kind == "end" else await self.voice.speak(action, context)
        return SimulatorTurn.stop(action.end.reason, action.end.detail, utterance=utterance,
                                  grade=grade, grade_stages=grade_stages, stages=stages)


def _say(action: Action, utterance: str, stages: list[Stage], grade: float | None = None,
         grade_stages: list[Stage] | None = None) -> SimulatorTurn:
    if not utterance.strip():
        raise DialogueError(f"the voice produced an empty utterance for action {action.kind!r}")
    return SimulatorTurn.say(
        utterance,
        rubric_id=action.rubric.id if action.rubric else None,
        intent=action.intent,
        grade=grade,
        grade_stages=grade_stages or [],
        stages=stages,
    )


class OfflineSimulator(RubricSimulator):
    """The default simulator: no LLM, no network; deterministic per scenario seed."""

    def __init__(
        self,
        ctx: Context,
        threshold: float = 3.0,
        retries: int = 3,
        voice: str = "template",
        grader: str = "embedding",
        reveal_threshold: float = 0.35,
        max_words: int = 400,
    ):
        super().__init__(ctx, threshold, retries, voice, grader, reveal_threshold=reveal_threshold, max_words=max_words)
