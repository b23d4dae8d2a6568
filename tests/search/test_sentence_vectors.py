"""The sentences of a corpus that the extractive answer embeds (issue 16), as
``index build --embeddings`` puts them into the vector cache: split as a hit's text is
split, deduplicated, fragments left out (tests/search/test_vector_cache.py fills and reads them)."""

from __future__ import annotations

from pathlib import Path

from simloop.search.vectors import corpus_passages, corpus_sentences, passage_text
from tests.helpers.data import write_jsonl

TWO = [{"id": "a", "contents": "Cellos are tuned in fifths. Short one. The bow is strung with horsehair."},
       {"id": "b", "title": "Porto", "contents": "Cellos are tuned in fifths. Porto lies on the Douro river."}]


def test_sentences_are_split_like_hits_deduplicated_and_fragments_left_out(tmp_path: Path):
    corpus = write_jsonl(tmp_path / "c.jsonl", TWO)
    assert corpus_sentences([corpus]) == ["Cellos are tuned in fifths.", "The bow is strung with horsehair.",
                                          "Porto lies on the Douro river."]


def test_passages_are_the_texts_re_ranking_embeds(tmp_path: Path):
    corpus = write_jsonl(tmp_path / "c.jsonl", TWO)
    assert corpus_passages([corpus]) == [TWO[0]["contents"], passage_text("Porto", TWO[1]["contents"])]
    assert corpus_passages([corpus])[1].startswith("Porto\nCellos")
