#!/usr/bin/env python3
"""Generates the small ONNX fixtures of crates/memplan-onnx/tests/data/ops/ and their
onnxruntime references.

Each fixture is a small model of the kind real deployments hold: quantized by
onnxruntime's own quantizer (QDQ and QOperator formats, dynamic quantization), fused
transformer operators as onnxruntime.transformers writes them, recurrent layers,
detection post-processing, tf-style "same" padding and resize shape sub-graphs, ONNX local
functions and control flow. For every fixture the script runs onnxruntime with every
intermediate value exposed as an output and writes `<name>.ref.json`:

    {"nodes": N, "tensors": {name: {"dtype": "FLOAT", "shape": [..], "bytes": n,
                                    "start": s, "end": e, "bounded": bool}}}

`shape` is what onnxruntime produced (for data-dependent outputs, `bounded` is true and the
shape is the actual one, which memplan's upper bound must cover). `start`/`end` are the
half-open lifetime in steps of the file's node order (step 0: graph inputs; node i runs at
step i + 1; a tensor lives to its last reader; graph outputs to the last step), the rules of
../shared/models/README.md. Models with local functions or control flow are referenced on
their inlined / flattened form as memplan numbers it (see doc/onnx.md). A control-flow
node's bodies are steps around it (`expand`, the rules of doc/onnx.md written again here):
the node, the body nodes `<node>/<attribute>/<inner>`, the closing step `<node>/end`; the
body values' shapes come from onnxruntime running each body alone on the values of its
first iteration.

Float initialisers of 1 KiB or more are written as external data whose file is then
deleted, like the shared models: the fixtures stay small.

    python3 -m venv .venv-onnx && .venv-onnx/bin/pip install onnx onnxruntime numpy sympy
    .venv-onnx/bin/python scripts/onnx_fixtures.py
"""

import json
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(__file__), "..", "crates", "memplan-onnx", "tests", "data", "ops")
RNG = np.random.default_rng(0)
MS = "com.microsoft"

DTYPE_BITS = {
    TensorProto.FLOAT: 32, TensorProto.UINT8: 8, TensorProto.INT8: 8, TensorProto.UINT16: 16,
    TensorProto.INT16: 16, TensorProto.INT32: 32, TensorProto.INT64: 64, TensorProto.BOOL: 8,
    TensorProto.FLOAT16: 16, TensorProto.DOUBLE: 64, TensorProto.UINT32: 32,
    TensorProto.UINT64: 64, TensorProto.BFLOAT16: 16, TensorProto.UINT4: 4, TensorProto.INT4: 4,
}
NP_TO_ONNX = {
    np.dtype("float32"): TensorProto.FLOAT, np.dtype("uint8"): TensorProto.UINT8,
    np.dtype("int8"): TensorProto.INT8, np.dtype("int32"): TensorProto.INT32,
    np.dtype("int64"): TensorProto.INT64, np.dtype("bool"): TensorProto.BOOL,
    np.dtype("float16"): TensorProto.FLOAT16, np.dtype("float64"): TensorProto.DOUBLE,
    np.dtype("uint16"): TensorProto.UINT16, np.dtype("int16"): TensorProto.INT16,
}


def nbytes(dtype, shape):
    n = int(np.prod(shape)) if shape else 1
    return (n * DTYPE_BITS[dtype] + 7) // 8


def w(name, shape, dtype=np.float32, low=-1.0, high=1.0):
    a = RNG.uniform(low, high, size=shape).astype(dtype)
    return numpy_helper.from_array(a, name)


def ints(name, values, dtype=np.int64):
    return numpy_helper.from_array(np.array(values, dtype=dtype), name)


def model(nodes, inputs, outputs, inits=(), opset=17, ms=False, functions=(), extra_opsets=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    ops = [helper.make_opsetid("", opset)]
    if ms:
        ops.append(helper.make_opsetid(MS, 1))
    ops += list(extra_opsets)
    m = helper.make_model(g, opset_imports=ops, functions=list(functions))
    m.ir_version = 10
    return m


def feeds_for(m, feeds):
    if feeds is not None:
        return feeds
    out = {}
    inits = {i.name for i in m.graph.initializer}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value for d in tt.shape.dim]
        np_t = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if np.issubdtype(np_t, np.floating):
            out[vi.name] = RNG.uniform(-1, 1, size=shape).astype(np_t)
        elif np_t == np.bool_:
            out[vi.name] = RNG.integers(0, 2, size=shape).astype(np_t)
        else:
            out[vi.name] = RNG.integers(0, 4, size=shape).astype(np_t)
    return out


def run_all(m, feeds, skip=()):
    """Every node output's dtype and shape, by running onnxruntime on a copy that exposes
    them all as graph outputs (except `skip`: INT4 values, which numpy cannot hold)."""
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    have = set(skip)
    for o in list(m2.graph.output):
        if o.name in skip:
            m2.graph.output.remove(o)
    have |= {o.name for o in m2.graph.output}
    for n in m2.graph.node:
        if n.op_type == "Constant":
            continue
        for o in n.output:
            if o and o not in have:
                m2.graph.output.append(helper.ValueInfoProto(name=o))
                have.add(o)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m2.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    vals = sess.run(names, feeds)
    res = {}
    for name, v in zip(names, vals):
        v = np.asarray(v)
        res[name] = (NP_TO_ONNX[v.dtype], list(v.shape))
    return res


def outer_reads(g):
    """Names a sub-graph reads without defining them (nested sub-graphs included): they are
    read by the node that holds the sub-graph."""
    defined = {v.name for v in g.input} | {t.name for t in g.initializer}
    for n in g.node:
        defined |= set(n.output)
    out = []
    for n in g.node:
        names = list(n.input)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                names += outer_reads(a.g)
        out += [x for x in names if x and x not in defined and x not in out]
    out += [o.name for o in g.output if o.name not in defined and o.name not in out]
    return out


def lifetimes(g):
    steps = len(g.node)
    start, end = {}, {}
    for vi in g.input:
        start[vi.name] = 0
        end[vi.name] = 1
    for i, n in enumerate(g.node):
        for o in n.output:
            if o:
                start[o] = i + 1
                end[o] = i + 2
        reads = list(n.input)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                reads += outer_reads(a.g)
        for x in reads:
            if x in start:
                end[x] = max(end[x], i + 2)
    for o in g.output:
        end[o.name] = steps + 1
    return start, end


def run_values(m, feeds):
    """Every value of `m` (graph inputs, initialisers, node outputs) by name, from
    onnxruntime running it with every node output exposed."""
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    del m2.graph.output[:]
    for n in m2.graph.node:
        for o in n.output:
            if o:
                m2.graph.output.append(helper.ValueInfoProto(name=o))
    env = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    env.update(feeds)
    if not m2.graph.output:
        return env
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m2.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    env.update({k: np.asarray(v) for k, v in zip(names, sess.run(names, feeds))})
    return env


def expand(n, path, env, opset, known, rename, implicit):
    """The steps memplan makes of control-flow node `n` (graph name `path`), as
    (name, reads, writes) by graph names, and the (dtype, shape) of every value its bodies
    hold, named `<path>/<attribute>/<value>`. Each body runs alone in onnxruntime (its
    formal inputs and the outer values it reads as graph inputs) on its first iteration's
    values from `env`; nested bodies recurse. An If whose condition `known(name)` says is a
    constant lays out its taken branch only, like memplan. `rename` maps a name in scope to
    its graph name; `implicit` are the outer values the bodies read (graph names)."""
    graphs = {a.name: a.g for a in n.attribute if a.type == onnx.AttributeProto.GRAPH}
    own = [rename(x) if x else "" for x in n.input]
    outs = [rename(o) for o in n.output if o]
    if n.op_type == "If":
        cond = n.input[0]
        names = [("then_branch" if bool(env[cond]) else "else_branch")] if known(cond) else [
            "then_branch", "else_branch"]
        runs = [(k, graphs[k], []) for k in names]
    elif n.op_type == "Loop":
        vals = [np.array(0, np.int64), np.array(True)] + [env[x] for x in n.input[2:]]
        runs = [("body", graphs["body"], vals)]
    else:  # Scan
        a = {x.name: helper.get_attribute_value(x) for x in n.attribute}
        m = a["num_scan_inputs"]
        states, scans = n.input[:len(n.input) - m], n.input[len(n.input) - m:]
        axes = list(a.get("scan_input_axes", [])) or [0] * m
        vals = [env[x] for x in states] + [np.take(env[x], 0, axis=ax) for x, ax in zip(scans, axes)]
        runs = [("body", graphs["body"], vals)]
    rows, body_steps, formals, body_outs = {}, [], [], []
    for attr, g, vals in runs:
        scope = f"{path}/{attr}"
        local = {vi.name for vi in g.input} | {t.name for t in g.initializer}
        for bn in g.node:
            local |= {o for o in bn.output if o}
        inner_rename = (lambda scope, local: lambda x: f"{scope}/{x}" if x in local else rename(x))(
            scope, local)
        feeds = {vi.name: v for vi, v in zip(g.input, vals)}
        reads = list(dict.fromkeys(outer_reads(g)))
        inputs = [helper.make_tensor_value_info(k, NP_TO_ONNX[v.dtype], list(v.shape))
                  for k, v in list(feeds.items()) + [(r, env[r]) for r in reads]]
        got = run_values(model(list(g.node), inputs, [], list(g.initializer), opset=opset),
                         {**feeds, **{r: env[r] for r in reads}})
        for k, v in feeds.items():
            rows[f"{scope}/{k}"] = (NP_TO_ONNX[v.dtype], list(v.shape))
            formals.append(f"{scope}/{k}")
        inner_env = {**env, **got}
        for i, bn in enumerate(g.node):
            label = f"{scope}/{bn.name or f'node_{i}'}"
            if any(x.type == onnx.AttributeProto.GRAPH for x in bn.attribute):
                inner_reads = []
                for x in bn.attribute:
                    if x.type == onnx.AttributeProto.GRAPH:
                        inner_reads += outer_reads(x.g)
                inner_reads = [inner_rename(r) for r in dict.fromkeys(inner_reads)]
                steps, inner_rows = expand(bn, label, inner_env, opset, lambda _: False,
                                           inner_rename, inner_reads)
                body_steps += steps
                rows.update(inner_rows)
            else:
                writes = [] if bn.op_type == "Constant" else [inner_rename(o) for o in bn.output if o]
                body_steps.append((label, [inner_rename(x) for x in bn.input if x], writes))
            for o in bn.output:
                if o and bn.op_type != "Constant":
                    rows[f"{scope}/{o}"] = (NP_TO_ONNX[got[o].dtype], list(got[o].shape))
        body_outs += [inner_rename(o.name) for o in g.output]
    # The node writes its outputs and the formal inputs; the closing step reads the body
    # outputs and the node's outputs, and for a Loop or Scan what every iteration reads
    # again: the formal inputs, the outer values the body reads, (Scan) the scan inputs.
    end_reads = list(body_outs)
    if n.op_type in ("Loop", "Scan"):
        end_reads += formals + implicit
    if n.op_type == "Scan":
        end_reads += [x for x in own if x]
    steps = [(path, [x for x in own if x] + implicit, outs + formals)] + body_steps + [
        (f"{path}/end", end_reads + outs, [])]
    return steps, rows


def flat_steps(m, env, opset, known):
    """The file's nodes with every control-flow node expanded (`expand`), as
    (name, reads, writes), and the rows of the values the bodies add."""
    steps, rows = [], {}
    for i, n in enumerate(m.graph.node):
        label = n.name or f"node_{i}"
        if any(a.type == onnx.AttributeProto.GRAPH for a in n.attribute):
            implicit = []
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    implicit += outer_reads(a.g)
            s, r = expand(n, label, env, opset, known, lambda x: x, list(dict.fromkeys(implicit)))
            steps += s
            rows.update(r)
        else:
            writes = [] if n.op_type == "Constant" else [o for o in n.output if o]
            steps.append((label, [x for x in n.input if x], writes))
    return steps, rows


def step_lifetimes(steps, inputs, outputs):
    """`lifetimes` over explicit (name, reads, writes) steps."""
    start, end = {}, {}
    for x in inputs:
        start[x], end[x] = 0, 1
    for i, (_, reads, writes) in enumerate(steps):
        for o in writes:
            start[o], end[o] = i + 1, i + 2
        for x in reads:
            if x in start:
                end[x] = max(end[x], i + 2)
    for o in outputs:
        end[o] = len(steps) + 1
    return start, end


def save(name, m, feeds=None, bounded=(), ort_model=None, overrides=None, ref_model=None):
    """Writes `name.onnx` (stripped) and `name.ref.json`. `ort_model` is run instead of `m`
    when the file memplan reads differs from what onnxruntime can run (never for the
    shapes). `overrides` replaces reference rows (name -> (dtype, shape)) for tensors whose
    size onnxruntime reports as data-dependent."""
    os.makedirs(OUT, exist_ok=True)
    onnx.checker.check_model(m) if m.graph.output[0].type.HasField("tensor_type") else None
    feeds = feeds_for(m, feeds)
    got = run_all(ort_model or m, feeds, skip=set(overrides or {}))
    inits = {i.name for i in m.graph.initializer}
    # The reference's node list: the model's own, or (functions, control flow) the form
    # memplan imports, which onnxruntime ran above as `ort_model`.
    file_model = m
    m = ref_model or m
    start, end = lifetimes(m.graph)
    tensors = {}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        a = feeds[vi.name]
        tensors[vi.name] = (NP_TO_ONNX[a.dtype], list(a.shape))
    for n in m.graph.node:
        if n.op_type == "Constant":
            continue
        for o in n.output:
            if o and o not in (overrides or {}):
                tensors[o] = got[o]
    for k, v in (overrides or {}).items():
        tensors[k] = v
    # Control flow: the bodies are steps around their node (`expand`).
    n_steps = len((ref_model or m).graph.node)
    if any(a.type == onnx.AttributeProto.GRAPH for n in m.graph.node for a in n.attribute):
        env = run_values(ort_model or m, feeds)
        opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
        steps, rows = flat_steps(m, env, opset, lambda c: c in inits)
        tensors.update(rows)
        start, end = step_lifetimes(
            steps, [vi.name for vi in m.graph.input if vi.name not in inits],
            [o.name for o in m.graph.output])
        n_steps = len(steps)
    ref = {
        "nodes": n_steps,
        "tensors": {
            k: {
                "dtype": helper.tensor_dtype_to_string(d).replace("TensorProto.", ""),
                "shape": s,
                "bytes": nbytes(d, s),
                "start": start[k],
                "end": end[k],
                "bounded": k in bounded,
            }
            for k, (d, s) in tensors.items()
        },
    }
    # Strip: float initialisers of 1 KiB or more become external data without a file.
    m = file_model
    with tempfile.TemporaryDirectory() as tmp:
        onnx.save_model(
            m, os.path.join(tmp, "m.onnx"), save_as_external_data=True,
            all_tensors_to_one_file=True, location=f"{name}.onnx.data", size_threshold=1024,
        )
        stripped = onnx.load(os.path.join(tmp, "m.onnx"), load_external_data=False)
    onnx.save_model(stripped, os.path.join(OUT, f"{name}.onnx"))
    with open(os.path.join(OUT, f"{name}.ref.json"), "w") as f:
        json.dump(ref, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{name}: {len(m.graph.node)} nodes, {len(tensors)} tensors")


# ---------------------------------------------------------------- quantization (real quantizer)

def float_cnn():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r1"], ["a"], name="add"),
        helper.make_node("Conv", ["a", "w3", "b3"], ["c3"], name="conv3", strides=[2, 2]),
        helper.make_node("LeakyRelu", ["c3"], ["l3"], name="leaky", alpha=0.1),
        helper.make_node("Sigmoid", ["c3"], ["s3"], name="sig"),
        helper.make_node("Concat", ["l3", "s3"], ["cat"], name="concat", axis=1),
        helper.make_node("GlobalAveragePool", ["cat"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("MatMul", ["flat", "wm"], ["mm"], name="matmul"),
        helper.make_node("Gemm", ["mm", "wg", "bg"], ["y"], name="gemm", transB=1),
    ]
    inits = [
        w("w1", [8, 3, 3, 3]), w("b1", [8]), w("w2", [8, 8, 3, 3]), w("b2", [8]),
        w("w3", [8, 8, 3, 3]), w("b3", [8]), w("wm", [16, 12]), w("wg", [10, 12]), w("bg", [10]),
    ]
    return model(nodes, [x], [y], inits, opset=17)


def quantized():
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_dynamic, quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.data = iter([{"x": RNG.uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32)}
                              for _ in range(4)])

        def get_next(self):
            return next(self.data, None)

    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "f.onnx")
        onnx.save_model(float_cnn(), src)
        for fmt, name in [(QuantFormat.QDQ, "quant_qdq_static"),
                          (QuantFormat.QOperator, "quant_qoperator_static")]:
            dst = os.path.join(tmp, name + ".onnx")
            quantize_static(src, dst, Reader(), quant_format=fmt, per_channel=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
            save(name, onnx.load(dst))
        # Dynamic quantization of a MatMul/Gemm model.
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 32])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 16])
        nodes = [
            helper.make_node("MatMul", ["x", "wa"], ["h"], name="fc1"),
            helper.make_node("Relu", ["h"], ["hr"], name="relu"),
            helper.make_node("MatMul", ["hr", "wb"], ["y"], name="fc2"),
        ]
        src = os.path.join(tmp, "d.onnx")
        onnx.save_model(model(nodes, [x], [y], [w("wa", [32, 64]), w("wb", [64, 16])]), src)
        dst = os.path.join(tmp, "dyn.onnx")
        quantize_dynamic(src, dst, weight_type=QuantType.QUInt8)
        save("quant_dynamic", onnx.load(dst))
        # Dynamic quantization writing MatMulInteger (ORT's `MatMulConstBOnly` off).
        dst = os.path.join(tmp, "dyn2.onnx")
        quantize_dynamic(src, dst, weight_type=QuantType.QInt8,
                         extra_options={"MatMulConstBOnly": False})
        m = onnx.load(dst)
        save("quant_dynamic_int8", m)


def quant_dynamic_ops():
    """quantize_dynamic on a contrib Attention and an EmbedLayerNormalization (QAttention,
    QEmbedLayerNormalization; the bidirectional LSTM after them stays float)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    b, s, h = 2, 6, 16
    ids = helper.make_tensor_value_info("ids", TensorProto.INT32, [b, s])
    seg = helper.make_tensor_value_info("seg", TensorProto.INT32, [b, s])
    nodes = [
        helper.make_node("EmbedLayerNormalization", ["ids", "seg", "word", "pos", "segw", "g", "bt"],
                         ["emb", "mask_index"], name="embed", domain=MS),
        helper.make_node("Attention", ["emb", "qkv_w", "qkv_b", "mask_index"], ["att"], name="attention",
                         domain=MS, num_heads=2),
        helper.make_node("Transpose", ["att"], ["att_t"], name="to_seq_major", perm=[1, 0, 2]),
        helper.make_node("LSTM", ["att_t", "lw", "lr", "lb"], ["ly", "lh", "lc"], name="lstm",
                         hidden_size=8, direction="bidirectional"),
    ]
    inits = [w("word", [20, h]), w("pos", [16, h]), w("segw", [2, h]), w("g", [h]), w("bt", [h]),
             w("qkv_w", [h, 3 * h]), w("qkv_b", [3 * h]), w("lw", [2, 32, h]), w("lr", [2, 32, 8]),
             w("lb", [2, 64])]
    outs = [helper.ValueInfoProto(name=n) for n in ["ly", "lh", "lc"]]
    m = model(nodes, [ids, seg], outs, inits, opset=17, ms=True)
    feeds = {"ids": RNG.integers(0, 20, (b, s)).astype(np.int32),
             "seg": RNG.integers(0, 2, (b, s)).astype(np.int32)}
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "f.onnx")
        onnx.save_model(m, src)
        dst = os.path.join(tmp, "q.onnx")
        quantize_dynamic(src, dst, weight_type=QuantType.QInt8)
        save("quant_dynamic_ops", onnx.load(dst), feeds)



def quant_ops():
    """The quantization operators by hand: per-axis, blocked, INT4/UINT4, output_dtype,
    DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul, MatMulNBits."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    img = helper.make_tensor_value_info("img", TensorProto.UINT8, [1, 2, 5, 5])
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 16])
    nodes = [
        # blocked INT4 along axis 1, block 4 -> scale [4, 2]
        helper.make_node("QuantizeLinear", ["x", "s_blk", "zp_blk"], ["q4"], name="q_int4_blocked",
                         axis=1, block_size=4),
        helper.make_node("DequantizeLinear", ["q4", "s_blk", "zp_blk"], ["dq4"], name="dq_int4_blocked",
                         axis=1, block_size=4),
        # per-axis UINT4 via output_dtype (no zero point)
        helper.make_node("QuantizeLinear", ["x", "s_axis0"], ["qu4"], name="q_uint4_axis",
                         axis=0, output_dtype=TensorProto.UINT4),
        helper.make_node("DequantizeLinear", ["qu4", "s_axis0"], ["dqu4"], name="dq_uint4_axis", axis=0),
        # per-tensor int8 via output_dtype
        helper.make_node("QuantizeLinear", ["x", "s_t"], ["q8"], name="q_int8", output_dtype=TensorProto.INT8),
        helper.make_node("DynamicQuantizeLinear", ["x"], ["dq_y", "dq_s", "dq_zp"], name="dynq"),
        helper.make_node("MatMulInteger", ["dq_y", "wq", "dq_zp"], ["mmi"], name="matmulint"),
        helper.make_node("ConvInteger", ["img", "wc"], ["convi"], name="convint", pads=[1, 1, 1, 1]),
        helper.make_node("QLinearMatMul", ["dq_y", "dq_s", "dq_zp", "wq", "s_t", "zp_u8", "s_t", "zp_u8"],
                         ["qmm"], name="qlinear_matmul"),
        helper.make_node("MatMulNBits", ["a", "nb_w", "nb_s"], ["nbits"], name="matmul_nbits",
                         domain=MS, K=16, N=6, bits=4, block_size=16),
    ]
    inits = [
        w("s_blk", [4, 2], low=0.1, high=0.2), ints("zp_blk", np.zeros((4, 2)), dtype=np.int8),
        w("s_axis0", [4], low=0.1, high=0.2), w("s_t", [], low=0.1, high=0.2),
        numpy_helper.from_array(RNG.integers(0, 255, (8, 5)).astype(np.uint8), "wq"),
        numpy_helper.from_array(RNG.integers(0, 255, (3, 2, 3, 3)).astype(np.uint8), "wc"),
        numpy_helper.from_array(np.array(128, dtype=np.uint8), "zp_u8"),
        numpy_helper.from_array(np.array(0, dtype=np.int8), "zp_i8"),
        numpy_helper.from_array(RNG.integers(0, 255, (6, 1, 8)).astype(np.uint8), "nb_w"),
        w("nb_s", [6], low=0.1, high=0.2),
    ]
    # INT4 zero points need the INT4 type.
    inits[1] = helper.make_tensor("zp_blk", TensorProto.INT4, [4, 2], [0] * 8)
    outs = [helper.ValueInfoProto(name=n)
            for n in ["dq4", "dqu4", "q8", "mmi", "convi", "qmm", "nbits"]]
    # onnxruntime cannot hand INT4 tensors to numpy: their rows are the shape of x (which
    # the dequantized dq4/dqu4 rows, checked by onnxruntime, confirm) in INT4/UINT4.
    overrides = {"q4": (TensorProto.INT4, [4, 8]), "qu4": (TensorProto.UINT4, [4, 8])}
    save("quant_ops", model(nodes, [x, img, a], outs, inits, opset=21, ms=True), overrides=overrides)


def qoperator_extra():
    """com.microsoft QOperator ops the quantizer writes for other graphs: QLinearAdd/Mul,
    QLinearGlobalAveragePool (channels_last), QLinearConcat, QLinearSigmoid,
    QLinearLeakyRelu, QGemm (float and quantized output), DynamicQuantizeMatMul."""
    x = helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 4, 6, 6])
    xl = helper.make_tensor_value_info("xl", TensorProto.UINT8, [1, 6, 6, 4])
    m2 = helper.make_tensor_value_info("m2", TensorProto.UINT8, [3, 8])
    f = helper.make_tensor_value_info("f", TensorProto.FLOAT, [3, 8])
    sc = ["s", "z"]
    nodes = [
        helper.make_node("QLinearAdd", ["x", *sc, "x", *sc, *sc], ["add"], name="qadd", domain=MS),
        helper.make_node("QLinearMul", ["x", *sc, "bc", *sc, *sc], ["mul"], name="qmul", domain=MS),
        helper.make_node("QLinearGlobalAveragePool", ["x", *sc, *sc], ["gap"], name="qgap", domain=MS,
                         channels_last=0),
        helper.make_node("QLinearGlobalAveragePool", ["xl", *sc, *sc], ["gapl"], name="qgap_last",
                         domain=MS, channels_last=1),
        helper.make_node("QLinearConcat", [*sc, "x", *sc, "add", *sc], ["cat"], name="qconcat",
                         domain=MS, axis=1),
        helper.make_node("QLinearSigmoid", ["x", *sc, *sc], ["sig"], name="qsig", domain=MS),
        helper.make_node("QLinearLeakyRelu", ["x", *sc, *sc], ["lrelu"], name="qlrelu", domain=MS,
                         alpha=0.1),
        helper.make_node("QGemm", ["m2", *sc, "gw", *sc, "", *sc], ["qgemm_q"], name="qgemm_q",
                         domain=MS, transB=1),
        helper.make_node("QGemm", ["m2", *sc, "gw", *sc], ["qgemm_f"], name="qgemm_f", domain=MS,
                         transB=1),
        helper.make_node("DynamicQuantizeMatMul", ["f", "dw", "ds", "dz"], ["dqmm"], name="dqmm",
                         domain=MS),
    ]
    inits = [
        w("s", [], low=0.1, high=0.2), numpy_helper.from_array(np.array(128, np.uint8), "z"),
        numpy_helper.from_array(RNG.integers(0, 255, (1, 4, 1, 1)).astype(np.uint8), "bc"),
        numpy_helper.from_array(RNG.integers(0, 255, (5, 8)).astype(np.uint8), "gw"),
        numpy_helper.from_array(RNG.integers(-100, 100, (8, 7)).astype(np.int8), "dw"),
        w("ds", [], low=0.1, high=0.2), numpy_helper.from_array(np.array(0, np.int8), "dz"),
    ]
    outs = [helper.ValueInfoProto(name=n)
            for n in ["mul", "gap", "gapl", "cat", "sig", "lrelu", "qgemm_q", "qgemm_f", "dqmm"]]
    save("quant_qoperator_ops", model(nodes, [x, xl, m2, f], outs, inits, opset=17, ms=True))


# ---------------------------------------------------------------- fused transformer ops

def fused_transformer():
    b, s, h, heads = 2, 5, 32, 4
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT32, [b, s])
    seg = helper.make_tensor_value_info("segment_ids", TensorProto.INT32, [b, s])
    mask = helper.make_tensor_value_info("mask", TensorProto.INT32, [b, s])
    past = helper.make_tensor_value_info("past", TensorProto.FLOAT, [2, b, heads, 3, h // heads])
    nodes = [
        helper.make_node("EmbedLayerNormalization",
                         ["input_ids", "segment_ids", "word", "pos", "segw", "gamma", "beta", "mask"],
                         ["emb", "mask_index", "emb_sum"], name="embed", domain=MS, epsilon=1e-5),
        helper.make_node("Attention", ["emb", "qkv_w", "qkv_b", "mask_index"], ["att"],
                         name="attention", domain=MS, num_heads=heads),
        helper.make_node("Attention", ["emb", "qkv_w", "qkv_b", "", "past"], ["att_p", "present"],
                         name="attention_past", domain=MS, num_heads=heads, unidirectional=1),
        helper.make_node("SkipLayerNormalization", ["att", "emb", "gamma", "beta", "bias"],
                         ["sln", "sln_mean", "sln_inv", "sln_sum"], name="skip_ln", domain=MS),
        helper.make_node("MatMul", ["sln", "ff_w"], ["ff"], name="ff1"),
        helper.make_node("BiasGelu", ["ff", "ff_b"], ["bg"], name="bias_gelu", domain=MS),
        helper.make_node("FastGelu", ["ff", "ff_b"], ["fg"], name="fast_gelu", domain=MS),
        helper.make_node("Gelu", ["ff"], ["g"], name="gelu", domain=MS),
        helper.make_node("QuickGelu", ["ff"], ["qg"], name="quick_gelu", domain=MS, alpha=1.702),
        helper.make_node("MatMul", ["bg", "ff_w2"], ["ff2"], name="ff2"),
        helper.make_node("SkipSimplifiedLayerNormalization", ["ff2", "sln", "gamma"],
                         ["ssln", "", "ssln_inv", "ssln_sum"], name="skip_sln", domain=MS),
        helper.make_node("SimplifiedLayerNormalization", ["ssln", "gamma"], ["rms", "rms_inv"],
                         name="simplified_ln", axis=-1),
        helper.make_node("MultiHeadAttention", ["rms", "rms", "rms"], ["mha", "mha_k", "mha_v"],
                         name="mha", domain=MS, num_heads=heads),
        helper.make_node("GroupQueryAttention",
                         ["rms", "kv", "kv", "past_k", "past_v", "seqlens_k", "total_len"],
                         ["gqa", "gqa_k", "gqa_v"], name="gqa", domain=MS, num_heads=heads,
                         kv_num_heads=2),
        helper.make_node("MatMul", ["rms", "kv_w"], ["kv"], name="kv_proj"),
        helper.make_node("RotaryEmbedding", ["rot_in", "pos_ids", "cos", "sin"], ["rot"],
                         name="rotary", domain=MS),
    ]
    # kv_proj must precede gqa: move it.
    nodes.insert(13, nodes.pop(14))
    hd = h // heads
    inits = [
        w("word", [30, h]), w("pos", [16, h]), w("segw", [2, h]), w("gamma", [h]), w("beta", [h]),
        w("bias", [h]), w("qkv_w", [h, 3 * h]), w("qkv_b", [3 * h]), w("ff_w", [h, 4 * h]),
        w("ff_b", [4 * h]), w("ff_w2", [4 * h, h]), w("kv_w", [h, 2 * hd]),
        w("past_k", [b, 2, 8, hd]), w("past_v", [b, 2, 8, hd]),
        ints("seqlens_k", [s - 1] * b, np.int32), ints("total_len", s, np.int32),
        ints("pos_ids", [[i for i in range(s)]] * b), w("cos", [16, hd // 2]), w("sin", [16, hd // 2]),
    ]
    rot_in = helper.make_tensor_value_info("rot_in", TensorProto.FLOAT, [b, s, h])
    feeds = {
        "input_ids": RNG.integers(0, 30, (b, s)).astype(np.int32),
        "segment_ids": RNG.integers(0, 2, (b, s)).astype(np.int32),
        "mask": np.ones((b, s), np.int32),
        "past": RNG.uniform(-1, 1, (2, b, heads, 3, hd)).astype(np.float32),
        "rot_in": RNG.uniform(-1, 1, (b, s, h)).astype(np.float32),
    }
    outs = [helper.ValueInfoProto(name=n)
            for n in ["rot", "gqa", "mha", "emb_sum", "att_p", "present", "fg", "g", "qg",
                      "sln_mean", "sln_inv", "sln_sum", "ssln_inv", "ssln_sum", "rms_inv",
                      "mha_k", "mha_v", "gqa_k", "gqa_v"]]
    save("fused_transformer",
         model(nodes, [ids, seg, mask, past, rot_in], outs, inits, opset=17, ms=True), feeds)


def float_transformer():
    """A float transformer layer written out op by op (LayerNormalization decomposed,
    Gelu as erf, attention as MatMul/Reshape/Transpose/Softmax), as exporters write it."""
    b, s, h, heads = 1, 8, 32, 4
    hd = h // heads
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [b, s, h])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [b, s, h])

    def layer_norm(inp, out, p):
        return [
            helper.make_node("ReduceMean", [inp], [p + "mu"], axes=[-1]),
            helper.make_node("Sub", [inp, p + "mu"], [p + "d"]),
            helper.make_node("Pow", [p + "d", "two_f"], [p + "sq"]),
            helper.make_node("ReduceMean", [p + "sq"], [p + "var"], axes=[-1]),
            helper.make_node("Add", [p + "var", "eps"], [p + "ve"]),
            helper.make_node("Sqrt", [p + "ve"], [p + "sd"]),
            helper.make_node("Div", [p + "d", p + "sd"], [p + "n"]),
            helper.make_node("Mul", [p + "n", p + "g"], [p + "ng"]),
            helper.make_node("Add", [p + "ng", p + "b"], [out]),
        ]

    def heads_of(inp, out, p):
        return [
            helper.make_node("Reshape", [inp, "split_heads"], [p + "r"]),
            helper.make_node("Transpose", [p + "r"], [out], perm=[0, 2, 1, 3]),
        ]

    nodes = []
    for name in ["q", "k", "v"]:
        nodes += [helper.make_node("MatMul", ["x", "w" + name], [name + "0"]),
                  helper.make_node("Add", [name + "0", "b" + name], [name + "1"])]
        nodes += heads_of(name + "1", name + "h", name)
    nodes += [
        helper.make_node("Transpose", ["kh"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["qh", "kt"], ["qk"]),
        helper.make_node("Div", ["qk", "scale"], ["qks"]),
        helper.make_node("Softmax", ["qks"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "vh"], ["ctx"]),
        helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctx_t", "merge_heads"], ["ctx_m"]),
        helper.make_node("MatMul", ["ctx_m", "wo"], ["o0"]),
        helper.make_node("Add", ["o0", "bo"], ["o1"]),
        helper.make_node("Add", ["o1", "x"], ["res1"]),
    ]
    nodes += layer_norm("res1", "ln1", "ln1_")
    nodes += [
        helper.make_node("MatMul", ["ln1", "w1"], ["f0"]),
        helper.make_node("Add", ["f0", "b1"], ["f1"]),
        helper.make_node("Div", ["f1", "sqrt2"], ["f2"]),
        helper.make_node("Erf", ["f2"], ["f3"]),
        helper.make_node("Add", ["f3", "one_f"], ["f4"]),
        helper.make_node("Mul", ["f1", "f4"], ["f5"]),
        helper.make_node("Mul", ["f5", "half"], ["f6"]),
        helper.make_node("MatMul", ["f6", "w2"], ["f7"]),
        helper.make_node("Add", ["f7", "b2"], ["f8"]),
        helper.make_node("Add", ["f8", "ln1"], ["res2"]),
    ]
    nodes += layer_norm("res2", "y", "ln2_")
    for i, n in enumerate(nodes):
        n.name = f"{n.op_type.lower()}_{i}"
    inits = [
        w("wq", [h, h]), w("wk", [h, h]), w("wv", [h, h]), w("bq", [h]), w("bk", [h]), w("bv", [h]),
        w("wo", [h, h]), w("bo", [h]), w("w1", [h, 4 * h]), w("b1", [4 * h]), w("w2", [4 * h, h]),
        w("b2", [h]), ints("split_heads", [b, s, heads, hd]), ints("merge_heads", [b, s, h]),
        numpy_helper.from_array(np.array(np.sqrt(hd), np.float32), "scale"),
        numpy_helper.from_array(np.array(2, np.float32), "two_f"),
        numpy_helper.from_array(np.array(1e-5, np.float32), "eps"),
        numpy_helper.from_array(np.array(np.sqrt(2), np.float32), "sqrt2"),
        numpy_helper.from_array(np.array(1, np.float32), "one_f"),
        numpy_helper.from_array(np.array(0.5, np.float32), "half"),
        w("ln1_g", [h]), w("ln1_b", [h]), w("ln2_g", [h]), w("ln2_b", [h]),
    ]
    return model(nodes, [x], [y], inits, opset=17)


def ort_optimized():
    """The float transformer layer optimised by onnxruntime's session (ORT_ENABLE_EXTENDED,
    saved with `optimized_model_filepath`): the fused model a deployment runs."""
    m = float_transformer()
    with tempfile.TemporaryDirectory() as tmp:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        so.optimized_model_filepath = os.path.join(tmp, "opt.onnx")
        ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        opt = onnx.load(so.optimized_model_filepath)
    save("ort_optimized", opt)


def ort_transformers_bert():
    """The float transformer layer optimised by `onnxruntime.transformers.optimizer` as a
    BERT (Attention, SkipLayerNormalization, BiasGelu); needs sympy."""
    from onnxruntime.transformers.optimizer import optimize_model

    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "f.onnx")
        onnx.save_model(float_transformer(), src)
        opt = optimize_model(src, model_type="bert", num_heads=4, hidden_size=32, opt_level=0)
        m = opt.model
        # save_model_to_file would add the contrib domain's opset; the in-memory model lacks it.
        if not any(o.domain == MS for o in m.opset_import):
            m.opset_import.append(helper.make_opsetid(MS, 1))
        save("ort_transformers_bert", m)


# ---------------------------------------------------------------- standard ops

def recurrent():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [7, 2, 5])
    hs = 6
    nodes = [
        helper.make_node("LSTM", ["x", "lw", "lr", "lb"], ["ly", "lh", "lc"], name="lstm_bi",
                         hidden_size=hs, direction="bidirectional"),
        helper.make_node("GRU", ["x", "gw", "gr"], ["gy", "gh"], name="gru_rev", hidden_size=hs,
                         direction="reverse", linear_before_reset=1),
        helper.make_node("RNN", ["x", "rw", "rr"], ["", "rh"], name="rnn_hidden_only", hidden_size=hs),
        helper.make_node("Transpose", ["ly"], ["lys"], name="transpose_y", perm=[0, 2, 1, 3]),
    ]
    inits = [
        w("lw", [2, 4 * hs, 5]), w("lr", [2, 4 * hs, hs]), w("lb", [2, 8 * hs]),
        w("gw", [1, 3 * hs, 5]), w("gr", [1, 3 * hs, hs]), w("rw", [1, hs, 5]), w("rr", [1, hs, hs]),
    ]
    outs = [helper.ValueInfoProto(name=n)
            for n in ["lys", "lh", "lc", "gy", "gh", "rh"]]
    # (layout = 1 is not run by onnxruntime's CPU kernels; a unit test covers it.)
    save("recurrent", model(nodes, [x], outs, inits, opset=17))


def standard_ops():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])
    grid = helper.make_tensor_value_info("grid", TensorProto.FLOAT, [2, 5, 4, 2])
    cols = helper.make_tensor_value_info("cols", TensorProto.FLOAT, [1, 12, 16])
    nodes = [
        helper.make_node("GridSample", ["x", "grid"], ["gs"], name="grid_sample"),
        helper.make_node("GatherND", ["x", "nd_idx"], ["gnd"], name="gather_nd"),
        helper.make_node("GatherND", ["x", "nd_idx_b"], ["gnd_b"], name="gather_nd_batch", batch_dims=1),
        helper.make_node("ScatterND", ["x", "nd_idx", "nd_upd"], ["snd"], name="scatter_nd"),
        helper.make_node("ScatterElements", ["x", "se_idx", "se_upd"], ["se"], name="scatter_el", axis=2),
        helper.make_node("Col2Im", ["cols", "img_shape", "blk_shape"], ["c2i"], name="col2im"),
        helper.make_node("RoiAlign", ["x", "rois", "roi_b"], ["roi"], name="roi_align",
                         output_height=3, output_width=2),
        helper.make_node("OneHot", ["oh_idx", "depth", "oh_val"], ["oh"], name="one_hot", axis=1),
        helper.make_node("LpNormalization", ["x"], ["lpn"], name="lp_norm", axis=1),
        helper.make_node("EyeLike", ["eye_in"], ["eye"], name="eye_like"),
        helper.make_node("Det", ["det_in"], ["det"], name="det"),
        helper.make_node("MaxRoiPool", ["x", "rois5"], ["mrp"], name="max_roi_pool", pooled_shape=[2, 2]),
        helper.make_node("Softmax", ["x"], ["sm"], name="softmax", axis=1),
        helper.make_node("DFT", ["sig", "dft_len"], ["spec"], name="dft", onesided=1, axis=1),
        helper.make_node("HannWindow", ["win_len"], ["win"], name="hann"),
        helper.make_node("SoftmaxCrossEntropyLoss", ["sce_x", "sce_y"], ["loss", "logp"], name="sce",
                         reduction="none"),
        helper.make_node("CumSum", ["x", "ax2"], ["cs"], name="cumsum"),
    ]
    inits = [
        ints("nd_idx", [[0, 1], [1, 2]]), ints("nd_idx_b", [[[1]], [[2]]]),
        w("nd_upd", [2, 8, 8]), ints("se_idx", np.zeros((2, 3, 2, 8))), w("se_upd", [2, 3, 2, 8]),
        ints("img_shape", [5, 5]), ints("blk_shape", [2, 2]),
        numpy_helper.from_array(np.array([[0, 0, 4, 4], [1, 1, 6, 7], [2, 2, 3, 3]], np.float32), "rois"),
        ints("roi_b", [0, 1, 1]),
        ints("oh_idx", [[1, 2], [0, 3]]), ints("depth", 5), w("oh_val", [2]),
        w("eye_in", [4, 4]), w("det_in", [3, 2, 2]),
        numpy_helper.from_array(np.array([[0, 0, 0, 4, 4], [1, 1, 1, 6, 7]], np.float32), "rois5"),
        w("sig", [2, 16, 1]), ints("dft_len", 16), ints("win_len", 10), w("sce_x", [4, 10, 3]),
        ints("sce_y", np.zeros((4, 3))), ints("ax2", 2),
    ]
    outs = [helper.ValueInfoProto(name=n)
            for n in ["gs", "gnd", "gnd_b", "snd", "se", "c2i", "roi", "oh", "lpn", "eye", "det",
                      "mrp", "sm", "spec", "win", "loss", "logp", "cs"]]
    save("standard_ops", model(nodes, [x, grid, cols], outs, inits, opset=18))


def detection():
    """Post-processing of a torchvision-style detector: TopK with a runtime k, NMS,
    NonZero, Gather of the selected boxes, RoiAlign on them."""
    boxes = helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 50, 4])
    scores = helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 3, 50])
    feat = helper.make_tensor_value_info("feat", TensorProto.FLOAT, [1, 8, 16, 16])
    nodes = [
        helper.make_node("Shape", ["scores"], ["sshape"], name="shape"),
        helper.make_node("ReduceMax", ["scores"], ["smax"], name="reduce_max", keepdims=0),
        helper.make_node("Greater", ["scores", "thr"], ["keep"], name="greater"),
        helper.make_node("NonZero", ["keep"], ["nz"], name="nonzero"),
        helper.make_node("ReduceSum", ["scores", "one"], ["ssum"], name="sum_classes", keepdims=0),
        helper.make_node("Cast", ["n_keep_f"], ["n_keep"], name="cast_k", to=TensorProto.INT64),
        helper.make_node("TopK", ["ssum", "k"], ["top_v", "top_i"], name="topk", axis=1),
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "sthr"], ["sel"],
                         name="nms"),
        helper.make_node("Gather", ["sel", "two"], ["box_idx"], name="gather_col", axis=1),
        helper.make_node("Squeeze", ["boxes", "zero"], ["boxes2"], name="squeeze"),
        helper.make_node("Gather", ["boxes2", "box_idx"], ["picked"], name="gather_boxes", axis=0),
        helper.make_node("Shape", ["picked"], ["pshape"], name="shape_picked"),
        helper.make_node("Gather", ["pshape", "zero"], ["npick"], name="n_picked", axis=0),
        helper.make_node("ConstantOfShape", ["npick"], ["roi_b"], name="batch_idx",
                         value=helper.make_tensor("v", TensorProto.INT64, [1], [0])),
        helper.make_node("RoiAlign", ["feat", "picked", "roi_b"], ["rois"], name="roi_align",
                         output_height=2, output_width=2),
    ]
    # k is a runtime value: min(10, count) computed from the input.
    nodes[5:6] = [
        helper.make_node("Shape", ["nz"], ["nzshape"], name="nz_shape"),
        helper.make_node("Gather", ["nzshape", "one"], ["nz_n"], name="nz_count", axis=0),
        helper.make_node("Min", ["nz_n", "ten"], ["k"], name="k_min"),
    ]
    inits = [
        w("thr", [], low=0.5, high=0.5), ints("max_out", [4]), w("iou", [1], low=0.5, high=0.5),
        w("sthr", [1], low=-2, high=-2), ints("two", 2), ints("zero", [0]), ints("one", [1]),
        ints("ten", [10]),
    ]
    feeds = {
        "boxes": np.sort(RNG.uniform(0, 15, (1, 50, 4)).astype(np.float32), axis=2)[..., [0, 1, 2, 3]],
        "scores": RNG.uniform(0, 1, (1, 3, 50)).astype(np.float32),
        "feat": RNG.uniform(-1, 1, (1, 8, 16, 16)).astype(np.float32),
    }
    outs = [helper.ValueInfoProto(name=n)
            for n in ["smax", "top_v", "top_i", "rois"]]
    bounded = {"nz", "nzshape", "nz_n", "k", "top_v", "top_i", "sel", "box_idx", "picked",
               "pshape", "npick", "roi_b", "rois"}
    m = model(nodes, [boxes, scores, feat], outs, inits, opset=17)
    # Upper bounds memplan must give (the graph bounds them): NonZero <= 150 elements,
    # TopK's k = min(count, 10) <= 10, NMS <= 1 x 3 x 4 boxes.
    f = TensorProto.FLOAT
    i = TensorProto.INT64
    overrides = {
        "nz": (i, [3, 150]), "nzshape": (i, [2]), "nz_n": (i, [1]), "k": (i, [1]),
        "top_v": (f, [1, 10]), "top_i": (i, [1, 10]), "sel": (i, [12, 3]), "box_idx": (i, [12]),
        "picked": (f, [12, 4]), "pshape": (i, [2]), "npick": (i, [1]), "roi_b": (i, [12]),
        "rois": (f, [12, 8, 2, 2]),
    }
    save("detection", m, feeds, bounded=bounded, overrides=overrides)


def shape_subgraphs():
    """tf-style SAME padding computed in the graph, and torchvision-style resize by a float
    scale computed from the input size."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 17, 23])
    nodes = [
        helper.make_node("Shape", ["x"], ["xs"], name="shape"),
        helper.make_node("Slice", ["xs", "s2", "s4"], ["hw"], name="slice_hw"),
        helper.make_node("Cast", ["hw"], ["hwf"], name="cast_f", to=TensorProto.FLOAT),
        helper.make_node("Div", ["hwf", "stride_f"], ["hw_div"], name="div"),
        helper.make_node("Ceil", ["hw_div"], ["out_f"], name="ceil"),
        helper.make_node("Cast", ["out_f"], ["out_i"], name="cast_i", to=TensorProto.INT64),
        helper.make_node("Sub", ["out_i", "one"], ["o1"], name="sub1"),
        helper.make_node("Mul", ["o1", "stride"], ["o2"], name="mul"),
        helper.make_node("Add", ["o2", "kernel"], ["o3"], name="add_k"),
        helper.make_node("Sub", ["o3", "hw"], ["pad_total"], name="sub_hw"),
        helper.make_node("Max", ["pad_total", "zero"], ["pad_nn"], name="max0"),
        helper.make_node("Div", ["pad_nn", "two"], ["pad_beg"], name="div2"),
        helper.make_node("Sub", ["pad_nn", "pad_beg"], ["pad_end"], name="sub_end"),
        helper.make_node("Concat", ["zeros2", "pad_beg", "zeros2", "pad_end"], ["pads"], name="concat_pads",
                         axis=0),
        helper.make_node("Pad", ["x", "pads"], ["xp"], name="pad"),
        helper.make_node("Conv", ["xp", "cw"], ["conv"], name="conv", strides=[2, 2]),
        # torchvision transform: scale = min(32 / min(h, w), 48 / max(h, w))
        helper.make_node("ReduceMin", ["hwf"], ["mn"], name="reduce_min", keepdims=0),
        helper.make_node("ReduceMax", ["hwf"], ["mx"], name="reduce_max", keepdims=0),
        helper.make_node("Div", ["c32", "mn"], ["r1"], name="div_min"),
        helper.make_node("Div", ["c48", "mx"], ["r2"], name="div_max"),
        helper.make_node("Min", ["r1", "r2"], ["scale"], name="min_scale"),
        helper.make_node("Clip", ["scale", "lo", "hi"], ["scale_c"], name="clip"),
        helper.make_node("Mul", ["hwf", "scale_c"], ["new_hw_f"], name="mul_scale"),
        helper.make_node("Floor", ["new_hw_f"], ["new_hw_fl"], name="floor"),
        helper.make_node("Cast", ["new_hw_fl"], ["new_hw"], name="cast_sizes", to=TensorProto.INT64),
        helper.make_node("Concat", ["nc", "new_hw"], ["sizes"], name="concat_sizes", axis=0),
        helper.make_node("Resize", ["x", "", "", "sizes"], ["resized"], name="resize_sizes"),
        helper.make_node("Resize", ["x", "", "scales_init"], ["resized2"], name="resize_scales",
                         mode="nearest"),
        helper.make_node("Reciprocal", ["stride_f"], ["inv"], name="reciprocal"),
        helper.make_node("Range", ["zero_s", "c48", "three_f"], ["rng"], name="range_float"),
        helper.make_node("Equal", ["hw", "hw"], ["eq"], name="equal"),
        helper.make_node("Where", ["eq", "hw", "zero"], ["wh"], name="where"),
        helper.make_node("ReduceProd", ["wh"], ["prod"], name="reduce_prod", keepdims=1),
        helper.make_node("Reshape", ["x", "rs_shape"], ["flat"], name="reshape_prod"),
        helper.make_node("Concat", ["one_c", "prod"], ["rs_shape"], name="concat_rs", axis=0),
    ]
    nodes.insert(len(nodes) - 2, nodes.pop())
    inits = [
        ints("s2", [2]), ints("s4", [4]), w("stride_f", [2], low=2, high=2), ints("one", [1]),
        ints("stride", [2, 2]), ints("kernel", [3, 3]), ints("zero", [0]), ints("two", [2]),
        ints("zeros2", [0, 0]), w("cw", [4, 3, 3, 3]), w("c32", [], low=32, high=32),
        w("c48", [], low=48, high=48), w("lo", [], low=0.1, high=0.1), w("hi", [], low=4, high=4),
        ints("nc", [1, 3]), numpy_helper.from_array(np.array([1, 1, 1.5, 0.5], np.float32), "scales_init"),
        w("zero_s", [], low=0, high=0), w("three_f", [], low=3.5, high=3.5), ints("one_c", [3]),
    ]
    outs = [helper.ValueInfoProto(name=n)
            for n in ["conv", "resized", "resized2", "inv", "rng", "flat"]]
    save("shape_subgraphs", model(nodes, [x], outs, inits, opset=18))


# ---------------------------------------------------------------- local functions

def inline(m):
    """The model with its local functions expanded the way memplan names them (calls
    become their nodes; inner values `<call>/<value>`, inner nodes `<call>/<name>`)."""
    funcs = {(f.domain, f.name): f for f in m.functions}

    def expand(n, call, out):
        f = funcs.get((n.domain, n.op_type))
        if f is None:
            n2 = onnx.NodeProto()
            n2.CopyFrom(n)
            n2.name = call
            out.append(n2)
            return
        ren = {a: b for a, b in zip(f.input, n.input)}
        for i, o in enumerate(f.output):
            ren[o] = n.output[i] if i < len(n.output) and n.output[i] else f"{call}/{o}"
        attrs = {a.name: a for a in n.attribute}
        defaults = {a.name: a for a in f.attribute_proto}
        for j, inner in enumerate(f.node):
            m2 = onnx.NodeProto()
            m2.CopyFrom(inner)
            del m2.input[:]
            del m2.output[:]
            m2.input.extend([ren.get(v, f"{call}/{v}") if v else "" for v in inner.input])
            m2.output.extend([ren.get(v, f"{call}/{v}") if v else "" for v in inner.output])
            del m2.attribute[:]
            for a in inner.attribute:
                if not a.ref_attr_name:
                    m2.attribute.append(a)
                    continue
                b = attrs.get(a.ref_attr_name) or defaults.get(a.ref_attr_name)
                if b is not None:
                    c = onnx.AttributeProto()
                    c.CopyFrom(b)
                    c.name = a.name
                    c.ref_attr_name = ""
                    m2.attribute.append(c)
            inner_name = inner.name or f"{inner.op_type}_{j}"
            expand(m2, f"{call}/{inner_name}", out)

    out = []
    for i, n in enumerate(m.graph.node):
        expand(n, n.name or f"node_{i}", out)
    g = onnx.GraphProto()
    g.CopyFrom(m.graph)
    del g.node[:]
    g.node.extend(out)
    m2 = helper.make_model(g, opset_imports=[o for o in m.opset_import if o.domain != "local"])
    m2.ir_version = m.ir_version
    return m2


def functions():
    def ref_attr(name, ref, kind):
        a = onnx.AttributeProto()
        a.name = name
        a.ref_attr_name = ref
        a.type = kind
        return a

    conv = helper.make_node("Conv", ["X", "W"], ["c"], name="conv")
    conv.attribute.append(ref_attr("pads", "pads", onnx.AttributeProto.INTS))
    act = helper.make_node("LeakyRelu", ["c"], ["Y"])
    act.attribute.append(ref_attr("alpha", "alpha", onnx.AttributeProto.FLOAT))
    conv_act = helper.make_function(
        "local", "ConvAct", ["X", "W"], ["Y"], [conv, act],
        [helper.make_opsetid("", 17)], attributes=["pads"],
    )
    conv_act.attribute_proto.append(helper.make_attribute("alpha", 0.2))
    first = helper.make_node("ConvAct", ["X", "W1"], ["a"], name="first", domain="local",
                             pads=[1, 1, 1, 1])
    first.attribute.append(ref_attr("alpha", "alpha", onnx.AttributeProto.FLOAT))
    second = helper.make_node("ConvAct", ["a", "W2"], ["Y"], name="second", domain="local")
    second.attribute.append(ref_attr("pads", "pads", onnx.AttributeProto.INTS))
    block = helper.make_function(
        "local", "Block", ["X", "W1", "W2"], ["Y"], [first, second],
        [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)], attributes=["pads", "alpha"],
    )
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])
    nodes = [
        helper.make_node("Block", ["x", "w1", "w2"], ["b"], name="block1", domain="local",
                         alpha=0.3, pads=[0, 0, 0, 0]),
        helper.make_node("Relu", ["b"], ["r"], name="relu"),
        helper.make_node("ConvAct", ["r", "w3"], ["z"], domain="local", pads=[2, 2, 2, 2]),
    ]
    inits = [w("w1", [4, 3, 3, 3]), w("w2", [4, 4, 3, 3]), w("w3", [2, 4, 5, 5])]
    m = model(nodes, [x], [helper.ValueInfoProto(name="z")], inits, opset=17,
              functions=[conv_act, block], extra_opsets=[helper.make_opsetid("local", 1)])
    flat = inline(m)
    # onnxruntime runs the original too: its final output must agree with the inlined form.
    feeds = feeds_for(m, None)
    assert run_all(m, feeds)["z"] == run_all(flat, feeds)["z"]
    save("functions", m, feeds, ort_model=flat, ref_model=flat)


# ---------------------------------------------------------------- control flow

def control_flow():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])
    seq = helper.make_tensor_value_info("seq", TensorProto.FLOAT, [5, 2, 3])
    f = TensorProto.FLOAT
    # If with a runtime condition; both branches read outer values (x, w, bias).
    then_b = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["t0"], name="then_mm"),
         helper.make_node("Add", ["t0", "bias"], ["t_out"], name="then_add")],
        "then", [], [helper.make_tensor_value_info("t_out", f, [2, 4])])
    else_b = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["e0"], name="else_mm"),
         helper.make_node("Relu", ["e0"], ["e_out"], name="else_relu")],
        "else", [], [helper.make_tensor_value_info("e_out", f, [2, 4])])
    # If with a known condition whose branches differ in shape: the taken one counts.
    big = helper.make_graph(
        [helper.make_node("Concat", ["x", "x"], ["big_out"], name="big_cat", axis=1)],
        "big", [], [helper.make_tensor_value_info("big_out", f, [2, 12])])
    small = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["small_out"], name="small_id")],
        "small", [], [helper.make_tensor_value_info("small_out", f, [2, 6])])
    # Loop with a known trip count: a carried value and a scan output; reads w.
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="cond_pass"),
         helper.make_node("Add", ["acc_in", "x"], ["acc_out"], name="acc_add"),
         helper.make_node("MatMul", ["acc_out", "w"], ["scan_out"], name="loop_mm")],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", f, [2, 6])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", f, [2, 6]),
         helper.make_tensor_value_info("scan_out", f, [2, 4])])
    # Scan: a running sum state and a per-step output.
    scan_body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "elem"], ["s_out"], name="scan_add"),
         helper.make_node("Mul", ["elem", "elem"], ["sq"], name="scan_sq")],
        "scan_body",
        [helper.make_tensor_value_info("s_in", f, [2, 3]),
         helper.make_tensor_value_info("elem", f, [2, 3])],
        [helper.make_tensor_value_info("s_out", f, [2, 3]),
         helper.make_tensor_value_info("sq", f, [2, 3])])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["total"], name="total", keepdims=0),
        helper.make_node("Greater", ["total", "zero_f"], ["positive"], name="positive"),
        helper.make_node("If", ["positive"], ["branch"], name="if_runtime",
                         then_branch=then_b, else_branch=else_b),
        helper.make_node("If", ["yes"], ["taken"], name="if_known", then_branch=big,
                         else_branch=small),
        helper.make_node("Loop", ["three", "yes", "x"], ["acc", "stacked"], name="loop", body=body),
        helper.make_node("Scan", ["s0", "seq"], ["s_final", "squares"], name="scan", body=scan_body,
                         num_scan_inputs=1),
        helper.make_node("Relu", ["branch"], ["after"], name="after"),
    ]
    inits = [
        w("w", [6, 4]), w("bias", [4]), w("zero_f", [], low=0, high=0), ints("three", 3),
        numpy_helper.from_array(np.array(True), "yes"), w("s0", [2, 3]),
    ]
    outs = [helper.ValueInfoProto(name=n) for n in ["after", "taken", "acc", "stacked", "s_final", "squares"]]
    save("control_flow", model(nodes, [x, seq], outs, inits, opset=17))


def control_bodies():
    """Body temporaries: an If with temporaries in both branches, a Loop and a Scan whose
    bodies compute temporaries, and an If nested in a Loop whose condition depends on the
    iteration number (so both inner branches count)."""
    f = TensorProto.FLOAT
    x = helper.make_tensor_value_info("x", f, [4, 8])
    seq = helper.make_tensor_value_info("seq", f, [6, 4, 8])
    vi = helper.make_tensor_value_info
    then_b = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w_up"], ["t_wide"], name="then_up"),
         helper.make_node("Relu", ["t_wide"], ["t_act"], name="then_act"),
         helper.make_node("MatMul", ["t_act", "w_down"], ["t_out"], name="then_down")],
        "then", [], [vi("t_out", f, [4, 8])])
    else_b = helper.make_graph(
        [helper.make_node("Transpose", ["x"], ["e_tr"], name="else_tr"),
         helper.make_node("Mul", ["e_tr", "e_tr"], ["e_sq"], name="else_sq"),
         helper.make_node("Transpose", ["e_sq"], ["e_out"], name="else_back")],
        "else", [], [vi("e_out", f, [4, 8])])
    loop_body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="cond_pass"),
         helper.make_node("MatMul", ["acc_in", "w_up"], ["l_up"], name="loop_up"),
         helper.make_node("Tanh", ["l_up"], ["l_act"], name="loop_act"),
         helper.make_node("MatMul", ["l_act", "w_down"], ["acc_out"], name="loop_down"),
         helper.make_node("ReduceSum", ["acc_out"], ["l_sum"], name="loop_sum", keepdims=0)],
        "loop_body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("acc_in", f, [4, 8])],
        [vi("cond_out", TensorProto.BOOL, []), vi("acc_out", f, [4, 8]), vi("l_sum", f, [])])
    scan_body = helper.make_graph(
        [helper.make_node("Mul", ["row", "row"], ["r_sq"], name="scan_sq"),
         helper.make_node("ReduceSum", ["r_sq", "axis0"], ["r_sum"], name="scan_sum", keepdims=0),
         helper.make_node("Add", ["s_in", "r_sum"], ["s_out"], name="scan_add")],
        "scan_body", [vi("s_in", f, [8]), vi("row", f, [4, 8])],
        [vi("s_out", f, [8]), vi("r_sum", f, [8])])
    inner_then = helper.make_graph(
        [helper.make_node("MatMul", ["h_in", "w_up"], ["n_up"], name="inner_up"),
         helper.make_node("MatMul", ["n_up", "w_down"], ["n_out"], name="inner_down")],
        "inner_then", [], [vi("n_out", f, [4, 8])])
    inner_else = helper.make_graph(
        [helper.make_node("Neg", ["h_in"], ["m_neg"], name="inner_neg"),
         helper.make_node("Abs", ["m_neg"], ["m_out"], name="inner_abs")],
        "inner_else", [], [vi("m_out", f, [4, 8])])
    nested_body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"], name="cond_pass"),
         helper.make_node("Mod", ["i", "two"], ["i_mod"], name="parity"),
         helper.make_node("Equal", ["i_mod", "one"], ["is_odd"], name="is_odd"),
         helper.make_node("If", ["is_odd"], ["picked"], name="inner_if",
                          then_branch=inner_then, else_branch=inner_else),
         helper.make_node("Add", ["picked", "h_in"], ["h_out"], name="residual")],
        "nested_body",
        [vi("i", TensorProto.INT64, []), vi("c_in", TensorProto.BOOL, []), vi("h_in", f, [4, 8])],
        [vi("c_out", TensorProto.BOOL, []), vi("h_out", f, [4, 8])])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["total"], name="total", keepdims=0),
        helper.make_node("Greater", ["total", "zero_f"], ["positive"], name="positive"),
        helper.make_node("If", ["positive"], ["branch"], name="if_temps",
                         then_branch=then_b, else_branch=else_b),
        helper.make_node("Loop", ["four", "yes", "x"], ["acc", "sums"], name="loop_temps",
                         body=loop_body),
        helper.make_node("Scan", ["s0", "seq"], ["s_final", "row_sums"], name="scan_temps",
                         body=scan_body, num_scan_inputs=1),
        helper.make_node("Loop", ["two", "yes", "x"], ["h_final"], name="nested_loop",
                         body=nested_body),
        helper.make_node("Relu", ["branch"], ["after"], name="after"),
    ]
    inits = [
        w("w_up", [8, 16]), w("w_down", [16, 8]), w("zero_f", [], low=0, high=0),
        ints("four", 4), ints("two", 2), ints("one", 1), ints("axis0", [0]),
        numpy_helper.from_array(np.array(True), "yes"), w("s0", [8]),
    ]
    outs = [helper.ValueInfoProto(name=n)
            for n in ["after", "acc", "sums", "s_final", "row_sums", "h_final"]]
    save("control_bodies", model(nodes, [x, seq], outs, inits, opset=17))


def main():
    only = set(sys.argv[1:])
    failed = []
    for f in [quantized, quant_dynamic_ops, quant_ops, qoperator_extra, fused_transformer, ort_optimized,
              ort_transformers_bert, recurrent, standard_ops,
              detection, shape_subgraphs, functions, control_flow, control_bodies]:
        if not only or f.__name__ in only:
            # Each fixture draws from its own seeded generator: regenerating one alone
            # writes the same file as regenerating all.
            global RNG
            RNG = np.random.default_rng(0)
            try:
                f()
            except Exception as e:  # report every fixture's failure, not only the first
                failed.append(f.__name__)
                print(f"{f.__name__}: FAILED: {e}", file=sys.stderr)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
