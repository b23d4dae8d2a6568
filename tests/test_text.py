"""The one text toolkit (simloop/text.py) that parts, memory, simulators and agents share."""

from __future__ import annotations

import pytest

from simloop.text import (
    STOPWORDS,
    clip_to_tokens,
    clip_words,
    content_terms,
    content_words,
    count_tokens,
    count_wordpunct,
    first_lower,
    looks_like_language,
    sentences,
    stem,
    term_coverage,
    truncate_wordpunct,
    words,
)


def test_words_keep_unicode_apostrophes_and_hyphens():
    assert words("Don’t visit Belém's well-known café!") == ["don't", "visit", "belém's", "well-known", "café"]


def test_stem_folds_plurals_and_verb_forms_case_insensitively():
    assert stem("Universities") == stem("university") == "university"
    assert stem("travelling") == stem("travels") == stem("travel") == "travel"
    assert stem("sharks") == "shark" and stem("glass") == "glas" == stem("glasses")


def test_content_words_and_terms():
    text = "What are the best universities in Porto in 2024, and why do they currently rank 3 places up?"
    assert content_words(text) == ["universities", "porto", "2024", "rank", "places"]
    assert content_terms(text + " University ranks.") == ["university", "porto", "2024", "rank", "plac"]
    assert not set(content_words(text)) & STOPWORDS


def test_sentences_do_not_split_abbreviations_or_lowercase_continuations():
    text = "Porto is in Portugal. It has e.g. port wine! Is it old? yes.\nTitle line"
    assert sentences(text) == ["Porto is in Portugal.", "It has e.g. port wine!", "Is it old? yes.", "Title line"]


def test_first_lower_and_term_coverage():
    assert first_lower("What is it?") == "what is it?" and first_lower("I think so") == "I think so"
    assert first_lower("NASA rockets") == "NASA rockets"
    assert term_coverage(["peanut allergy", "snacks"], "A peanut allergy rules out some snacks.") == 1.0
    assert term_coverage(["peanut allergy", "marathon"], "Peanuts are legumes.") == 0.0
    assert term_coverage([], "anything") == 0.0


def test_token_estimate_and_clipping_agree():
    assert count_tokens("") == 0 and count_tokens("one") == 2 and count_tokens("a b c d e f g h i j") == 13
    text = " ".join(f"w{i}" for i in range(100))
    for budget in (0, 1, 13, 50, 500):
        assert count_tokens(clip_to_tokens(text, budget)) <= budget
    assert clip_words("  a  b c ", 5) == "a  b c" and clip_words("a b c", 2) == "a b"


def test_wordpunct_counts_words_and_marks_and_truncates_there():
    assert count_wordpunct("U.S. isn't far, is it?") == 12  # U . S . isn ' t far , is it ?
    assert truncate_wordpunct("One, two three.", 3) == "One, two" and truncate_wordpunct("short", 9) == "short"


# What spaCy 3.8's blank English tokenizer (the organisers' count) gives for whitespace,
# measured once: a single space between tokens is no token; any other run is one.
@pytest.mark.parametrize("text, spacy_count", [
    ("a b", 2), ("a  b", 3), ("a\nb", 3), ("a \n b", 3), ("a\n\nb", 3), ("a\tb", 3), ("a\u00a0b", 3),
    (" a", 2), ("a ", 1), ("a  ", 2), ("   ", 1), ("x  \n  y", 3), ("- item\n- two", 5),
])
def test_wordpunct_counts_whitespace_as_spacy_does(text, spacy_count):
    assert count_wordpunct(text) == spacy_count


def test_a_markdown_answer_is_not_undercounted():
    # 50 sentences of 5 tokens, one blank line between: spaCy counts 299 (the 49 breaks too).
    # Counted 250 here before, so rehearsal passed what the organisers' server rejects.
    answer = "\n\n".join(["This is a sentence."] * 50)
    assert count_wordpunct(answer) == 299
    assert count_wordpunct(truncate_wordpunct(answer, 250)) == 250


def test_looks_like_language():
    for text in ("Does it hurt?", "ok?", "wat abut teh stomak", "Thanks, that's all!", "Is Belém far from Porto?",
                 "2 or 3 times a day?", "Сколько это стоит?", "这个多少钱？"):
        assert looks_like_language(text), text
    for text in ("", "   ", "#@! &&&& ~~~ $$", "~~ ^^^ 404 %%", "xkqt zzrv bnmw", "12 345 6789", "?!?"):
        assert not looks_like_language(text), text
