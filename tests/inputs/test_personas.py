"""The shipped personas (PTKB, traits, topics) and the loader's error messages."""

from __future__ import annotations

import asyncio
import re
import textwrap
from pathlib import Path

import pytest

from simloop.errors import BadInputError, DataFileError
from simloop.inputs.personas import load_persona_file, load_personas
from simloop.schema import Persona
from tests.helpers.data import ROOT

FIRST_PERSON = re.compile(r"\b(I|I'm|my|me|our|we|us)\b", re.IGNORECASE)
SHIPPED = ROOT / "personas"

GOOD = """\
id = "{pid}"
name = "Test Person"
ptkb = ["I live in Porto.", "I play the cello."]

[behaviour]
patience = 2
reveal = "never"

[[topics]]
id = "{pid}-cello"
title = "The cello"
need = "What a cello is."

[[topics.rubric]]
id = "q1"
question = "What is a cello?"
keywords = ["string", "bow"]
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- shipped data


@pytest.fixture(scope="module")
def shipped() -> list[Persona]:
    return load_personas(SHIPPED)


def test_shipped_personas_load_in_file_name_order(shipped):
    assert len(shipped) >= 8
    assert [p.id for p in shipped] == sorted(f.stem for f in SHIPPED.glob("*.toml"))
    assert all(p.name for p in shipped)


def test_every_persona_has_a_rich_ptkb_and_enough_topics(shipped):
    for p in shipped:
        assert 10 <= len(p.ptkb) <= 20, p.id
        assert len(set(p.ptkb)) == len(p.ptkb), f"{p.id}: repeated PTKB statement"
        for s in p.ptkb:
            assert FIRST_PERSON.search(s), f"{p.id}: PTKB statements are first person: {s!r}"
        assert len(p.topics) >= 3, p.id
        for t in p.topics:
            assert t.id.startswith(f"{p.id}-"), t.id
            assert t.title and len(t.need) > 40, t.id
            assert 4 <= len(t.rubric) <= 6, t.id
            assert [q.id for q in t.rubric] == [f"q{i}" for i in range(1, len(t.rubric) + 1)], t.id
            for q in t.rubric:
                assert q.question.endswith("?"), (t.id, q.id)
                assert 2 <= len(q.keywords) <= 4, (t.id, q.id)
                assert all(k == k.strip() and k for k in q.keywords), (t.id, q.id)


def test_topic_ids_are_unique_across_personas(shipped):
    ids = [t.id for p in shipped for t in p.topics]
    assert len(ids) == len(set(ids))


def test_behaviour_traits_vary(shipped):
    traits = [p.behaviour for p in shipped]
    assert any(b.patience <= 1 for b in traits), "an impatient user"
    assert any(b.cooperativeness <= 0.3 for b in traits), "an uncooperative user"
    assert any(b.language_skill <= 0.4 for b in traits), "a user with poor language skill"
    assert any(b.verbosity >= 0.8 for b in traits) and any(b.verbosity <= 0.2 for b in traits)
    assert {b.reveal for b in traits} == {"never", "relevant", "eager"}
    distinct = {(b.patience, b.cooperativeness, b.language_skill, b.verbosity, b.reveal) for b in traits}
    assert len(distinct) == len(traits)


def test_a_single_file_loads(tmp_path):
    path = write(tmp_path, "ana.toml", GOOD.format(pid="ana"))
    [persona] = load_personas(path)
    assert persona.id == "ana" and persona.behaviour.patience == 2 and persona.behaviour.reveal == "never"
    assert persona.behaviour.cooperativeness == 0.8  # unset traits keep their defaults
    assert load_persona_file(path) == persona


# --------------------------------------------------------------------------- malformed files


def bad(folder: Path) -> str:
    with pytest.raises(DataFileError) as info:
        load_personas(folder)
    message = str(info.value)
    assert "\n" not in message, "one line for the CLI"
    assert isinstance(info.value, BadInputError)  # the CLI exits 2 on these
    return message


def test_missing_rubric_question_names_file_and_field(tmp_path):
    write(tmp_path, "ana.toml", GOOD.format(pid="ana").replace('question = "What is a cello?"\n', ""))
    msg = bad(tmp_path)
    assert msg.startswith(f"{tmp_path / 'ana.toml'}: ")
    assert "topics.0.rubric.0.question: Field required" in msg


def test_out_of_range_trait_names_the_field(tmp_path):
    write(tmp_path, "ana.toml", GOOD.format(pid="ana").replace("patience = 2", "patience = 2\ncooperativeness = 1.5"))
    msg = bad(tmp_path)
    assert "ana.toml: behaviour.cooperativeness: 1.5 is out of range (cooperativeness: a number 0-1" in msg


def test_unknown_reveal_value_and_unknown_key(tmp_path):
    write(tmp_path, "ana.toml", GOOD.format(pid="ana").replace('reveal = "never"', 'reveal = "sometimes"'))
    want = "ana.toml: behaviour.reveal: 'sometimes' is out of range (reveal: one of never, relevant, eager"
    assert want in bad(tmp_path)
    write(tmp_path, "ana.toml", GOOD.format(pid="ana").replace("[behaviour]", "hobby = 'cello'\n[behaviour]"))
    assert "ana.toml: hobby: Extra inputs are not permitted" in bad(tmp_path)


def test_blank_ptkb_statement_and_topic_without_rubric(tmp_path):
    write(tmp_path, "ana.toml", GOOD.format(pid="ana").replace('"I play the cello."', '"  "'))
    assert "ana.toml: ptkb: PTKB statements must not be empty" in bad(tmp_path)
    text = GOOD.format(pid="ana")
    write(tmp_path, "ana.toml", text[: text.index("[[topics.rubric]]")])
    assert "ana.toml: topics.0: a topic needs rubric questions" in bad(tmp_path)


def test_toml_syntax_error_gives_file_and_line(tmp_path):
    write(tmp_path, "ana.toml", GOOD.format(pid="ana").replace('title = "The cello"', 'title = "The cello'))
    msg = bad(tmp_path)
    assert msg.startswith(f"{tmp_path / 'ana.toml'}: line 11, column")
    assert "invalid TOML" in msg


def test_file_stem_must_equal_id(tmp_path):
    write(tmp_path, "anna.toml", GOOD.format(pid="ana"))
    msg = bad(tmp_path)
    assert "anna.toml: id: 'ana' must match the file name" in msg
    with pytest.raises(DataFileError, match="must match the file name"):
        load_personas(tmp_path / "anna.toml")


def test_duplicate_persona_ids_across_files(tmp_path):
    write(tmp_path, "a.toml", GOOD.format(pid="ana"))
    write(tmp_path, "b.toml", GOOD.format(pid="ana").replace('id = "ana-cello"', 'id = "ana-viola"'))
    msg = bad(tmp_path)
    assert msg.startswith(str(tmp_path / "b.toml")) and "id: duplicate persona id 'ana'" in msg and "a.toml" in msg


def test_duplicate_topic_ids_across_files(tmp_path):
    write(tmp_path, "ana.toml", GOOD.format(pid="ana"))
    write(tmp_path, "bea.toml", GOOD.format(pid="bea").replace('id = "bea-cello"', 'id = "ana-cello"'))
    msg = bad(tmp_path)
    assert "bea.toml: topics.0.id: duplicate topic id 'ana-cello'" in msg and "ana.toml" in msg


def test_duplicate_rubric_ids_within_a_topic(tmp_path):
    extra = '\n[[topics.rubric]]\nid = "q1"\nquestion = "Who plays the cello?"\n'
    write(tmp_path, "ana.toml", GOOD.format(pid="ana") + extra)
    assert "ana.toml: topics.0.rubric.1.id: duplicate rubric id 'q1'" in bad(tmp_path)


def test_persona_without_topics_is_rejected(tmp_path):
    text = GOOD.format(pid="ana")
    write(tmp_path, "ana.toml", text[: text.index("[[topics]]")])
    assert "ana.toml: topics: at least one [[topics]] table is required" in bad(tmp_path)


def test_empty_or_missing_folder_and_non_utf8_file(tmp_path):
    assert "no persona files (*.toml)" in bad(tmp_path)
    assert "no such persona file or folder" in bad(tmp_path / "nowhere")
    (tmp_path / "ana.toml").write_bytes(b'id = "\xff"\n')
    assert "ana.toml: not UTF-8" in bad(tmp_path)


# --------------------------------------------------------------------------- answerability


def keyword_hits(keywords: list[str], texts: list[str]) -> int:
    """The most keywords any one retrieved passage contains (case-insensitive)."""
    return max((sum(k.lower() in t.lower() for k in keywords) for t in texts), default=0)


@pytest.mark.slow
async def test_every_rubric_question_is_answerable_from_the_demo_corpus(shipped):
    """BM25 top-5 for each rubric question holds a passage with at least one of its keywords."""
    from simloop.search import RetrievalConfig, open_retriever

    questions = [(t.id, q) for p in shipped for t in p.topics for q in t.rubric]
    r = await open_retriever(RetrievalConfig())
    try:
        results = await asyncio.gather(*(r.search(q.question, k=5) for _, q in questions))
    finally:
        await r.aclose()
    best = [keyword_hits(q.keywords, [h.text for h in hits]) for (_, q), hits in zip(questions, results)]
    unanswerable = [f"{tid} {q.id}: {q.question}" for (tid, q), b in zip(questions, best) if b == 0]
    assert not unanswerable, "no keyword in the top 5:\n" + "\n".join(unanswerable)
    # Answered well, not just touched: two keywords in one passage, for every question (the
    # questions are the persona's own need, "How far will I be running in my first marathon?",
    # and still each finds the summary that answers it).
    thin = [f"{tid} {q.id}: {q.question}" for (tid, q), b in zip(questions, best) if b < min(2, len(q.keywords))]
    assert not thin, "fewer than two keywords in any top-5 passage:\n" + "\n".join(thin)
