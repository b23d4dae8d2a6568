"""Sentence-transformers models run the way sentence-transformers runs them, in numpy (short
texts' layers in ONNX Runtime, ``onnx_layers.py``): no torch, no transformers.
all-MiniLM-L6-v2 (BERT, ``bert.py``) for everything; all-mpnet-base-v2 (MPNet, ``mpnet.py``)
for PTKB ranking.

Importing torch and transformers cost 7-8.5 s of CPU per process here (measured), more
than the model ever does in a short run, and every offline run, index build and test
subprocess paid it; numpy, tokenizers and safetensors import in 0.3 s.

The model is the three modules its ``modules.json`` lists - the encoder, mean pooling
over the attention mask, L2 normalisation - over the same tokenizer (the model folder's
``tokenizer.json``, cut at ``max_seq_length`` word pieces, padded to the batch's longest).
``tests/test_minilm.py`` checks the vectors against sentence-transformers' own.

BLAS threads: one by default (``blas_threads``), as a run shares 2 cores between the event
loop, the JVM and other processes, and idle BLAS workers spin; an index build uses all.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..files import atomic_folder
from ..settings import embed_threads
from .bert import BertEncoder
from .mpnet import MPNetEncoder

__all__ = ["MiniLM", "SentenceModel", "blas_threads"]

_F = np.float32


def blas_threads(n: int | None = None) -> Any:
    """Limit numpy's BLAS to ``n`` threads (default ``settings.embed_threads()``); use
    as a context manager to put the old limit back afterwards."""
    from threadpoolctl import threadpool_limits

    if n is None:
        n = embed_threads()
    return threadpool_limits(limits=max(1, n), user_api="blas")


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

    def encode(self, texts: Sequence[str], batch_size: int = 64, normalize_embeddings: bool = True,
               convert_to_numpy: bool = True) -> np.ndarray:
        """Float32 rows, unit length whatever ``normalize_embeddings`` says (see ``_batch``);
        the keywords are sentence-transformers', so either model serves the same callers.
        Long jobs count their own progress (``vectors.py``): nothing is shown from here."""
        out = np.empty((len(texts), self.dim), dtype=_F)
        # Longest first, as sentence-transformers batches: a batch is padded to its longest text.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(order), batch_size):
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


def _load_encoder(path: Path, cls: type[BertEncoder], config: dict[str, Any], prepared: Path | None) -> BertEncoder:
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
    try:
        with atomic_folder(folder) as tmp:
            for name, array in state.items():
                np.save(tmp / f"{name}.npy", np.ascontiguousarray(array))
            (tmp / ".ready").write_text("")
    except OSError:  # a read-only cache or a lost race: this process just loaded it anyway
        pass


def _encoder(model_type: str) -> type[BertEncoder]:
    if model_type == "bert":
        return BertEncoder
    if model_type == "mpnet":
        return MPNetEncoder
    raise ValueError(f"unsupported sentence model type {model_type!r} (bert, mpnet)")
