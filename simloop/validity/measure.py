"""``simloop validate``'s measurement: a simulator configuration's validity card.

Grader criteria run the configured simulator's own grader (the embedding grader, or the
LLM grader on its endpoint) on the labelled iKAT sets; voice and adversary criteria run
dialogues of the configured simulator (dialogues.py).  ``sample`` caps the items of every
criterion (turns for the grader, dialogues per run for the voice and the adversaries),
drawn with a fixed seed from the data alone, so two configurations are measured on the
same items.  Without it every item is measured: the offline simulator's card is then the
bench's grader, evidence and realism figures (``bench/results.json``).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..config import RunConfig
from ..errors import BadInputError
from ..schema import PluginRef
from .card import DataFile, SimulatorConfig, ValidityCard, file_digest, summarise
from .grading import measure_grader, sample_turns
from .labelled import SEED, SETS
from .speaking import measure_adversaries, measure_voice, sample_topics
from .stats import RESAMPLES
from .voice import REAL_FILES

__all__ = ["DATA_ENV", "LLM_SAMPLE", "NEEDED", "find_data", "simulator_config", "validate"]

DATA_ENV = "SIMLOOP_IKAT_DATA"
# The default --sample for a simulator that calls an LLM.  Measured with SmolLM2-135M
# (llama-cpp-python, one CPU thread, on a 2-core machine shared with other work): a grade
# takes 5-60 s (the prompt with a reference is 100-700 tokens at 10-22 tokens/s), a turn has
# about 20 candidates over the labelled and evidence sets, and a dialogue 10-16 calls; two
# items per criterion took 7 minutes for the grader criteria and 8 for the demo voice.  A
# faster server or more threads make a larger sample affordable: give --sample.
LLM_SAMPLE = 2
# Grades asked of an LLM at once: a local server answers one request after another, so more
# only queue, and a queued request counts against its timeout.
LLM_GRADES_AT_ONCE = 2
NEEDED = tuple(dict.fromkeys((*SETS.values(), *REAL_FILES, "2023/2023_test_topics_psg_text.jsonl")))


def find_data(given: Path | None = None, *, start: Path | None = None) -> Path:
    """The iKAT data folder: ``given`` (``--data``), else ``$SIMLOOP_IKAT_DATA``, else the first
    ``shared/data/ikat`` beside the current folder or one of its parents.  A BadInputError
    saying where it looked when none holds every needed file."""
    env = os.environ.get(DATA_ENV)
    here = (start or Path.cwd()).resolve()
    if given is not None:
        looked = [given]
    elif env:
        looked = [Path(env)]
    else:
        looked = [p / "shared" / "data" / "ikat" for p in (here, *here.parents)]
    for folder in looked:
        if all((folder / f).is_file() for f in NEEDED):
            return folder
    where = str(looked[0]) if len(looked) == 1 else f"shared/data/ikat beside {here} and its parents"
    missing = next((f for f in NEEDED if not (looked[0] / f).is_file()), NEEDED[0])
    raise BadInputError(f"iKAT data not found: looked in {where} (first missing: {missing}); "
                        f"give the folder with --data DIR or {DATA_ENV}")


def simulator_config(cfg: RunConfig, simulator: object) -> SimulatorConfig:
    """The measured configuration: name, effective parameters, LLM roles, digest."""
    from ..run import effective_params, llm_roles, simulator_digest, simulator_identity

    ref = PluginRef(name=cfg.simulator.name, params=effective_params(simulator, cfg.simulator.params))
    identity = simulator_identity(cfg, ref, llm_roles(simulator))
    return SimulatorConfig(name=ref.name, params=ref.params, llm=identity["llm"], digest=simulator_digest(identity))


async def validate(cfg: RunConfig, data: Path, *, personas: Path, sample: int | None = None,
                   resamples: int = RESAMPLES, parts: Sequence[str] = ("grader", "voice", "adversaries"),
                   info: Callable[[str], None] = lambda _: None) -> ValidityCard:
    """Measure ``cfg``'s simulator; the card (not yet written)."""
    from ..llm import check_endpoints
    from ..run import Context, close_plugins, llm_roles, load_plugin, plugin_llm_min_prompts, versions
    from ..search import open_embedder

    t0 = time.perf_counter()
    embedder = await open_embedder()
    ctx = Context(cfg, overrides={"embedder": embedder})
    criteria, notes, files = [], [], []
    details: dict[str, Any] = {}
    try:
        simulator = load_plugin("simulator", cfg.simulator.name, cfg.simulator.params, ctx)
        sim = simulator_config(cfg, simulator)
        calls_llm = bool(llm_roles(simulator))
        if calls_llm:  # as a run does: the endpoint answers (else exit 2 now), and what it accepts is learnt
            ctx.llm_capabilities = check_endpoints(cfg.llm, llm_roles(simulator),
                                                   min_prompt=plugin_llm_min_prompts(simulator))
        grader = getattr(simulator, "grader", None)
        if "grader" in parts:
            if grader is None:
                notes.append(f"the simulator {sim.name!r} has no grader: the grader criteria are not measured")
            else:
                keep = sample_turns(data, sample) if sample else None
                found = await measure_grader(grader, data, embedder, keep=keep, resamples=resamples, info=info,
                                             batch=LLM_GRADES_AT_ONCE if calls_llm else 64)
                criteria += found.criteria
                notes += found.notes
                files += found.files
                details["grader"] = found.details
        topics = sample_topics(personas, sample, SEED) if sample else ()
        with tempfile.TemporaryDirectory(prefix="simloop-validate-") as tmp:
            if "voice" in parts:
                voice = await measure_voice(cfg, data, Path(tmp) / "voice", personas=personas, topics=topics,
                                            repeat=1 if sample else 2, ikat_sample=sample, resamples=resamples,
                                            info=info)
                criteria += voice.criteria
                files += voice.files
                details["voice"] = voice.details
            if "adversaries" in parts:
                adv = await measure_adversaries(cfg, Path(tmp) / "adversaries", personas=personas, topics=topics,
                                                resamples=resamples, info=info)
                criteria += adv.criteria
                details["adversaries"] = adv.details
        await close_plugins(simulator)
    finally:
        await ctx.aclose()
        await embedder.aclose()
    if sample is not None and sample < 30:
        notes.append(f"a sample of {sample} per criterion: the intervals are wide, and a verdict on so few items "
                     "screens a configuration rather than measures it")
    data_files: list[DataFile] = [file_digest(f) for f in dict.fromkeys(files)]
    summary = summarise(criteria, sim, sample)
    return ValidityCard(simulator=sim, sample=sample, seed=SEED, resamples=resamples, criteria=criteria,
                        summary=summary, data=data_files, versions=versions(), notes=notes, details=details,
                        took_s=round(time.perf_counter() - t0, 1))
