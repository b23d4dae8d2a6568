"""An encoder's layer stack run by ONNX Runtime: the same arithmetic as ``bert.BertEncoder``'s
numpy loop, in one native call per forward pass (DESIGN §8).

Why: a PTKB turn encodes one short utterance, a dozen word pieces.  At that size numpy
spends its time between BLAS calls (about 120 small operations per forward pass, each a
Python call and a fresh temporary) and in multi-pass GELU and LayerNorm; ONNX Runtime fuses
them and runs MLAS kernels.  Measured on one thread here: all-mpnet-base-v2, one utterance,
~66 ms of CPU in numpy, ~40 ms here, vectors within 3e-7.  Large padded batches (an index
build) are FLOP-bound and gain nothing, so ``BertEncoder`` sends only small chunks here
(``SMALL_TOKENS``) and keeps numpy's multi-threaded BLAS for the rest.

The graph is built from the weights ``BertEncoder`` already holds (no export, nothing written):
inputs are the embeddings after their LayerNorm and the additive attention bias (the
padding mask, plus MPNet's relative-position bias), both computed by ``BertEncoder``; the
weights are handed to ONNX Runtime as OrtValues over the same arrays, so memory-mapped
weights stay shared between processes.  ``SIMLOOP_EMBED_RUNTIME=numpy`` turns it off.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..settings import embed_runtime

__all__ = ["OnnxLayers", "onnx_layers", "SMALL_TOKENS"]

_F = np.float32
SMALL_TOKENS = 1024  # chunks up to this many (padded) tokens go to ONNX Runtime
_OPSET = 17  # LayerNormalization is a standard op from 17 on


def onnx_layers(layers: list[dict[str, Any]], heads: int, eps: float, threads: int) -> OnnxLayers | None:
    """The layer stack as an ONNX Runtime session, or None when ``SIMLOOP_EMBED_RUNTIME=numpy``
    (``BertEncoder`` then runs everything in numpy: the reference the tests compare against)."""
    if embed_runtime() == "numpy":
        return None
    return OnnxLayers(layers, heads, eps, threads)


class OnnxLayers:
    """``__call__(x, bias)``: (batch, length, hidden) after the embeddings' LayerNorm and a bias
    broadcastable to (batch, heads, length, length) -> the last hidden states."""

    def __init__(self, layers: list[dict[str, Any]], heads: int, eps: float, threads: int):
        import onnxruntime as ort

        graph, weights = _graph(layers, heads, eps)
        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = max(1, threads)
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3  # warnings about the graph's shapes are noise here
        # The OrtValues wrap the arrays in place; both must outlive the session.
        self._values = {name: ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(w, _F))
                        for name, w in weights.items()}
        options.add_external_initializers(list(self._values), list(self._values.values()))
        self._session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])

    def __call__(self, x: np.ndarray, bias: np.ndarray) -> np.ndarray:
        return self._session.run(None, {"x": np.ascontiguousarray(x, _F), "bias": np.ascontiguousarray(bias, _F)})[0]


def _graph(layers: list[dict[str, Any]], heads: int, eps: float) -> tuple[bytes, dict[str, np.ndarray]]:
    """The serialised graph (weights as external initializers, handed over by
    ``add_external_initializers``) and the weights by name."""
    from onnx import TensorProto, helper

    hidden = layers[0]["out"][0].shape[1]
    b = _Builder()
    shape_qkv = b.const("shape_qkv", np.array([0, 0, 3, heads, hidden // heads], np.int64))
    axis0 = b.const("axis0", np.array([0], np.int64))
    shape_hidden = b.const("shape_hidden", np.array([0, 0, hidden], np.int64))
    scale = b.const("scale", np.array(1 / np.sqrt(hidden // heads), _F))
    half, one, root_half = (b.const(n, np.array(v, _F)) for n, v in
                            (("half", 0.5), ("one", 1.0), ("root_half", 0.7071067811865476)))
    x = "x"
    for i, layer in enumerate(layers):
        # q, k, v from one product, as numpy does: (batch, length, 3, heads, size) -> 3 x (batch, heads, length, size)
        qkv = b.op("Reshape", b.dense(x, *b.pair(f"l{i}.qkv", layer["qkv"])), shape_qkv)
        heads_first = b.op("Transpose", qkv, perm=[2, 0, 3, 1, 4])
        q, k, v = (b.op("Squeeze", t, axis0) for t in b.ops("Split", 3, heads_first, axis=0))
        k = b.op("Transpose", k, perm=[0, 1, 3, 2])
        scores = b.op("Add", b.op("Mul", b.op("MatMul", q, k), scale), "bias")
        context = b.op("MatMul", b.op("Softmax", scores, axis=-1), v)
        context = b.op("Reshape", b.op("Transpose", context, perm=[0, 2, 1, 3]), shape_hidden)
        attended = b.op("Add", b.dense(context, *b.pair(f"l{i}.out", layer["out"])), x)
        x = b.norm(attended, *b.pair(f"l{i}.norm1", layer["norm1"]), eps)
        up = b.dense(x, *b.pair(f"l{i}.up", layer["up"]))
        # BERT's exact GELU, 0.5 x (1 + erf(x / sqrt 2)), as numpy computes it
        gelu = b.op("Mul", b.op("Mul", up, half), b.op("Add", b.op("Erf", b.op("Mul", up, root_half)), one))
        fed = b.op("Add", b.dense(gelu, *b.pair(f"l{i}.down", layer["down"])), x)
        x = b.norm(fed, *b.pair(f"l{i}.norm2", layer["norm2"]), eps)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "length", hidden]),
              helper.make_tensor_value_info("bias", TensorProto.FLOAT, ["batch", "bias_heads", "bias_rows", "length"])]
    graph = helper.make_graph(b.nodes, "encoder_layers", inputs,
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", "length", hidden])],
                              b.consts + [_external(n, a) for n, a in b.weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)])
    model.ir_version = 8  # what every onnxruntime since 1.10 reads
    return model.SerializeToString(), b.weights


def _external(name: str, array: np.ndarray) -> Any:
    """An initializer whose data lives outside the graph: the session takes it from memory
    (``add_external_initializers``), so the weights are never copied into the graph."""
    from onnx import TensorProto

    tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=list(array.shape),
                         data_location=TensorProto.EXTERNAL)
    for key, value in (("location", "in-memory"), ("offset", "0"), ("length", str(array.nbytes))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


class _Builder:
    """Nodes, small constants and (by name) the weight arrays of the graph being built."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.consts: list[Any] = []
        self.weights: dict[str, np.ndarray] = {}

    def op(self, kind: str, *inputs: str, **attrs: Any) -> str:
        return self.ops(kind, 1, *inputs, **attrs)[0]

    def ops(self, kind: str, outputs: int, *inputs: str, **attrs: Any) -> list[str]:
        from onnx import helper

        name = f"n{len(self.nodes)}"
        out = [f"{name}.{j}" for j in range(outputs)]
        self.nodes.append(helper.make_node(kind, list(inputs), out, name=name, **attrs))
        return out

    def const(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.consts.append(numpy_helper.from_array(value, name))
        return name

    def weight(self, name: str, array: np.ndarray) -> str:
        self.weights[name] = array
        return name

    def pair(self, name: str, arrays: tuple[np.ndarray, np.ndarray]) -> tuple[str, str]:
        return self.weight(name + ".w", arrays[0]), self.weight(name + ".b", arrays[1])

    def dense(self, x: str, w: str, bias: str) -> str:
        return self.op("Add", self.op("MatMul", x, w), bias)

    def norm(self, x: str, gain: str, bias: str, eps: float) -> str:
        return self.op("LayerNormalization", x, gain, bias, axis=-1, epsilon=eps)
