"""Scenario sources: persona × topic × repeat, generated lazily.

100,000 scenarios must not mean 100,000 objects up front: ``iter_scenarios`` yields them
one at a time and the engine's workers pull from it.  Dialogue ids and seeds are a pure
function of (persona, topic, repeat, base seed), so resume, the Ray backend and a rerun
all agree on which dialogue is which.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from ..config import RunConfig
from ..errors import check_known
from ..schema import Persona, Scenario

__all__ = ["load_sources", "iter_scenarios", "dialogue_id", "count_scenarios"]


def dialogue_id(persona_id: str, topic_id: str, repeat: int) -> str:
    return f"{persona_id}--{topic_id}--{repeat}"


def scenario_seed(base: int, persona_id: str, topic_id: str, repeat: int) -> int:
    digest = hashlib.blake2b(f"{base}|{persona_id}|{topic_id}|{repeat}".encode(), digest_size=4)
    return int.from_bytes(digest.digest(), "little")


def load_sources(cfg: RunConfig) -> list[Persona]:
    """Personas (with their topics) selected by the config; validated on load."""
    sel = cfg.scenarios
    if sel.topics is not None:
        from ..inputs import load_ikat_topics

        personas = load_ikat_topics(sel.topics)
    else:
        from ..inputs import load_personas

        personas = load_personas(sel.personas_dir)
    if sel.persona_ids:
        check_known("--persona", sel.persona_ids, [p.id for p in personas])
        personas = [p for p in personas if p.id in sel.persona_ids]
    if sel.topic_ids:
        check_known("--topic", sel.topic_ids, [t.id for p in personas for t in p.topics])
    return personas


def iter_scenarios(cfg: RunConfig, personas: list[Persona]) -> Iterator[Scenario]:
    """Every selected scenario, repeat-major so that ``--limit`` covers many personas first."""
    sel = cfg.scenarios
    emitted = 0
    for repeat in range(sel.repeat):
        for persona in personas:
            for topic in persona.topics:
                if sel.topic_ids and topic.id not in sel.topic_ids:
                    continue
                if sel.limit is not None and emitted >= sel.limit:
                    return
                emitted += 1
                seed = scenario_seed(cfg.seed, persona.id, topic.id, repeat)
                # The run's --behaviour replaces the persona's traits; ranges are drawn from the seed.
                yield Scenario(
                    dialogue_id=dialogue_id(persona.id, topic.id, repeat),
                    persona=persona,
                    topic=topic,
                    behaviour=persona.behaviour.with_overrides(sel.behaviour).sample(seed),
                    seed=seed,
                    repeat=repeat,
                )


def count_scenarios(cfg: RunConfig, personas: list[Persona]) -> int:
    sel = cfg.scenarios
    per_repeat = sum(
        1 for p in personas for t in p.topics if not sel.topic_ids or t.id in sel.topic_ids
    )
    total = per_repeat * sel.repeat
    return min(total, sel.limit) if sel.limit is not None else total
