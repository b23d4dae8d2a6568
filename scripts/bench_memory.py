#!/usr/bin/env python3
"""Context tokens per turn of the memory strategies on 30-turn dialogues (ACMS "token economy").

Dialogues: one per demo persona (personas/), 30 turns.  The user side is the offline
simulator's template voice asking the rubric questions of all the persona's topics in
turn - each first asked, then re-asked more specifically, as the rubric policy does when
an answer falls short - and the assistant side is bm25_extractive (real BM25 over the
demo index, all-mpnet-base-v2 PTKB selection, answers up to 220 words).  Those turns are then
replayed through each strategy: turn t's context is built from turns 1..t-1 and
utterance t, exactly as an agent would.

- ``full``, ``window`` (3 turns): verbatim history.
- ``adaptive``: ACMS defaults (2,048-token budget, 250 for the system prompt); passages
  take their balance share first, as agents/acms.py does, the history gets the rest.
- ``summary``: the GenAIus evolving summary, one call per turn to the mock LLM
  (``simloop mock-llm``, started in-process).  The mock answers any plain-text request
  with 2-3 template sentences (about 25-40 words) whatever the requested length, which
  is shorter than a real model's summary.  So the table also gives ``summary@cap``: the
  strategy cuts every summary to ``max_words`` (150), which bounds its context at 195
  tokens from turn 2 whatever the model writes.  That bound, not the mock's length, is
  why the summary ratio is meaningful: full history grows with every turn, the summary
  does not.

Writes bench/memory_tokens.json {strategy: {"tokens_per_turn", "ratio_to_full", ...}};
exits 1 when summary (at its cap) or adaptive use more than 0.8 of full (ACMS: 0.78).
Usage: scripts/bench_memory.py [--turns 30] [--personas N]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_VENV_PY = ROOT / ".venv" / "bin" / "python"

if __name__ == "__main__" and _VENV_PY.exists() and Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
    os.execv(str(_VENV_PY), [str(_VENV_PY), __file__, *sys.argv[1:]])  # run under the project venv

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
from typing import Any  # noqa: E402

LIMIT = 0.8
SUMMARY_WORDS = 150
STRATEGIES = ("full", "summary", "window", "adaptive")


def _merged_scenario(persona: Any) -> Any:
    from simloop.schema import Scenario, Topic

    rubric = [q.model_copy(update={"id": f"{t.id}:{q.id}"}) for t in persona.topics for q in t.rubric]
    topic = Topic(id="bench", title=persona.topics[0].title, need=persona.topics[0].need, rubric=rubric)
    return Scenario(dialogue_id=f"bench-{persona.id}", persona=persona, topic=topic, behaviour=persona.behaviour,
                    seed=11)


async def make_dialogue(ctx: Any, persona: Any, turns: int) -> tuple[Any, list[Any]]:
    """(state with ``turns`` finished turns, top-5 hits per turn) from voice + bm25_extractive."""
    from agents.bm25_extractive import BM25Extractive
    from simloop.schema import DialogueState, Turn, UserTurn
    from simloop.simulators import Action, SimContext, TemplateVoice

    scenario = _merged_scenario(persona)
    state = DialogueState(dialogue_id=scenario.dialogue_id, scenario=scenario, max_turns=turns)
    voice, agent, retriever = TemplateVoice(ctx), BM25Extractive(ctx), await ctx.retriever()
    rubric, hits = scenario.topic.rubric, []
    for t in range(1, turns + 1):
        question, attempt = rubric[((t - 1) // 2) % len(rubric)], 1 + (t - 1) % 2
        action = Action("ask" if attempt == 1 else "reask", rubric=question, turn=t, attempt=attempt)
        utterance, _ = await voice.speak(action, SimContext(scenario=scenario, history=state.history()))
        state.user = UserTurn(utterance=utterance)
        reply = await agent.respond(state)
        hits.append(await retriever.search(reply.rewritten_query or utterance, 5))
        state.turns.append(Turn(index=t, user=state.user, assistant=reply.to_turn()))
    state.user = None
    return state, hits


def _replay(dialogue: Any, t: int) -> Any:
    """The state as an assistant sees it at turn ``t``: turns 1..t-1 done, utterance t asked."""
    from simloop.schema import DialogueState

    done = dialogue.turns[: t - 1]
    return DialogueState(dialogue_id=dialogue.dialogue_id, scenario=dialogue.scenario, turns=done,
                         user=dialogue.turns[t - 1].user)


async def measure(ctx: Any, dialogue: Any, hits: list[Any]) -> dict[str, list[int]]:
    from simloop.memory import AdaptiveMemory, history_share, make_memory
    from simloop.parts import fit_passages, format_passage, is_dependent
    from simloop.text import count_tokens

    adaptive = make_memory("adaptive")
    assert isinstance(adaptive, AdaptiveMemory)  # its budget splits each turn between history and passages
    memories = {"full": make_memory("full"), "window": make_memory("window", turns=3),
                "adaptive": adaptive, "summary": make_memory("summary", max_words=SUMMARY_WORDS)}
    out: dict[str, list[int]] = {name: [] for name in (*STRATEGIES, "summary@cap")}
    scratch: dict[str, Any] = {}  # the assistant's memory of this dialogue: the evolving summary
    for t in range(1, len(dialogue.turns) + 1):
        state = _replay(dialogue, t)
        state.assistant_memory = scratch
        share = history_share(t - 1, is_dependent(state.user.utterance))
        shown = fit_passages(hits[t - 1], round((1 - share) * adaptive.available_tokens), 5)
        reserve = max(1, sum(count_tokens(format_passage(h)) for h in shown))
        for name, memory in memories.items():
            built = await memory.build(state, ctx, reserve_tokens=reserve if name == "adaptive" else 0)
            out[name].append(built.info.tokens)
        out["summary@cap"].append(0 if t == 1 else count_tokens(" ".join(["w"] * SUMMARY_WORDS)))
    return out


def report(per_dialogue: list[dict[str, list[int]]]) -> dict[str, dict[str, float]]:
    names = [*STRATEGIES, "summary@cap"]
    mean = {n: statistics.fmean(x for d in per_dialogue for x in d[n]) for n in names}
    last = {n: statistics.fmean(d[n][-1] for d in per_dialogue) for n in names}
    table = {n: {"tokens_per_turn": round(mean[n], 1), "ratio_to_full": round(mean[n] / mean["full"], 3),
                 "tokens_at_last_turn": round(last[n], 1)} for n in names}
    print("| strategy | tokens/turn | ratio to full | tokens at last turn |")
    print("|---|---:|---:|---:|")
    for n in names:
        row = table[n]
        print(f"| {n} | {row['tokens_per_turn']:.1f} | {row['ratio_to_full']:.3f} | {row['tokens_at_last_turn']:.1f} |")
    return table


async def main(turns: int, personas: int, out: Path) -> int:
    from simloop.config import RunConfig
    from simloop.fakes import MockLLM
    from simloop.inputs import load_personas
    from simloop.llm import LLMConfig, LLMRole
    from simloop.run import Context

    async with MockLLM(seed=1) as mock:
        ctx = Context(RunConfig(llm=LLMConfig(default=LLMRole(base_url=mock.url, model="mock-model"))))
        try:
            chosen = load_personas(ROOT / "personas")[:personas]
            made = await asyncio.gather(*(make_dialogue(ctx, p, turns) for p in chosen))
            per_dialogue = await asyncio.gather(*(measure(ctx, d, h) for d, h in made))
        finally:
            await ctx.aclose()
    print(f"{len(per_dialogue)} dialogues x {turns} turns (personas: {', '.join(p.id for p in chosen)})\n")
    table = report(per_dialogue)
    result = {n: dict(table[n]) for n in STRATEGIES}
    result["summary"].update({f"at_cap_{k}": v for k, v in table["summary@cap"].items()})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {out}")
    worst = {"summary@cap": table["summary@cap"]["ratio_to_full"], "adaptive": table["adaptive"]["ratio_to_full"]}
    bad = {k: v for k, v in worst.items() if v > LIMIT}
    if bad:
        print(f"FAIL: above {LIMIT} of full: {bad}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--personas", type=int, default=10)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "memory_tokens.json")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.turns, args.personas, args.out)))
