"""A BERT encoder's forward pass in numpy (inference only), as transformers computes it;
short texts' layers run in ONNX Runtime (``onnx_layers.py``).  ``minilm.py`` wraps it into a
sentence model (tokenizer, pooling, normalisation); ``mpnet.py`` derives MPNet from it.

The model is small (all-MiniLM-L6-v2: 6 layers, 384 wide), so its forward pass is a few
matrix products per layer, done with numpy's BLAS on the weights of the model's
``model.safetensors``.  Chunks of up to ``onnx_layers.SMALL_TOKENS`` word pieces (a turn's
utterance, a handful of statements) run their layer stack in ONNX Runtime instead (same
arithmetic, vectors within 3e-7, less CPU at that size); numpy stays the reference and runs
large batches, where the two are alike and numpy's BLAS can use every core.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..settings import embed_threads
from .onnx_layers import SMALL_TOKENS, OnnxLayers, onnx_layers

__all__ = ["BertEncoder", "Layer"]

_F = np.float32
# Abramowitz & Stegun 7.1.26: erf within 1.5e-7 everywhere, below float32's resolution at
# the activations' scale (numpy has no erf, and scipy.special costs 0.7 s of CPU to import).
_P = _F(0.3275911)
_A = tuple(_F(a) for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592))
_TOKENS = 2048  # tokens per forward chunk
_SCORES = 1 << 20  # attention scores per chunk
_GELU_ROWS = 256  # rows per GELU block


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's "gelu", the exact form 0.5 x (1 + erf(x / sqrt 2)), into ``x``'s own buffer,
    256 rows at a time: its ten passes then stay in the CPU's cache (2048 x 1536 values:
    42 ms at once, 16 ms in blocks of 256 rows; fresh temporaries of the full size cost
    more in page faults than the arithmetic)."""
    for i in range(0, len(x), _GELU_ROWS):
        _gelu_rows(x[i:i + _GELU_ROWS])
    return x


def _gelu_rows(x: np.ndarray) -> None:
    z = x * _F(0.7071067811865476)
    e = np.abs(z)
    t = e * _P
    t += 1
    np.reciprocal(t, out=t)
    poly = t * _A[0]
    for a in _A[1:]:
        poly += a
        poly *= t
    np.multiply(e, e, out=e)
    np.negative(e, out=e)
    np.exp(e, out=e)
    poly *= e  # 1 - erf(|z|)
    np.subtract(1, poly, out=poly)
    np.copysign(poly, z, out=poly)  # erf(z)
    poly += 1
    x *= poly
    x *= _F(0.5)


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(-1, keepdims=True)
    return centred / np.sqrt(var + _F(eps)) * w + b


_LAYER_KEYS = ("qkv", "out", "norm1", "up", "down", "norm2")
# One layer's weights in the forward pass's layout: (matrix or gain, bias) by _LAYER_KEYS.
Layer = dict[str, tuple[np.ndarray, np.ndarray]]


class BertEncoder:
    """A BERT encoder's forward pass (inference only) over a safetensors state dict."""

    # Weight names inside a layer: (q, k, v), attention output, its LayerNorm.
    names = (("attention.self.query", "attention.self.key", "attention.self.value"), "attention.output.dense",
             "attention.output.LayerNorm")

    def __init__(self, weights: dict[str, np.ndarray], config: dict[str, Any], prepared: bool = False):
        """``weights``: the model's state dict, or (``prepared``) what ``state()`` returned."""
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config["layer_norm_eps"])
        if config.get("hidden_act") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("not a plain BERT encoder (gelu activation, absolute positions)")
        n = int(config["num_hidden_layers"])
        self._onnx_built = False  # the ONNX Runtime stack is built on first use: _onnx_layers then
        self._onnx_layers: OnnxLayers | None = None
        self._onnx_lock = threading.Lock()
        if prepared:
            self._from_state(weights, n)
            return
        w = {k: np.ascontiguousarray(v, dtype=_F) for k, v in weights.items() if v.dtype != np.int64}
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w.get("embeddings.token_type_embeddings.weight")
        self.norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = [self._layer(w, f"encoder.layer.{i}.") for i in range(n)]

    def state(self) -> dict[str, np.ndarray]:
        """Every array the forward pass reads, in its layout, by name (``prepared=True``
        takes it back: saved as .npy files and memory-mapped, a model loads without copying)."""
        out = {"word": self.word, "position": self.position, "norm.0": self.norm[0], "norm.1": self.norm[1]}
        if self.token_type is not None:
            out["token_type"] = self.token_type
        for i, layer in enumerate(self.layers):
            for key in _LAYER_KEYS:
                out[f"layer{i}.{key}.0"], out[f"layer{i}.{key}.1"] = layer[key]
        return out

    def _from_state(self, s: dict[str, np.ndarray], n: int) -> None:
        self.word, self.position, self.token_type = s["word"], s["position"], s.get("token_type")
        self.norm = (s["norm.0"], s["norm.1"])
        self.layers = [{key: (s[f"layer{i}.{key}.0"], s[f"layer{i}.{key}.1"]) for key in _LAYER_KEYS} for i in range(n)]

    def _layer(self, w: dict[str, np.ndarray], p: str) -> Layer:
        # (in, out) copies of the stored (out, in) matrices for x @ W.  A transposed view
        # would spare the copy (~1 s of MPNet's 2.3 s load) but costs 20-30% more per product
        # at the few rows a turn's utterance has (measured on the numpy path, one BLAS thread):
        # per turn, not once.
        def dense(name: str) -> tuple[np.ndarray, np.ndarray]:
            return np.ascontiguousarray(w[p + name + ".weight"].T), w[p + name + ".bias"]

        qkv_names, out_name, norm_name = self.names
        q, k, v = (dense(n) for n in qkv_names)
        return {"qkv": (np.hstack([q[0], k[0], v[0]]), np.concatenate([q[1], k[1], v[1]])),
                "out": dense(out_name),
                "norm1": (w[p + norm_name + ".weight"], w[p + norm_name + ".bias"]),
                "up": dense("intermediate.dense"), "down": dense("output.dense"),
                "norm2": (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])}

    def _onnx(self) -> OnnxLayers | None:
        """The layer stack in ONNX Runtime (``onnx_layers.py``: small chunks only), built on
        first use; None when ``SIMLOOP_EMBED_RUNTIME=numpy`` turns it off."""
        with self._onnx_lock:
            if not self._onnx_built:
                self._onnx_layers = onnx_layers(self.layers, self.heads, self.eps, embed_threads())
                self._onnx_built = True
            return self._onnx_layers

    def _embed(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
        """(batch, length, hidden) input vectors, before the embeddings' LayerNorm."""
        x = self.word[ids] + self.position[:ids.shape[1]]
        return x if self.token_type is None else x + self.token_type[types]

    def _position_bias(self, length: int) -> np.ndarray | None:
        """(heads, length, length) added to every layer's attention scores (none in BERT)."""
        return None

    def __call__(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
        """(batch, length) ids, mask, token types -> (batch, length, hidden) last hidden states."""
        # A few thousand tokens at a time: a batch of 64 passages of 256 word pieces would
        # hold 200 MB of attention scores at once, and temporaries that size fault in every page.
        step = max(1, _TOKENS // ids.shape[1])
        return np.concatenate([self._forward(ids[i:i + step], mask[i:i + step], types[i:i + step])
                               for i in range(0, len(ids), step)])

    def _forward(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
        batch, length = ids.shape
        x = _layer_norm(self._embed(ids, mask, types), *self.norm, self.eps)
        # Padding keys get the most negative float added to their scores, as transformers does.
        bias = ((1 - mask.astype(_F)) * np.finfo(_F).min)[:, None, None, :]
        position = self._position_bias(length)
        if position is not None:  # (batch, heads, length, length); saturates at the float's minimum
            bias = bias + position[None]
        runner = self._onnx() if batch * length <= SMALL_TOKENS else None
        if runner is not None:
            return runner(x, bias)
        x = x.reshape(batch * length, -1)
        for layer in self.layers:
            x = self._block(x, layer, bias, batch, length)
        return x.reshape(batch, length, -1)

    def _block(self, x: np.ndarray, layer: Layer, bias: np.ndarray, batch: int, length: int) -> np.ndarray:
        hidden = x.shape[1]
        w, b = layer["qkv"]
        # Contiguous (3, batch, heads, length, size): numpy's stacked matmul calls BLAS only on
        # contiguous slices (strided ones took 2.7x as long, measured).
        qkv = np.ascontiguousarray((x @ w + b).reshape(batch, length, 3, self.heads, -1).transpose(2, 0, 3, 1, 4))
        # Attention a few sequences at a time, so that the scores stay in cache (~1M values).
        step = max(1, _SCORES // (self.heads * length * length))
        context = np.concatenate([_attention(qkv[:, i:i + step], bias[i:i + step]) for i in range(0, batch, step)])
        context = context.transpose(0, 2, 1, 3).reshape(batch * length, hidden)
        x = _layer_norm(context @ layer["out"][0] + layer["out"][1] + x, *layer["norm1"], self.eps)
        up = _gelu(x @ layer["up"][0] + layer["up"][1])
        return _layer_norm(up @ layer["down"][0] + layer["down"][1] + x, *layer["norm2"], self.eps)


def _attention(qkv: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Scaled dot-product attention of (3, batch, heads, length, size) -> (batch, heads, length, size)."""
    q, k, v = qkv
    scores = q @ np.ascontiguousarray(k.transpose(0, 1, 3, 2))
    scores *= _F(1 / np.sqrt(q.shape[-1]))
    scores += bias
    scores -= scores.max(-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(-1, keepdims=True)
    return scores @ v
