"""`simloop memory`: probe placement, rule scoring, the offline summariser, the memory-fed
rewrite of bm25_extractive, the summary path against the mock LLM, and one offline run
with the real stack."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.bm25_extractive import BM25Extractive, memory_statements
from simloop.cli import main
from simloop.config import RunConfig
from simloop.errors import ConfigError
from simloop.fakes.mockllm import MockLLM
from simloop.fakes.seams import HashEmbedder, MemoryRetriever
from simloop.memory import ContextPart, SummaryMemory, make_memory
from simloop.memory.offline import MODEL_NAME, OfflineSummariser
from simloop.memorytest.facts import FACTS, fact_by_id, find_terms, mentions, score_rules
from simloop.memorytest.formats import MemoryResults
from simloop.memorytest.probes import PROBE, REVEAL, ProbeSimulator, build_probes, deal_facts, query_kept
from simloop.memorytest.run import MEMORY_FILE, SIMULATOR, MemoryTest, parse_config
from simloop.memorytest.score import score_probe, summarise_probes
from simloop.run import read_manifest, read_transcripts
from simloop.run.engine import run_dialogue
from simloop.run.plugins import Context
from simloop.run.session import DialogueSpec
from simloop.schema import (
    Behaviour,
    DialogueState,
    Persona,
    PluginRef,
    RubricQuestion,
    Scenario,
    Stop,
    Topic,
    Transcript,
    Turn,
    UserTurn,
    utcnow,
)
from tests.helpers.data import make_persona
from tests.helpers.memorytest import DOCS, base_config, memory_config
from tests.helpers.plugins import EchoAssistant


def spec(max_turns: int = 100) -> DialogueSpec:
    return DialogueSpec(run_id="r", simulator=PluginRef(name=SIMULATOR), assistant=PluginRef(name="echo"),
                        max_turns=max_turns, timeout_s=30)


# ----------------------------------------------------------------------------- placement


@pytest.mark.parametrize("reveal_turn", [1, 2, 5])
def test_probe_comes_exactly_distance_turns_after_the_reveal(reveal_turn: int):
    distances = [1, 3, 7, 12, 40]
    out = build_probes([make_persona("p1", topics=2, questions=3)], distances, reveal_turn, facts_per_persona=2)
    assert sorted(p.distance for _, p in out) == sorted(distances * 2)
    for scenario, plan in out:
        ids = [q.id for q in scenario.topic.rubric]
        assert plan.reveal_turn == reveal_turn and plan.probe_turn == reveal_turn + plan.distance
        assert len(ids) == plan.probe_turn  # the probe is the last user turn
        assert ids.index(REVEAL) + 1 == reveal_turn and ids.index(PROBE) + 1 == plan.probe_turn
        assert ids.count(REVEAL) == ids.count(PROBE) == 1
        fact = fact_by_id(plan.fact_id)
        assert scenario.topic.rubric[reveal_turn - 1].question.startswith(fact.reveal)
        assert scenario.topic.rubric[-1].question == plan.question and plan.question in fact.probes
        fillers = [q.question for q in scenario.topic.rubric if q.id not in (REVEAL, PROBE)]
        assert not any(find_terms(q, fact.key_terms) for q in fillers)  # no filler gives the fact away


async def test_engine_plays_the_script_turn_for_turn():
    for scenario, plan in build_probes([make_persona("p1", topics=1, questions=2)], [2, 9], reveal_turn=3):
        t = await run_dialogue(scenario, ProbeSimulator(), EchoAssistant(), spec())
        assert t.error is None and t.stop.reason == "user_satisfied" and t.stop.by == "simulator"
        assert len(t.turns) == plan.probe_turn
        assert [x.index for x in t.turns if x.user.rubric_id == REVEAL] == [3]
        assert [x.index for x in t.turns if x.user.rubric_id == PROBE] == [3 + plan.distance]
        assert t.turns[-1].user.utterance == plan.question and t.turns[-1].user.intent == "probe"
        assert {x.user.intent for x in t.turns[:-1]} == {"filler", "reveal"}
        if plan.distance == 9:  # 2 rubric questions fill 11 turns: they come round again, announced
            assert any(x.user.utterance.startswith("Once more:") for x in t.turns)


def test_facts_are_dealt_round_robin_and_respect_the_ptkb():
    personas = [make_persona(f"p{i}") for i in range(4)]  # PTKB: "I am vegetarian.", Porto, cello
    out = build_probes(personas, [5, 10], facts_per_persona=2)
    by_persona = {p.id: {plan.fact_id for _, plan in out if plan.persona_id == p.id} for p in personas}
    assert all(len(ids) == 2 for ids in by_persona.values())  # every distance probes the same two facts
    assert len(set().union(*by_persona.values())) == 8  # eight slots, eight different facts
    dealt = deal_facts(personas, len(FACTS))
    assert all("diet-vegan" not in {f.id for f in fs} for fs in dealt.values())  # the PTKB would answer it
    assert deal_facts(personas, 1) == deal_facts(personas, 1) != deal_facts(personas, 1, seed=1)
    assert len(FACTS) >= 12 and {f.kind for f in FACTS} >= {"allergy", "diet", "budget", "date", "name", "place",
                                                             "constraint"}
    assert all(f.must_mention and not find_terms(" ".join(f.probes), f.must_mention) for f in FACTS)


# ----------------------------------------------------------------------------- rules


@pytest.mark.parametrize("answer, mention, must_not, passed, reason", [
    ("Given your ALLERGY, pack fruit.", ["allergy"], [], True, "ok"),  # case-insensitive
    ("Allergy-friendly snacks are easy to find.", ["allergy"], [], True, "ok"),  # a hyphen is a boundary
    ("Good nutrition matters on long walks.", ["nut"], [], False, "missing"),  # whole words only
    ("Pack some peanuts and crackers.", ["allergy"], ["peanuts"], False, "forbidden"),
    ("Avoid peanuts. Pack crackers instead of nuts.", [], ["peanuts"], True, "ok"),  # advised against
    ("Try  Peanut\tbutter toast.", [], ["peanut butter"], False, "forbidden"),  # any whitespace in a phrase
    ("A peanut is a legume.", [], ["peanuts"], True, "ok"),  # "peanut" is not "peanuts"
    ("Your budget of 1,500 euros covers it.", ["1,500"], [], True, "ok"),
    ("It costs 15000 euros.", ["1500"], [], False, "missing"),
    ("Mind your allergy. Satay is a classic snack.", ["allergy"], ["satay"], False, "forbidden"),  # per sentence
])
def test_rule_scoring(answer: str, mention: list[str], must_not: list[str], passed: bool, reason: str):
    verdict = score_rules(answer, mention, must_not)
    assert (verdict.passed, verdict.reason) == (passed, reason)
    assert verdict.mentioned == [m for m in mention if mentions(answer, m)]


def test_rule_scoring_reports_what_it_found():
    v = score_rules("Since you are vegan, try tofu. Or a beef stew.", ["vegan", "plant-based"], ["beef", "pork"])
    assert v.mentioned == ["vegan"] and v.recommended == ["beef"] and not v.passed


def _transcript(plan, n_turns: int, probe_answer: str, error: bool = False) -> Transcript:
    turns = [Turn(index=i, user=UserTurn(utterance="q", rubric_id=PROBE if i == plan.probe_turn else f"filler-{i}"),
                  assistant={"response": probe_answer if i == plan.probe_turn else "a",
                             "rewritten_query": f"{plan.question} allergy",
                             "context": {"strategy": "x", "tokens": 10 * i}})
             for i in range(1, n_turns + 1)]
    stop = Stop(reason="error" if error else "user_satisfied", by="engine" if error else "simulator")
    return Transcript(run_id="r", dialogue_id=plan.dialogue_id, scenario={"persona_id": plan.persona_id,
                      "topic_id": "t", "behaviour": Behaviour(), "seed": 1}, simulator=PluginRef(name="s"),
                      assistant=PluginRef(name="a"), started_at=utcnow(), ended_at=utcnow(), stop=stop, turns=turns)


def test_probe_scoring_and_the_strategy_summary():
    plans = [p for _, p in build_probes([make_persona("p1")], [2, 4], facts=[fact_by_id("allergy-peanut")])]
    good = _transcript(plans[0], plans[0].probe_turn, "With your allergy, pack fruit.")
    cut = _transcript(plans[1], plans[1].probe_turn - 1, "", error=True)  # ended before the probe
    rows = [score_probe(plans[0], good, "full"), score_probe(plans[1], cut, "full")]
    assert rows[0].passed and rows[0].answered and rows[0].query_kept and rows[0].mentioned == ["allergy"]
    assert not rows[1].passed and not rows[1].answered and rows[1].rule == "unanswered"
    entry = summarise_probes(rows, [good, cut], [2, 4])
    assert entry.recall_by_distance == {"2": 1.0, "4": 0.0}
    turns = [t for tr in (good, cut) for t in tr.turns]
    assert entry.tokens_per_turn == round(sum(t.assistant.context.tokens for t in turns) / len(turns), 1)
    assert entry.unanswered == 1 and entry.errors == 0 and entry.probes_by_distance == {"2": 1, "4": 1}
    assert query_kept("Which snacks should I pack? allergy", plans[0]) and not query_kept(plans[0].question, plans[0])


# ----------------------------------------------------------------------------- the offline summariser


def _state(history: list[str], utterance: str) -> DialogueState:
    topic = Topic(id="t", title="t", rubric=[RubricQuestion(id="q1", question="?")])
    persona = Persona(id="p", ptkb=["I live in Porto."], topics=[topic])
    scenario = Scenario(dialogue_id="d", persona=persona, topic=topic, behaviour=Behaviour(), seed=1)
    turns = [Turn(index=i, user=UserTurn(utterance=u), assistant={"response": f"Answer {i}."})
             for i, u in enumerate(history, 1)]
    return DialogueState(dialogue_id="d", scenario=scenario, turns=turns, user=UserTurn(utterance=utterance))


async def test_offline_summariser_keeps_what_the_user_said_and_nothing_else():
    memory = SummaryMemory(max_words=20)
    ctx = Context(RunConfig(), overrides={"chat:assistant.summary": OfflineSummariser()})
    history = ["What is a marathon?", "I have a severe peanut allergy. What is glycogen?"]
    history += [f"What is topic{i} about?" for i in range(6)]
    state = _state([], history[0])
    for i, utterance in enumerate(history[1:], 1):
        state.turns.append(Turn(index=i, user=state.user, assistant={"response": "An answer."}))
        state.user = UserTurn(utterance=utterance)
        text, info, stages, _ = await memory.build(state, ctx)
        assert info.strategy == "summary" and stages and stages[0].model == MODEL_NAME and stages[0].prompt_tokens > 0
        if i >= 2:
            assert "I have a severe peanut allergy." in text  # kept however far back
    assert text.endswith("The user last asked about topic4.") and len(text.split()) <= 20
    state.turns.append(Turn(index=len(history), user=state.user, assistant={"response": "x"}))
    state.user = UserTurn(utterance="I also own a lazy cat named Pixel and I live in a big flat by the sea. Why?")
    state.turns.append(Turn(index=len(history) + 1, user=state.user, assistant={"response": "x"}))
    state.user = UserTurn(utterance="next")
    text, _, _, _ = await memory.build(state, ctx)
    assert text == "I also own a lazy cat named Pixel and I live in a big flat by the sea."  # oldest out first


# ----------------------------------------------------------------------------- bm25_extractive with memory


def test_memory_statements_from_each_kind_of_context():
    full = [ContextPart("user", "Hi. I have a peanut allergy. What is a snack?"),
            ContextPart("assistant", "I think snacks are small meals."), ContextPart("user", "Thanks.")]
    users, statements = memory_statements(full)
    assert users == ["Hi. I have a peanut allergy. What is a snack?", "Thanks."]
    assert statements == ["I have a peanut allergy."]  # not the question, not the assistant's "I think"
    adaptive = [ContextPart("user", "My budget is 600 euros."), ContextPart("assistant", "Laptops vary."),
                ContextPart("user", "What is RAM?")]
    assert memory_statements(adaptive) == (["My budget is 600 euros.", "What is RAM?"], ["My budget is 600 euros."])
    summary = [ContextPart(None, "The user is allergic to peanuts. The user last asked about glycogen.")]
    assert memory_statements(summary)[1] == ["The user is allergic to peanuts.", "The user last asked about glycogen."]


async def test_adaptive_parts_say_who_said_what():
    """The adaptive context's parts carry the condensed blocks and the window by speaker,
    so bm25_extractive never parses the prompt text."""
    history = [f"I have a peanut allergy and topic{i} matters to me." for i in range(12)]
    state = _state(history, "Which snacks should I pack?")
    memory = make_memory("adaptive", token_budget=400, system_tokens=50, k_max=4)
    fake = HashEmbedder()
    ctx = Context(RunConfig(), overrides={"embedder": fake, "embedder:mpnet": fake})
    text, _, _, parts = await memory.build(state, ctx)
    assert parts and {p.role for p in parts} <= {"user", "assistant", None}
    assert all(p.text in text for p in parts if p.role == "assistant")
    assert parts[-1] == ContextPart("assistant", "Answer 12.")  # the window ends with the last reply
    assert "I have a peanut allergy and topic0 matters to me." in [p.text for p in parts if p.role == "user"]


@pytest.mark.parametrize("memory, params, kept", [("full", {}, True), ("window", {"turns": 2}, False)])
async def test_bm25_rewrite_draws_on_what_the_strategy_keeps(memory: str, params: dict, kept: bool):
    fake = HashEmbedder()
    ctx = Context(RunConfig(), overrides={"retriever": MemoryRetriever(DOCS), "embedder": fake, "embedder:mpnet": fake})
    agent = BM25Extractive(ctx, memory=memory, memory_params=params, memory_threshold=-1.0)
    history = ["What is a marathon?", "I have a severe peanut allergy. How long is a marathon?",
               "Where does the marathon come from?", "Who ran the first marathon?", "Why 42 kilometres?"]
    reply = await agent.respond(_state(history, "Which snacks should I pack for a long day out?"))
    assert reply.context.strategy == memory
    assert ("allergy" in reply.rewritten_query) is kept
    assert ("allergy" in reply.response.lower()) is kept  # the remembered word weighs in the answer too
    assert reply.context.recalled == (["I have a severe peanut allergy."] if kept else [])


def test_bm25_memory_params_are_validated():
    ctx = Context(RunConfig())
    with pytest.raises(ValueError, match="unknown memory strategy"):
        BM25Extractive(ctx, memory="nope")
    with pytest.raises(ValueError, match="need a memory strategy"):
        BM25Extractive(ctx, memory_params={"turns": 2})


# ----------------------------------------------------------------------------- runs, config, CLI


async def test_summary_strategy_and_judge_against_the_mock_llm(tmp_path: Path):
    fake = HashEmbedder()
    fakes = {"retriever": MemoryRetriever(DOCS), "embedder": fake, "embedder:mpnet": fake}
    async with MockLLM(seed=2) as mock:
        cfg = parse_config(memory_config(strategies=["summary", "window"], judge=True))
        test = MemoryTest(cfg, base_config(tmp_path, base_url=mock.url, model="mock-model"), overrides=fakes)
        assert not test.offline_summary
        memory = await test.run()
        calls = mock.stats()["requests"]
    run_dir = tmp_path / "m"
    assert MemoryResults.model_validate_json((run_dir / MEMORY_FILE).read_text()) == memory
    assert json.loads((run_dir / MEMORY_FILE).read_text())["schema_version"] == "1.0"
    assert set(memory.strategies) == {"summary", "window"} and memory.scorer == "judge"
    for entry in memory.strategies.values():
        assert set(entry.recall_by_distance) == {"1", "3"} and entry.tokens_per_turn > 0
    assert memory.strategies["summary"].memory_models == ["mock-model"]
    summary = list(read_transcripts(run_dir / "m-summary"))
    params = read_manifest(run_dir / "m-summary").assistant.params
    assert params["memory"] == "summary" and params["k"] == 10  # effective: defaults included
    assert len(summary) == 2 and all(t.error is None for t in summary)
    for t in summary:
        for turn in t.turns:  # one summary call a turn from turn 2: turn 1 has nothing to summarise
            names = [s.name for s in turn.stages if s.model == "mock-model"]
            assert names == (["summary"] if turn.index > 1 else []) and turn.assistant.context.strategy == "summary"
    summary_calls = sum(len(t.turns) - 1 for t in summary)
    # one judge call per probe, nothing unrecorded; and the preflight's probe of the judge's server
    assert calls == summary_calls + len(memory.probes) + 1
    assert all(p.scored_by == "judge" and p.judge is not None for p in memory.probes)
    top = list(read_transcripts(run_dir))  # the folder is a run directory of every dialogue
    assert sorted(t.dialogue_id for t in top) == sorted(p.dialogue_id for p in memory.probes)
    assert read_manifest(run_dir).status == "finished"


async def test_offline_summary_stand_in_without_an_llm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    fake = HashEmbedder()
    fakes = {"retriever": MemoryRetriever(DOCS), "embedder": fake, "embedder:mpnet": fake}
    test = MemoryTest(parse_config(memory_config(strategies=["summary"], distances=[2])), base_config(tmp_path),
                      overrides=fakes)
    assert test.offline_summary
    memory = await test.run()
    assert memory.strategies["summary"].memory_models == [MODEL_NAME] and memory.scorer == "rules"


def test_config_errors(tmp_path: Path):
    for bad in ({"distances": [0, 5]}, {"strategies": ["full", "nope"]}, {"facts": ["nope"]},
                {"distances": [999], "reveal_turn": 2}, {"assistant_params": {"memory": "full"}}):
        with pytest.raises(ConfigError):
            parse_config(memory_config(**bad))
    assert parse_config(memory_config(distances=[10, 5, 5])).distances == [5, 10]


@pytest.mark.parametrize("argv, message", [
    (["--distances", "0"], "distances"), (["--distances", "5,x"], "--distances"),
    (["--strategies", "full,nope"], "unknown memory strategy 'nope'"), (["--persona", "nobody"], "nobody"),
    (["--assistant", "genaius", "--strategies", "window"], "memory takes one of 'full', 'summary'"),
])
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys, argv: list[str], message: str):
    assert main(["memory", "--out", str(tmp_path), "--no-progress", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not any(tmp_path.iterdir())  # nothing written for bad input


# ----------------------------------------------------------------------------- the real stack




@pytest.mark.slow
def test_offline_end_to_end_with_the_real_stack(tmp_path: Path, demo_cache: Path, capsys):
    argv = ["memory", "--persona", "maya", "--facts", "allergy-peanut", "--distances", "2,4",
            "--strategies", "full,window", "--out", str(tmp_path), "--run-id", "e2e", "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    run_dir = Path(out.strip().splitlines()[-1])
    assert run_dir == tmp_path / "e2e" and "recall @ 4" in out
    memory = json.loads((run_dir / MEMORY_FILE).read_text())
    for name in ("full", "window"):
        entry = memory["strategies"][name]
        assert set(entry["recall_by_distance"]) == {"2", "4"} and entry["tokens_per_turn"] > 0
        sub = run_dir / entry["run_dir"]
        assert (sub / "run.json").exists() and (sub / "dialogues.jsonl").exists()
    kept = {(p["strategy"], p["distance"]): p["query_kept"] for p in memory["probes"]}
    # a window of 3 turns still holds a fact 2 turns back, not one 4 turns back; full history holds both
    assert kept == {("full", 2): True, ("full", 4): True, ("window", 2): True, ("window", 4): False}
    # ... and the answer shows it: the kept fact opens the probe answer, so recall itself tells them apart
    passed = {(p["strategy"], p["distance"]): p["passed"] for p in memory["probes"]}
    assert passed == kept
    full4 = next(p for p in memory["probes"] if (p["strategy"], p["distance"]) == ("full", 4))
    assert full4["response"].startswith("Since you mentioned that you have a severe peanut allergy")
    for t in read_transcripts(run_dir):
        probe = next(x for x in t.turns if x.user.rubric_id == PROBE)
        reveal = next(x for x in t.turns if x.user.rubric_id == REVEAL)
        assert reveal.index == 2 and probe.index - reveal.index == int(t.dialogue_id.rsplit("-d", 1)[1])
        assert t.stop.reason == "user_satisfied" and t.turns[-1] is probe

    from simloop.evaluate.report import load_view

    assert load_view(run_dir).memory.strategies.keys() == {"full", "window"}  # `simloop report` shows the plot
