#!/usr/bin/env python3
"""Real-architecture ONNX models built with onnx.helper at test time (nothing downloaded).

Every weight comes from a NumPy Generator seeded by the model's name, so a model's bytes are the
same on every run. The graphs follow what exporters write: PyTorch's decomposed LayerNorm
(ReduceMean/Sub/Pow/Sqrt/Div) and GELU via Erf in the BERT layer, the LayerNormalization op and a
Where- or additive-mask causal attention in the GPT blocks, opsets 13 to 20; `cnn_opset7` uses the
attribute forms of opset 7 (Pad/Clip/ReduceMean/Split/Unsqueeze/Squeeze attributes, Dropout
ratio, BatchNormalization spatial).

    models.py [--out DIR] [NAME ...]    writes DIR/NAME.onnx (default target/onnx-models) and
                                        prints each model's opset, nodes and parameters.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import zlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_OUT = os.path.join(REPO, "target", "onnx-models")
F32 = TensorProto.FLOAT


class Graph:
    """Accumulates nodes and initializers; names are unique and readable."""

    def __init__(self, seed_name: str):
        self.rng = np.random.default_rng(zlib.crc32(seed_name.encode()))
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.counts: dict[str, int] = {}

    def fresh(self, base: str) -> str:
        n = self.counts.get(base, 0)
        self.counts[base] = n + 1
        return base if n == 0 else f"{base}_{n}"

    def const(self, name: str, value) -> str:
        name = self.fresh(name)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, name: str, shape, fan_in: int, gain: float = 1.0) -> str:
        std = gain / math.sqrt(fan_in)
        return self.const(name, (self.rng.standard_normal(shape) * std).astype(np.float32))

    def uniform(self, name: str, shape, lo: float, hi: float) -> str:
        return self.const(name, self.rng.uniform(lo, hi, shape).astype(np.float32))

    def op(self, op_type: str, inputs: list[str], name: str | None = None, n_out: int = 1, **attrs):
        node_name = self.fresh(name or op_type.lower())
        outs = [node_name] if n_out == 1 else [f"{node_name}:{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=node_name, **attrs))
        return outs[0] if n_out == 1 else outs

    def model(self, name, inputs, outputs, opset: int) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_operatorsetid("", opset)],
            producer_name="nrt-rs onnx-tests/models.py",
        )
        model.ir_version = min(model.ir_version, 8)  # readable by older runtimes too
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        onnx.checker.check_model(model, full_check=True)
        return model


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


# ---------------------------------------------------------------- MLP
def mlp(batch=8, sizes=(784, 512, 256, 10)):
    g = Graph("mlp")
    x = "input"
    for i in range(len(sizes) - 1):
        w = g.weight(f"fc{i}.weight", (sizes[i + 1], sizes[i]), sizes[i], gain=math.sqrt(2))
        b = g.uniform(f"fc{i}.bias", (sizes[i + 1],), -0.1, 0.1)
        x = g.op("Gemm", [x, w, b], name=f"fc{i}", transB=1)
        if i < len(sizes) - 2:
            x = g.op("Relu", [x], name=f"relu{i}")
    g.op("Softmax", [x], name="probs", axis=-1)
    return g.model("mlp", [vi("input", F32, [batch, sizes[0]])], [vi("probs", F32, [batch, sizes[-1]])], 13)


# ---------------------------------------------------------------- CNNs
def conv_bn(g: Graph, x, cin, cout, k, stride, name, relu=True, bn_gain=(0.5, 1.0)):
    w = g.weight(f"{name}.weight", (cout, cin, k, k), cin * k * k, gain=math.sqrt(2))
    y = g.op("Conv", [x, w], name=name, kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)
    scale = g.uniform(f"{name}.bn.weight", (cout,), *bn_gain)
    bias = g.uniform(f"{name}.bn.bias", (cout,), -0.1, 0.1)
    mean = g.uniform(f"{name}.bn.running_mean", (cout,), -0.1, 0.1)
    var = g.uniform(f"{name}.bn.running_var", (cout,), 0.5, 1.5)
    y = g.op("BatchNormalization", [y, scale, bias, mean, var], name=f"{name}.bn", epsilon=1e-5)
    return g.op("Relu", [y], name=f"{name}.relu") if relu else y


def resnet_cnn(batch=1, size=32, widths=(16, 32, 64), blocks=2, classes=10):
    """ResNet-style CNN with basic blocks (CIFAR layout), opset 13."""
    g = Graph("resnet_cnn")
    x = conv_bn(g, "input", 3, widths[0], 3, 1, "stem")
    x = g.op("MaxPool", [x], name="stem.pool", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    cin = widths[0]
    for s, w in enumerate(widths):
        for b in range(blocks):
            stride = 2 if (s > 0 and b == 0) else 1
            n = f"layer{s + 1}.{b}"
            y = conv_bn(g, x, cin, w, 3, stride, f"{n}.conv1")
            y = conv_bn(g, y, w, w, 3, 1, f"{n}.conv2", relu=False, bn_gain=(0.2, 0.5))
            sc = x if (stride == 1 and cin == w) else conv_bn(g, x, cin, w, 1, stride, f"{n}.downsample", relu=False)
            x = g.op("Relu", [g.op("Add", [y, sc], name=f"{n}.add")], name=f"{n}.relu")
            cin = w
    x = g.op("GlobalAveragePool", [x], name="avgpool")
    x = g.op("Flatten", [x], name="flatten", axis=1)
    wfc = g.weight("fc.weight", (classes, cin), cin)
    bfc = g.uniform("fc.bias", (classes,), -0.1, 0.1)
    g.op("Gemm", [x, wfc, bfc], name="logits", transB=1)
    return g.model("resnet_cnn", [vi("input", F32, [batch, 3, size, size])], [vi("logits", F32, [batch, classes])], 13)


def resnet50(batch=1, size=224, classes=1000):
    """ResNet-50 v1.5 (torchvision layout: bottlenecks [3, 4, 6, 3], stride on the 3x3), opset 13."""
    g = Graph("resnet50")
    x = conv_bn(g, "input", 3, 64, 7, 2, "conv1")
    x = g.op("MaxPool", [x], name="maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for s, (width, n_blocks) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3))):
        for b in range(n_blocks):
            stride = 2 if (s > 0 and b == 0) else 1
            n = f"layer{s + 1}.{b}"
            cout = width * 4
            y = conv_bn(g, x, cin, width, 1, 1, f"{n}.conv1")
            y = conv_bn(g, y, width, width, 3, stride, f"{n}.conv2")
            y = conv_bn(g, y, width, cout, 1, 1, f"{n}.conv3", relu=False, bn_gain=(0.1, 0.3))
            sc = x if b > 0 else conv_bn(g, x, cin, cout, 1, stride, f"{n}.downsample", relu=False)
            x = g.op("Relu", [g.op("Add", [y, sc], name=f"{n}.add")], name=f"{n}.relu")
            cin = cout
    x = g.op("GlobalAveragePool", [x], name="avgpool")
    x = g.op("Flatten", [x], name="flatten", axis=1)
    wfc = g.weight("fc.weight", (classes, cin), cin)
    bfc = g.uniform("fc.bias", (classes,), -0.1, 0.1)
    g.op("Gemm", [x, wfc, bfc], name="fc", transB=1)
    return g.model("resnet50", [vi("input", F32, [batch, 3, size, size])], [vi("fc", F32, [batch, classes])], 13)


def cnn_opset7(batch=1, size=32, classes=10):
    """A small CNN in opset 7's attribute forms, as exporters of 2018 wrote them."""
    g = Graph("cnn_opset7")
    x = g.op("Pad", ["input"], name="pad", pads=[0, 0, 1, 1, 0, 0, 1, 1], mode="constant", value=0.0)
    w = g.weight("conv1.weight", (16, 3, 3, 3), 27, gain=math.sqrt(2))
    b = g.uniform("conv1.bias", (16,), -0.1, 0.1)
    x = g.op("Conv", [x, w, b], name="conv1", kernel_shape=[3, 3])
    bn = [g.uniform("bn1.scale", (16,), 0.5, 1.0), g.uniform("bn1.bias", (16,), -0.1, 0.1)]
    bn += [g.uniform("bn1.mean", (16,), -0.1, 0.1), g.uniform("bn1.var", (16,), 0.5, 1.5)]
    x = g.op("BatchNormalization", [x] + bn, name="bn1", epsilon=1e-5, momentum=0.9, spatial=1)
    x = g.op("Clip", [x], name="relu6", min=0.0, max=6.0)
    x = g.op("MaxPool", [x], name="pool1", kernel_shape=[2, 2], strides=[2, 2])
    a, c = g.op("Split", [x], name="split", n_out=2, axis=1, split=[8, 8])
    wa = g.weight("conv_a.weight", (16, 8, 3, 3), 72, gain=math.sqrt(2))
    wc = g.weight("conv_c.weight", (16, 8, 3, 3), 72, gain=math.sqrt(2))
    a = g.op("Conv", [a, wa], name="conv_a", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    c = g.op("Conv", [c, wc], name="conv_c", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
    x = g.op("Concat", [a, c], name="concat", axis=1)
    x = g.op("LeakyRelu", [x], name="lrelu", alpha=0.1)
    x = g.op("ReduceMean", [x], name="gap", axes=[2, 3], keepdims=1)
    x = g.op("Squeeze", [x], name="squeeze", axes=[2, 3])
    x = g.op("Dropout", [x], name="dropout", ratio=0.5)
    w = g.weight("fc.weight", (32, classes), 32)
    bfc = g.uniform("fc.bias", (classes,), -0.1, 0.1)
    x = g.op("Gemm", [x, w, bfc], name="fc", alpha=1.0, beta=1.0)
    skip = g.op("Unsqueeze", [g.op("Sum", [x, x], name="sum")], name="unsqueeze", axes=[0])
    skip = g.op("Reshape", [skip, g.const("shape", np.array([batch, classes], np.int64))], name="reshape")
    x = g.op("Add", [x, skip], name="add")
    g.op("Softmax", [x], name="probs", axis=1)
    return g.model("cnn_opset7", [vi("input", F32, [batch, 3, size, size])], [vi("probs", F32, [batch, classes])], 7)


# ---------------------------------------------------------------- transformers
def layer_norm(g: Graph, x, hidden, name, decomposed: bool, eps=1e-12):
    gamma = g.uniform(f"{name}.weight", (hidden,), 0.8, 1.2)
    beta = g.uniform(f"{name}.bias", (hidden,), -0.1, 0.1)
    if not decomposed:
        return g.op("LayerNormalization", [x, gamma, beta], name=name, axis=-1, epsilon=eps)
    # torch.onnx (opset < 17) exports nn.LayerNorm as this chain; ReduceMean's axes attribute (< 18).
    mean = g.op("ReduceMean", [x], name=f"{name}/ReduceMean", axes=[-1], keepdims=1)
    d = g.op("Sub", [x, mean], name=f"{name}/Sub")
    sq = g.op("Pow", [d, g.const(f"{name}/two", np.float32(2.0))], name=f"{name}/Pow")
    var = g.op("ReduceMean", [sq], name=f"{name}/ReduceMean_1", axes=[-1], keepdims=1)
    std = g.op("Sqrt", [g.op("Add", [var, g.const(f"{name}/eps", np.float32(eps))], name=f"{name}/Add")], name=f"{name}/Sqrt")
    y = g.op("Div", [d, std], name=f"{name}/Div")
    return g.op("Add", [g.op("Mul", [y, gamma], name=f"{name}/Mul"), beta], name=f"{name}/Add_1")


def linear(g: Graph, x, din, dout, name, gain=1.0):
    w = g.weight(f"{name}.weight", (din, dout), din, gain)
    b = g.uniform(f"{name}.bias", (dout,), -0.05, 0.05)
    return g.op("Add", [g.op("MatMul", [x, w], name=f"{name}/MatMul"), b], name=f"{name}/Add")


def gelu_erf(g: Graph, x, name):
    # torch.onnx's GELU (opset < 20): x * 0.5 * (1 + erf(x / sqrt(2)))
    e = g.op("Erf", [g.op("Div", [x, g.const(f"{name}/sqrt2", np.float32(math.sqrt(2)))], name=f"{name}/Div")], name=f"{name}/Erf")
    e = g.op("Add", [e, g.const(f"{name}/one", np.float32(1.0))], name=f"{name}/Add")
    y = g.op("Mul", [x, e], name=f"{name}/Mul")
    return g.op("Mul", [y, g.const(f"{name}/half", np.float32(0.5))], name=f"{name}/Mul_1")


def gelu_tanh(g: Graph, x, name):
    # GPT-2's gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    x3 = g.op("Pow", [x, g.const(f"{name}/three", np.float32(3.0))], name=f"{name}/Pow")
    inner = g.op("Add", [x, g.op("Mul", [x3, g.const(f"{name}/c", np.float32(0.044715))], name=f"{name}/Mul")], name=f"{name}/Add")
    t = g.op("Tanh", [g.op("Mul", [inner, g.const(f"{name}/k", np.float32(math.sqrt(2 / math.pi)))], name=f"{name}/Mul_1")], name=f"{name}/Tanh")
    t = g.op("Add", [t, g.const(f"{name}/one", np.float32(1.0))], name=f"{name}/Add_1")
    return g.op("Mul", [g.op("Mul", [x, g.const(f"{name}/half", np.float32(0.5))], name=f"{name}/Mul_2"), t], name=f"{name}/Mul_3")


def heads(g: Graph, x, seq, n_heads, dh, name, perm):
    x = g.op("Reshape", [x, g.const(f"{name}/shape", np.array([1, seq, n_heads, dh], np.int64))], name=f"{name}/Reshape")
    return g.op("Transpose", [x], name=f"{name}/Transpose", perm=perm)


def bert_layer(seq=128, hidden=768, n_heads=12, ffn=3072, decomposed_ln=True, int_mask=False):
    """One BERT encoder layer as torch.onnx exports it (post-LN, additive attention mask).
    decomposed_ln: PyTorch's LayerNorm chain at opset 14, else the LayerNormalization op at 17.
    int_mask=False: the layer's own inputs (BertLayer gets the extended mask, float
    [1, 1, 1, seq], 0 or -10000); True: an int64 [1, seq] 0/1 mask turned into it in the graph
    (Cast, Sub, Mul, Unsqueeze), as BertModel exports it."""
    opset = 14 if decomposed_ln else 17
    g = Graph("bert_layer")
    dh = hidden // n_heads
    x = "hidden_states"
    if int_mask:
        m = g.op("Cast", ["attention_mask"], name="mask/Cast", to=F32)
        m = g.op("Sub", [g.const("mask/one", np.float32(1.0)), m], name="mask/Sub")
        m = g.op("Mul", [m, g.const("mask/neg", np.float32(-10000.0))], name="mask/Mul")
        m = g.op("Unsqueeze", [m, g.const("mask/axes", np.array([1, 2], np.int64))], name="mask/Unsqueeze")
    else:
        m = "attention_mask"
    q = heads(g, linear(g, x, hidden, hidden, "attention.self.query"), seq, n_heads, dh, "q", [0, 2, 1, 3])
    k = heads(g, linear(g, x, hidden, hidden, "attention.self.key"), seq, n_heads, dh, "k", [0, 2, 3, 1])
    v = heads(g, linear(g, x, hidden, hidden, "attention.self.value"), seq, n_heads, dh, "v", [0, 2, 1, 3])
    s = g.op("MatMul", [q, k], name="scores/MatMul")
    s = g.op("Div", [s, g.const("scores/scale", np.float32(math.sqrt(dh)))], name="scores/Div")
    s = g.op("Add", [s, m], name="scores/Add")
    p = g.op("Softmax", [s], name="probs", axis=-1)
    c = g.op("MatMul", [p, v], name="context/MatMul")
    c = g.op("Transpose", [c], name="context/Transpose", perm=[0, 2, 1, 3])
    c = g.op("Reshape", [c, g.const("context/shape", np.array([1, seq, hidden], np.int64))], name="context/Reshape")
    a = linear(g, c, hidden, hidden, "attention.output.dense")
    a = layer_norm(g, g.op("Add", [a, x], name="attention.output/Add"), hidden, "attention.output.LayerNorm", decomposed_ln)
    f = gelu_erf(g, linear(g, a, hidden, ffn, "intermediate.dense"), "intermediate/gelu")
    f = linear(g, f, ffn, hidden, "output.dense")
    layer_norm(g, g.op("Add", [f, a], name="output/Add"), hidden, "output.LayerNorm", decomposed_ln)
    g.nodes.append(helper.make_node("Identity", [g.nodes[-1].output[0]], ["last_hidden_state"], name="out"))
    mask_vi = vi("attention_mask", TensorProto.INT64, [1, seq]) if int_mask else vi("attention_mask", F32, [1, 1, 1, seq])
    inputs = [vi("hidden_states", F32, [1, seq, hidden]), mask_vi]
    return g.model("bert_layer", inputs, [vi("last_hidden_state", F32, [1, seq, hidden])], opset)


def gpt_block(seq=64, hidden=256, n_heads=8, vocab=1000, max_pos=256, mask="where", embed=False):
    """GPT-2-style: position embeddings (Gather of constant positions), one pre-LN decoder block
    with causal attention, final LayerNorm, LM head. embed=False: the input is the token
    embeddings, float [1, seq, hidden]; True: int64 input_ids [1, seq] looked up with Gather
    (tied LM head). mask='where': Where(bool mask sliced from a [max_pos, max_pos] buffer,
    scores, -inf), opset 17, tanh GELU decomposed; mask='add': an additive -inf triangle
    constant, opset 20 with the Gelu op (approximate='tanh')."""
    opset = 17 if mask == "where" else 20
    g = Graph(f"gpt_block_{mask}" + ("_embed" if embed else ""))
    dh = hidden // n_heads
    wte_np = (g.rng.standard_normal((vocab, hidden)) * 0.02).astype(np.float32)
    wpe = g.uniform("wpe.weight", (max_pos, hidden), -0.05, 0.05)
    pos = g.const("position_ids", np.arange(seq, dtype=np.int64)[None, :])
    tok = g.op("Gather", [g.const("wte.weight", wte_np), "input_ids"], name="wte", axis=0) if embed else "inputs_embeds"
    x = g.op("Add", [tok, g.op("Gather", [wpe, pos], name="wpe", axis=0)], name="embed/Add")
    h = layer_norm(g, x, hidden, "h.0.ln_1", decomposed=False, eps=1e-5)
    qkv = linear(g, h, hidden, 3 * hidden, "h.0.attn.c_attn")
    q, k, v = g.op("Split", [qkv, g.const("split", np.array([hidden] * 3, np.int64))], name="qkv/Split", n_out=3, axis=2)
    q = heads(g, q, seq, n_heads, dh, "q", [0, 2, 1, 3])
    k = heads(g, k, seq, n_heads, dh, "k", [0, 2, 3, 1])
    v = heads(g, v, seq, n_heads, dh, "v", [0, 2, 1, 3])
    s = g.op("MatMul", [q, k], name="scores/MatMul")
    s = g.op("Mul", [s, g.const("scores/scale", np.float32(1 / math.sqrt(dh)))], name="scores/Mul")
    if mask == "where":
        buf = g.const("bias", np.tril(np.ones((max_pos, max_pos), bool))[None, None])
        st = g.const("mask/starts", np.array([0, 0], np.int64))
        en = g.const("mask/ends", np.array([seq, seq], np.int64))
        ax = g.const("mask/axes", np.array([2, 3], np.int64))
        causal = g.op("Slice", [buf, st, en, ax], name="mask/Slice")
        s = g.op("Where", [causal, s, g.const("mask/neg_inf", np.float32(-np.inf))], name="mask/Where")
    else:
        tri = np.triu(np.full((seq, seq), -np.inf, np.float32), 1)
        s = g.op("Add", [s, g.const("mask/additive", tri)], name="mask/Add")
    p = g.op("Softmax", [s], name="probs", axis=-1)
    c = g.op("Transpose", [g.op("MatMul", [p, v], name="context/MatMul")], name="context/Transpose", perm=[0, 2, 1, 3])
    c = g.op("Reshape", [c, g.const("context/shape", np.array([1, seq, hidden], np.int64))], name="context/Reshape")
    x = g.op("Add", [x, linear(g, c, hidden, hidden, "h.0.attn.c_proj")], name="h.0/Add")
    h = layer_norm(g, x, hidden, "h.0.ln_2", decomposed=False, eps=1e-5)
    f = linear(g, h, hidden, 4 * hidden, "h.0.mlp.c_fc")
    f = gelu_tanh(g, f, "h.0.mlp.gelu") if mask == "where" else g.op("Gelu", [f], name="h.0.mlp.gelu", approximate="tanh")
    x = g.op("Add", [x, linear(g, f, 4 * hidden, hidden, "h.0.mlp.c_proj")], name="h.0/Add_1")
    x = layer_norm(g, x, hidden, "ln_f", decomposed=False, eps=1e-5)
    head = g.const("lm_head.weight", np.ascontiguousarray(wte_np.T))
    g.nodes.append(helper.make_node("MatMul", [x, head], ["logits"], name="lm_head"))
    inputs = [vi("input_ids", TensorProto.INT64, [1, seq])] if embed else [vi("inputs_embeds", F32, [1, seq, hidden])]
    return g.model(f"gpt_block_{mask}", inputs, [vi("logits", F32, [1, seq, vocab])], opset)


# ---------------------------------------------------------------- registry
@dataclass
class Spec:
    name: str
    build: Callable[[], onnx.ModelProto]
    # Longest reduction (dot product, pooling window or normalized axis) and how many reductions
    # are chained from the input to the output: compare.py's fp32/bf16 error floors scale with them.
    max_reduction: int
    depth: int
    about: str
    int_inputs: dict = field(default_factory=dict)  # name -> (low, high) for integer inputs


def registry(seq=128, hidden=768) -> dict[str, Spec]:
    heads_ = max(1, hidden // 64)
    specs = [
        Spec("mlp", mlp, 784, 3, "MLP 784-512-256-10, batch 8, Gemm/Relu/Softmax, opset 13"),
        Spec("resnet_cnn", resnet_cnn, 576, 14, "ResNet-style CNN, basic blocks 16/32/64, 32x32, opset 13"),
        Spec("cnn_opset7", cnn_opset7, 72, 4, "small CNN in opset-7 attribute forms"),
        Spec(
            "bert_layer",
            lambda: bert_layer(seq=seq, hidden=hidden, n_heads=heads_, ffn=4 * hidden),
            4 * hidden,
            8,
            f"BERT encoder layer seq {seq} hidden {hidden}, decomposed LayerNorm, Erf GELU, float extended mask, opset 14",
            {"attention_mask": "mask"},
        ),
        Spec(
            "bert_layer_ln17",
            lambda: bert_layer(seq=seq, hidden=hidden, n_heads=heads_, ffn=4 * hidden, decomposed_ln=False, int_mask=True),
            4 * hidden,
            8,
            f"BERT encoder layer seq {seq} hidden {hidden}, LayerNormalization op, int64 0/1 mask input, opset 17",
            {"attention_mask": "mask"},
        ),
        Spec("gpt_block", lambda: gpt_block(mask="where"), 1024, 9, "GPT-2-style block, causal Where mask, opset 17"),
        Spec("gpt_block_addmask", lambda: gpt_block(mask="add"), 1024, 9, "GPT-2-style block, additive -inf mask, Gelu op, opset 20"),
        Spec(
            "gpt_lm",
            lambda: gpt_block(mask="where", embed=True),
            1024,
            9,
            "GPT-2-style block with int64 input_ids (token Gather, tied LM head), Where mask, opset 17",
            {"input_ids": (0, 1000)},
        ),
        Spec("resnet50", resnet50, 4608, 54, "ResNet-50 v1.5, 224x224, batch 1, opset 13 (benchmark)"),
    ]
    return {s.name: s for s in specs}


def _source_key() -> str:
    """Models are cached under a digest of this file, so an edited builder never reuses stale ones."""
    with open(os.path.abspath(__file__), "rb") as f:
        return f"{zlib.crc32(f.read()):08x}"


def model_path(out_dir: str, name: str, seq=128, hidden=768) -> str:
    suffix = f"_s{seq}_h{hidden}" if name.startswith("bert") else ""
    return os.path.join(out_dir, _source_key(), f"{name}{suffix}.onnx")


def ensure(spec: Spec, out_dir: str, seq=128, hidden=768) -> str:
    """Builds the model into out_dir unless already there; returns its path."""
    path = model_path(out_dir, spec.name, seq, hidden)
    if not os.path.isfile(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        model = spec.build()
        tmp = f"{path}.tmp{os.getpid()}"
        onnx.save(model, tmp)
        os.replace(tmp, path)
    return path


def make_inputs(spec: Spec, model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs: normal floats; integer ranges per the spec; mask = ones with the last eighth 0."""
    rng = np.random.default_rng(seed)
    feeds = {}
    inits = {t.name for t in model.graph.initializer}
    for inp in model.graph.input:
        if inp.name in inits:
            continue
        shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        et = inp.type.tensor_type.elem_type
        dtype = helper.tensor_dtype_to_np_dtype(et)
        rule = spec.int_inputs.get(inp.name)
        if rule == "mask" and np.issubdtype(dtype, np.integer):
            arr = np.ones(shape, dtype)  # 1 = attend: the last eighth of the positions is padding
            arr[..., shape[-1] - shape[-1] // 8 :] = 0
        elif rule == "mask":
            arr = np.zeros(shape, dtype)  # the same mask, extended: 0 or -10000
            arr[..., shape[-1] - shape[-1] // 8 :] = -10000.0
        elif isinstance(rule, tuple):
            arr = rng.integers(rule[0], rule[1], shape).astype(dtype)
        else:
            arr = rng.standard_normal(shape).astype(dtype)
        feeds[inp.name] = arr
    return feeds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="*", help="models (default: all)")
    p.add_argument("--out", default=DEFAULT_OUT)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--hidden", type=int, default=768)
    a = p.parse_args()
    reg = registry(a.seq, a.hidden)
    names = a.names or list(reg)
    for n in names:
        if n not in reg:
            print(f"error: unknown model {n!r}; known: {', '.join(reg)}", file=sys.stderr)
            return 2
    for n in names:
        path = ensure(reg[n], a.out, a.seq, a.hidden)
        m = onnx.load(path)
        params = sum(int(np.prod(t.dims)) for t in m.graph.initializer)
        ops = sorted({nd.op_type for nd in m.graph.node})
        print(f"{n}: {path} opset {m.opset_import[0].version}, {len(m.graph.node)} nodes, {params / 1e6:.2f} M params; ops: {' '.join(ops)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
