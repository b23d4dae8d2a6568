"""MPNet's forward pass in numpy (all-mpnet-base-v2, the PTKB ranker's encoder; DESIGN §8);
short texts' layers run in ONNX Runtime (``onnx_layers.py``).

MPNet is BERT's layer stack with three differences, each mirrored from transformers'
``modeling_mpnet``: positions count from the padding index + 1 (RoBERTa's scheme, padding
keeps the padding index), there are no token types, and every layer adds a learnt bias per
head to its attention scores, looked up by the bucketed relative distance between query and
key (T5's buckets: exact below 8, logarithmic up to 128, each direction its own half).
``tests/test_mpnet.py`` checks the vectors against sentence-transformers' own.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .bert import BertEncoder

__all__ = ["MPNetEncoder", "relative_buckets"]

_F = np.float32
_PADDING_IDX = 1  # MPNet's position and token padding index (transformers hard-codes it too)


def relative_buckets(length: int, buckets: int = 32, max_distance: int = 128) -> np.ndarray:
    """(length, length) bucket of key j seen from query i, as ``relative_position_bucket``."""
    n = np.arange(length)[:, None] - np.arange(length)[None, :]  # -(key - query)
    half = buckets // 2
    out = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    exact = half // 2
    # Distances below ``exact`` take the exact branch; clipping them keeps the log finite.
    ratio = np.maximum(n, exact).astype(np.float32) / exact
    far = exact + (np.log(ratio) / math.log(max_distance / exact) * (half - exact)).astype(np.int64)
    return out + np.where(n < exact, n, np.minimum(far, half - 1))


class MPNetEncoder(BertEncoder):
    """An MPNet encoder's forward pass (inference only) over a safetensors state dict."""

    names = (("attention.attn.q", "attention.attn.k", "attention.attn.v"), "attention.attn.o", "attention.LayerNorm")

    def __init__(self, weights: dict[str, np.ndarray], config: dict[str, Any], prepared: bool = False):
        super().__init__(weights, {**config, "position_embedding_type": "absolute"}, prepared)
        self.buckets = int(config.get("relative_attention_num_buckets", 32))
        # (buckets, heads) -> (heads, buckets): one gather per length gives (heads, L, L)
        self.relative = weights["relative"] if prepared else np.ascontiguousarray(
            np.asarray(weights["encoder.relative_attention_bias.weight"], _F).T)
        self._bias_cache: dict[int, np.ndarray] = {}

    def state(self) -> dict[str, np.ndarray]:
        return {**super().state(), "relative": self.relative}

    def _embed(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
        real = (ids != _PADDING_IDX).astype(np.int64)
        positions = np.cumsum(real, axis=1) * real + _PADDING_IDX
        return self.word[ids] + self.position[positions]

    def _position_bias(self, length: int) -> np.ndarray:
        bias = self._bias_cache.get(length)
        if bias is None:  # a handful of lengths recur all run; each is (12, L, L) floats
            bias = self.relative[:, relative_buckets(length, self.buckets)]
            if len(self._bias_cache) < 512:
                self._bias_cache[length] = bias
        return bias
