"""The encoders' layer stack in ONNX Runtime (search/onnx_layers.py) gives the numpy
forward pass's vectors, takes only small chunks, and can be turned off."""

from __future__ import annotations

import numpy as np
import pytest

import simloop.search.bert as bert
from simloop.errors import ConfigError
from simloop.search.embeddings import load_minilm, load_mpnet
from simloop.search.onnx_layers import SMALL_TOKENS, OnnxLayers

pytestmark = pytest.mark.slow

TEXTS = ["What is gout?", "a", "", "I am allergic to shellfish, so keep seafood out of the recipes.",
         "Café naïve résumé, ÜBER straße, 東京 and an emoji 🙂",
         "Which of these would suit a vegetarian who cycles to work every day and hates the cold?"]


def _both_ways(model, monkeypatch, texts, batch_size):
    """(ONNX Runtime, numpy) vectors of the same texts and batches."""
    monkeypatch.setenv("SIMLOOP_EMBED_RUNTIME", "onnx")
    model.model._onnx_built = False  # built again under the variable just set
    fast = model.encode(texts, batch_size=batch_size)
    assert isinstance(model.model._onnx_layers, OnnxLayers)
    monkeypatch.setenv("SIMLOOP_EMBED_RUNTIME", "numpy")
    model.model._onnx_built = False
    slow = model.encode(texts, batch_size=batch_size)
    assert model.model._onnx_layers is None
    return fast, slow


@pytest.mark.parametrize("loader", [load_minilm, load_mpnet], ids=["minilm", "mpnet"])
@pytest.mark.parametrize("batch_size", [1, 3, 64])  # alone; padded batches (the mask and MPNet's bias)
def test_onnx_runtime_gives_the_numpy_vectors(loader, batch_size, monkeypatch):
    fast, slow = _both_ways(loader(), monkeypatch, TEXTS, batch_size)
    assert fast.shape == slow.shape and fast.dtype == np.float32
    assert np.abs(fast - slow).max() < 1e-5
    assert not np.array_equal(fast[0], fast[1])  # different texts, different vectors


def test_only_small_chunks_go_to_onnx_runtime(monkeypatch):
    model = load_minilm()
    calls = []
    real = OnnxLayers.__call__

    def counted(self, x, bias):
        calls.append(x.shape[0] * x.shape[1])
        return real(self, x, bias)

    monkeypatch.setattr(OnnxLayers, "__call__", counted)
    monkeypatch.setenv("SIMLOOP_EMBED_RUNTIME", "onnx")
    model.model._onnx_built = False
    model.encode(["What is gout?"])
    assert calls and calls[-1] <= SMALL_TOKENS
    calls.clear()
    long = ["word " * 300] * 16  # 16 x 256 word pieces: chunks of 2048 tokens, numpy's (all BLAS threads)
    model.encode(long, batch_size=16)
    assert calls == []
    assert bert._TOKENS > SMALL_TOKENS


def test_a_bad_runtime_name_is_a_config_error(monkeypatch):
    model = load_minilm()
    monkeypatch.setenv("SIMLOOP_EMBED_RUNTIME", "torch")
    model.model._onnx_built = False
    with pytest.raises(ConfigError, match="SIMLOOP_EMBED_RUNTIME='torch': expected one of onnx, numpy"):
        model.encode(["x"])
