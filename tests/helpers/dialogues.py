"""The shipped personas' dialogues as the offline user writes them, without an assistant:
what the realism and determinism checks read (run in a subprocess too, by module name)."""

from __future__ import annotations

import random

from simloop.fakes.seams import HashEmbedder
from simloop.inputs.personas import load_personas
from simloop.schema import Scenario
from simloop.simulators.policy import Observation, RubricPolicy, SimContext
from simloop.simulators.voices import TemplateVoice
from tests.helpers.data import ROOT


async def shipped_dialogues(repeats: int = 2) -> list[tuple[str, str | None]]:
    """Every shipped persona x topic, ``repeats`` seeds each, the policy fed a seeded mix of
    passing and failing grades: (utterance, its rubric question or None) for every line."""
    v, out = TemplateVoice(embedder=HashEmbedder()), []
    for persona in load_personas(ROOT / "personas"):
        for topic in persona.topics:
            for r in range(repeats):
                seed = len(out) * 7919 + r
                sc = Scenario(dialogue_id="d", persona=persona, topic=topic, behaviour=persona.behaviour, seed=seed)
                policy, memory, history = RubricPolicy(topic.rubric, persona.behaviour, seed), {}, []
                action, grades = policy.start(memory), random.Random(seed)
                while action.kind != "end":
                    text, _ = await v.speak(action, SimContext(scenario=sc, history=list(history), memory=memory))
                    closing = action.kind in ("farewell", "give_up")
                    out.append((text, None if closing else action.rubric.question))
                    history.append((text, "..."))
                    action = policy.step(memory, Observation(4.0 if grades.random() < 0.8 else 2.0))
    return out
