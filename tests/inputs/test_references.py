"""Evidence for the demo personas (issue 34): ``set_references`` edits persona files as
text (scripts/demo_references.py runs it over personas/), and every demo rubric question
carries the corpus summary that answers it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from simloop.inputs.personas import load_persona_file, load_personas
from simloop.inputs.references import Pick, set_references
from tests.helpers.data import ROOT

PERSONA = '''# a comment the tool keeps
id = "p"
ptkb = ["I fish."]

[[topics]]
id = "p-fish"
title = "Fish"

[[topics.rubric]]
id = "q1"
question = "What is a pike?"
keywords = [
  "fish",  # a comment with a ] in it
]

[[topics.rubric]]
id = "q2"
question = "What is angling?"
reference = "old text"
reference_doc = "Old"

[[topics]]
id = "p-sea"
title = "Sea"

[[topics.rubric]]
id = "q1"
question = "What is the Baltic Sea?"
'''


def _pick(topic: str, rubric: str, doc: str, text: str) -> Pick:
    return Pick(topic, rubric, "?", doc, doc, 0.8, text)


def test_set_references_writes_only_the_reference_lines(tmp_path: Path):
    picks = [_pick("p-fish", "q1", "Northern_pike", 'The northern pike is a "carnivorous" fish.'),
             _pick("p-fish", "q2", "Angling", "Angling is fishing with a hook."),
             _pick("p-sea", "q1", "Baltic_Sea", "The Baltic Sea is an arm of the Atlantic.")]
    out = set_references(PERSONA, picks)
    assert set_references(out, picks) == out  # re-running changes nothing
    assert "# a comment the tool keeps" in out and '"fish",  # a comment with a ] in it' in out
    assert "old text" not in out and out.count("reference_doc") == 3
    data = tomllib.loads(out)
    fish, sea = data["topics"]
    assert fish["rubric"][0]["keywords"] == ["fish"]
    assert fish["rubric"][0]["reference"] == 'The northern pike is a "carnivorous" fish.'
    assert (fish["rubric"][1]["reference_doc"], sea["rubric"][0]["reference_doc"]) == ("Angling", "Baltic_Sea")
    (tmp_path / "p.toml").write_text(out)
    q = load_persona_file(tmp_path / "p.toml").topics[1].rubric[0]
    assert (q.reference, q.reference_doc) == ("The Baltic Sea is an arm of the Atlantic.", "Baltic_Sea")


def test_every_demo_rubric_question_has_its_evidence():
    questions = [q for p in load_personas(ROOT / "personas") for t in p.topics for q in t.rubric]
    assert questions and all(q.reference and q.reference_doc for q in questions)
