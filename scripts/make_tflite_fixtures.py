#!/usr/bin/env python3
"""Generate the small int8 TensorFlow Lite fixtures used by memplan-tflite's tests.

The models are assembled directly as flatbuffers with the object API of the
TFLite schema module shipped in the ``tflite-micro`` pip package, so neither
TensorFlow nor a converter is needed. Weights are random but deterministic
(every model draws from its own fixed-seed numpy generator), so re-running the
script reproduces the committed files byte for byte.

Every model is fully int8-quantized the way the TFLite converter does it:

* activations: int8, per-tensor (scale, zero_point);
* CONV_2D / DEPTHWISE_CONV_2D / TRANSPOSE_CONV weights: int8, symmetric,
  per-channel (``quantized_dimension`` set to the output-channel axis);
* FULLY_CONNECTED weights: int8, symmetric, per-tensor;
* biases: int32, scale = input_scale * weight_scale (per channel), zero point 0;
* ops with fixed output ranges use the values TFLite requires (SOFTMAX and
  LOGISTIC: 1/256, -128; TANH: 1/128, 0).

Layout conventions also follow the converter: schema version 3, buffer 0 is
the empty sentinel buffer, every tensor owns a buffer (empty for activations),
constant data is 16-byte aligned, and operator codes fill in both
``deprecated_builtin_code`` and ``builtin_code``.

Usage (needs only ``tflite-micro``, ``numpy`` and ``flatbuffers``)::

    python scripts/make_tflite_fixtures.py [OUT_DIR]

OUT_DIR defaults to ``crates/memplan-tflite/tests/data`` in this repository.
After writing the files the script loads each one in the TFLite Micro Python
interpreter, runs it and prints a short summary as a self-check.
"""

from __future__ import annotations

import argparse
import math
import sys
import zlib
from pathlib import Path
from typing import Callable, Sequence

import flatbuffers
import numpy as np
from tflite_micro.python.tflite_micro import runtime
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as tfl

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT_DIR = REPO_ROOT / "crates" / "memplan-tflite" / "tests" / "data"

FILE_IDENTIFIER = b"TFL3"
SCHEMA_VERSION = 3
BUFFER_ALIGNMENT = 16  # what the converter and TFLM expect for constant data
ARENA_SIZE = 256 * 1024  # generous; the largest fixture needs well under 64 KiB

Op = tfl.BuiltinOperator
Act = tfl.ActivationFunctionType
Padding = tfl.Padding

# Operator versions as the TFLite converter assigns them for int8 kernels
# (tensorflow/lite/tools/versioning/op_version.cc). TFLM ignores them, but
# a realistic value keeps the files looking like converter output.
OP_VERSIONS = {
    Op.ADD: 2,
    Op.AVERAGE_POOL_2D: 2,
    Op.CONCATENATION: 2,
    Op.CONV_2D: 3,
    Op.DEPTHWISE_CONV_2D: 3,
    Op.FULLY_CONNECTED: 4,
    Op.LOGISTIC: 2,
    Op.MAX_POOL_2D: 2,
    Op.MEAN: 2,
    Op.MUL: 2,
    Op.QUANTIZE: 2,
    Op.RELU: 2,
    Op.RELU6: 2,
    Op.RESHAPE: 1,
    Op.SOFTMAX: 2,
    Op.SUB: 2,
    Op.TANH: 2,
    Op.TRANSPOSE_CONV: 3,
}

# The builtin_options union member that goes with each options object type.
OPTIONS_TYPES = {
    tfl.AddOptionsT: tfl.BuiltinOptions.AddOptions,
    tfl.ConcatenationOptionsT: tfl.BuiltinOptions.ConcatenationOptions,
    tfl.Conv2DOptionsT: tfl.BuiltinOptions.Conv2DOptions,
    tfl.DepthwiseConv2DOptionsT: tfl.BuiltinOptions.DepthwiseConv2DOptions,
    tfl.FullyConnectedOptionsT: tfl.BuiltinOptions.FullyConnectedOptions,
    tfl.MulOptionsT: tfl.BuiltinOptions.MulOptions,
    tfl.Pool2DOptionsT: tfl.BuiltinOptions.Pool2DOptions,
    tfl.QuantizeOptionsT: tfl.BuiltinOptions.QuantizeOptions,
    tfl.ReducerOptionsT: tfl.BuiltinOptions.ReducerOptions,
    tfl.ReshapeOptionsT: tfl.BuiltinOptions.ReshapeOptions,
    tfl.SoftmaxOptionsT: tfl.BuiltinOptions.SoftmaxOptions,
    tfl.SubOptionsT: tfl.BuiltinOptions.SubOptions,
    tfl.TransposeConvOptionsT: tfl.BuiltinOptions.TransposeConvOptions,
}

_NUMPY_TYPES = {
    tfl.TensorType.INT8: np.int8,
    tfl.TensorType.INT32: np.int32,
}


class _AlignedBufferT(tfl.BufferT):
    """BufferT whose data vector is aligned to BUFFER_ALIGNMENT bytes.

    The generated ``BufferT.Pack`` aligns data only to its element size (1 for
    the ubyte vector), which would leave int32 biases misaligned.
    """

    def Pack(self, builder: flatbuffers.Builder) -> int:
        data = None
        if self.data is not None:
            payload = bytes(self.data)
            builder.StartVector(1, len(payload), BUFFER_ALIGNMENT)
            builder.head -= len(payload)
            builder.Bytes[builder.head : builder.head + len(payload)] = payload
            builder.vectorNumElems = len(payload)
            data = builder.EndVector()
        tfl.BufferStart(builder)
        if data is not None:
            tfl.BufferAddData(builder, data)
        return tfl.BufferEnd(builder)


class ModelBuilder:
    """Assembles a single-subgraph TFLite model with the schema object API."""

    def __init__(self, description: str) -> None:
        self.description = description
        self.buffers: list[tfl.BufferT] = [_AlignedBufferT()]  # 0: empty sentinel
        self.tensors: list[tfl.TensorT] = []
        self.operators: list[tfl.OperatorT] = []
        self.opcodes: list[tfl.OperatorCodeT] = []
        self._opcode_index: dict[int, int] = {}

    def add_buffer(self, data: np.ndarray | None = None) -> int:
        """Appends a buffer (empty when ``data`` is None); returns its index."""
        buf = _AlignedBufferT()
        if data is not None:
            buf.data = data.astype(data.dtype.newbyteorder("<"), copy=False).tobytes()
        self.buffers.append(buf)
        return len(self.buffers) - 1

    def add_tensor(
        self,
        name: str,
        shape: Sequence[int],
        dtype: int = tfl.TensorType.INT8,
        scale: Sequence[float] | float | None = None,
        zero_point: Sequence[int] | int | None = None,
        quantized_dimension: int = 0,
        data: np.ndarray | None = None,
    ) -> int:
        """Appends a tensor with its own buffer (holding ``data`` if given)."""
        tensor = tfl.TensorT()
        tensor.name = name
        tensor.shape = [int(d) for d in shape]
        tensor.type = dtype
        if data is not None:
            expected = _NUMPY_TYPES[dtype]
            assert data.dtype == expected, f"{name}: {data.dtype} != {expected}"
            assert list(data.shape) == tensor.shape, f"{name}: {data.shape} != {shape}"
        tensor.buffer = self.add_buffer(data)
        if scale is not None:
            q = tfl.QuantizationParametersT()
            q.scale = [float(s) for s in np.atleast_1d(scale)]
            zero_points = np.atleast_1d(0 if zero_point is None else zero_point)
            q.zeroPoint = [int(z) for z in zero_points]
            assert len(q.scale) == len(q.zeroPoint), name
            q.quantizedDimension = quantized_dimension
            tensor.quantization = q
        self.tensors.append(tensor)
        return len(self.tensors) - 1

    def add_op(
        self,
        code: int,
        inputs: Sequence[int],
        outputs: Sequence[int],
        options: object | None = None,
    ) -> None:
        """Appends an operator; ``options`` is a ``*OptionsT`` object or None."""
        if code not in self._opcode_index:
            opcode = tfl.OperatorCodeT()
            opcode.builtinCode = code
            opcode.deprecatedBuiltinCode = min(code, Op.PLACEHOLDER_FOR_GREATER_OP_CODES)
            opcode.version = OP_VERSIONS[code]
            self._opcode_index[code] = len(self.opcodes)
            self.opcodes.append(opcode)
        op = tfl.OperatorT()
        op.opcodeIndex = self._opcode_index[code]
        op.inputs = list(inputs)
        op.outputs = list(outputs)
        if options is not None:
            op.builtinOptionsType = OPTIONS_TYPES[type(options)]
            op.builtinOptions = options
        self.operators.append(op)

    def finish(self, inputs: Sequence[int], outputs: Sequence[int]) -> bytes:
        """Serializes the model with the given subgraph inputs and outputs."""
        subgraph = tfl.SubGraphT()
        subgraph.name = "main"
        subgraph.tensors = self.tensors
        subgraph.operators = self.operators
        subgraph.inputs = list(inputs)
        subgraph.outputs = list(outputs)

        model = tfl.ModelT()
        model.version = SCHEMA_VERSION
        model.description = self.description
        model.operatorCodes = self.opcodes
        model.subgraphs = [subgraph]
        model.buffers = self.buffers

        builder = flatbuffers.Builder(4096)
        builder.Finish(model.Pack(builder), file_identifier=FILE_IDENTIFIER)
        return bytes(builder.Output())


class Int8Net(ModelBuilder):
    """Quantized layer helpers on top of ModelBuilder.

    Each helper creates its (random, seeded) constants and its int8 output
    tensor and returns the output tensor index. Output scales are picked from
    the expected spread of the accumulator so activations neither saturate
    nor collapse to a constant.
    """

    def __init__(self, description: str, seed: int) -> None:
        super().__init__(description)
        self.rng = np.random.default_rng(seed)

    # -- tensor bookkeeping -------------------------------------------------

    def shape(self, t: int) -> list[int]:
        return self.tensors[t].shape

    def quant(self, t: int) -> tuple[float, int]:
        q = self.tensors[t].quantization
        return q.scale[0], q.zeroPoint[0]

    def input(
        self, name: str, shape: Sequence[int], scale: float = 0.05, zero_point: int = 0
    ) -> int:
        return self.add_tensor(name, shape, scale=scale, zero_point=zero_point)

    def activation(self, name: str, shape: Sequence[int], quant: tuple[float, int]) -> int:
        return self.add_tensor(name, shape, scale=quant[0], zero_point=quant[1])

    def _fresh_quant(self, real_std: float, act: int) -> tuple[float, int]:
        """(scale, zero_point) covering about +-3 standard deviations."""
        if act == Act.RELU:
            return 3.0 * real_std / 255.0, -128
        zero_point = int(self.rng.integers(-16, 17))
        return 3.0 * real_std / 127.0, zero_point

    @staticmethod
    def _real_std(scale: float) -> float:
        # An int8 activation spread over most of its range has std ~ 60 steps.
        return 60.0 * scale

    def _weights(
        self, name: str, shape: Sequence[int], channel_axis: int | None, mean_scale: float = 0.01
    ) -> tuple[int, np.ndarray]:
        """Symmetric int8 weights; per-channel scales unless channel_axis is None."""
        values = self.rng.integers(-127, 128, size=shape, dtype=np.int8)
        n_scales = 1 if channel_axis is None else shape[channel_axis]
        scales = mean_scale * self.rng.uniform(0.5, 1.5, size=n_scales)
        t = self.add_tensor(
            name,
            shape,
            scale=scales,
            zero_point=[0] * n_scales,
            quantized_dimension=channel_axis or 0,
            data=values,
        )
        return t, scales

    def _bias(self, name: str, in_t: int, w_scales: np.ndarray, n: int) -> int:
        """int32 bias of n values quantized like the weights (per channel or per tensor)."""
        scales = self.quant(in_t)[0] * w_scales
        values = self.rng.integers(-2000, 2001, size=n, dtype=np.int32)
        zero_points = [0] * len(scales)
        return self.add_tensor(
            name, [n], tfl.TensorType.INT32, scale=scales, zero_point=zero_points, data=values
        )

    def _int32_const(self, name: str, values: Sequence[int]) -> int:
        data = np.asarray(values, dtype=np.int32)
        return self.add_tensor(name, [len(values)], tfl.TensorType.INT32, data=data)

    def _acc_quant(self, x: int, w_scales: np.ndarray, fan_in: int, act: int) -> tuple[float, int]:
        # int8 weights uniform in [-127, 127] have a std of ~73 steps.
        w_std = 73.0 * float(np.mean(w_scales))
        acc_std = math.sqrt(fan_in) * self._real_std(self.quant(x)[0]) * w_std
        return self._fresh_quant(acc_std, act)

    # -- layers -------------------------------------------------------------

    def conv2d(
        self,
        name: str,
        x: int,
        out_ch: int,
        kernel: int = 3,
        stride: int = 1,
        act: int = Act.NONE,
        out_quant: tuple[float, int] | None = None,
    ) -> int:
        """CONV_2D, SAME padding; weights [out, kh, kw, in], per-channel on axis 0."""
        n, h, w, c = self.shape(x)
        wt, ws = self._weights(f"{name}/weights", [out_ch, kernel, kernel, c], channel_axis=0)
        b = self._bias(f"{name}/bias", x, ws, out_ch)
        oq = out_quant or self._acc_quant(x, ws, kernel * kernel * c, act)
        y = self.activation(name, [n, -(-h // stride), -(-w // stride), out_ch], oq)
        opts = tfl.Conv2DOptionsT()
        opts.padding, opts.strideH, opts.strideW = Padding.SAME, stride, stride
        opts.fusedActivationFunction = act
        self.add_op(Op.CONV_2D, [x, wt, b], [y], opts)
        return y

    def depthwise_conv2d(
        self, name: str, x: int, kernel: int = 3, stride: int = 1, act: int = Act.NONE
    ) -> int:
        """DEPTHWISE_CONV_2D, multiplier 1; weights [1, kh, kw, ch], per-channel on axis 3."""
        n, h, w, c = self.shape(x)
        wt, ws = self._weights(f"{name}/weights", [1, kernel, kernel, c], channel_axis=3)
        b = self._bias(f"{name}/bias", x, ws, c)
        oq = self._acc_quant(x, ws, kernel * kernel, act)
        y = self.activation(name, [n, -(-h // stride), -(-w // stride), c], oq)
        opts = tfl.DepthwiseConv2DOptionsT()
        opts.padding, opts.strideH, opts.strideW = Padding.SAME, stride, stride
        opts.depthMultiplier = 1
        opts.fusedActivationFunction = act
        self.add_op(Op.DEPTHWISE_CONV_2D, [x, wt, b], [y], opts)
        return y

    def transpose_conv(
        self, name: str, x: int, out_ch: int, kernel: int = 3, stride: int = 2
    ) -> int:
        """TRANSPOSE_CONV with bias, SAME padding; weights [out, kh, kw, in], per channel."""
        n, h, w, c = self.shape(x)
        out_shape = [n, h * stride, w * stride, out_ch]
        shape_t = self._int32_const(f"{name}/output_shape", out_shape)
        wt, ws = self._weights(f"{name}/weights", [out_ch, kernel, kernel, c], channel_axis=0)
        b = self._bias(f"{name}/bias", x, ws, out_ch)
        # Each output pixel sees about (kernel / stride)^2 * in_ch products.
        fan_in = max(1, (kernel * kernel * c) // (stride * stride))
        y = self.activation(name, out_shape, self._acc_quant(x, ws, fan_in, Act.NONE))
        opts = tfl.TransposeConvOptionsT()
        opts.padding, opts.strideH, opts.strideW = Padding.SAME, stride, stride
        self.add_op(Op.TRANSPOSE_CONV, [shape_t, wt, x, b], [y], opts)
        return y

    def fully_connected(
        self, name: str, x: int, units: int, act: int = Act.NONE, out_std: float | None = None
    ) -> int:
        """FULLY_CONNECTED on a [batch, features] input; per-tensor weights [units, features].

        ``out_std`` (real units) shrinks the weights, e.g. to keep logits in the
        range where a following SOFTMAX is not one-hot.
        """
        batch, features = self.shape(x)
        mean_scale = 0.01
        if out_std is not None:
            mean_scale = out_std / (math.sqrt(features) * self._real_std(self.quant(x)[0]) * 73.0)
        wt, ws = self._weights(f"{name}/weights", [units, features], None, mean_scale)
        b = self._bias(f"{name}/bias", x, ws, units)
        y = self.activation(name, [batch, units], self._acc_quant(x, ws, features, act))
        opts = tfl.FullyConnectedOptionsT()
        opts.fusedActivationFunction = act
        self.add_op(Op.FULLY_CONNECTED, [x, wt, b], [y], opts)
        return y

    def pool2d(self, name: str, code: int, x: int, size: int = 2, stride: int = 2) -> int:
        """MAX_POOL_2D / AVERAGE_POOL_2D, VALID padding; keeps the input quantization."""
        n, h, w, c = self.shape(x)
        out_shape = [n, (h - size) // stride + 1, (w - size) // stride + 1, c]
        y = self.activation(name, out_shape, self.quant(x))
        opts = tfl.Pool2DOptionsT()
        opts.padding, opts.strideH, opts.strideW = Padding.VALID, stride, stride
        opts.filterHeight, opts.filterWidth = size, size
        self.add_op(code, [x], [y], opts)
        return y

    def concat(self, name: str, xs: Sequence[int], axis: int = 3) -> int:
        """CONCATENATION; TFLM's int8 kernel needs identical input/output quantization."""
        q = self.quant(xs[0])
        assert all(self.quant(x) == q for x in xs), "concat inputs must share quantization"
        shape = list(self.shape(xs[0]))
        shape[axis] = sum(self.shape(x)[axis] for x in xs)
        y = self.activation(name, shape, q)
        opts = tfl.ConcatenationOptionsT()
        opts.axis = axis
        self.add_op(Op.CONCATENATION, list(xs), [y], opts)
        return y

    def binary(self, name: str, code: int, a: int, b: int, act: int = Act.NONE) -> int:
        """ADD / SUB / MUL of two same-shape int8 tensors with a fresh output scale."""
        assert self.shape(a) == self.shape(b), (self.shape(a), self.shape(b))
        sa, sb = self._real_std(self.quant(a)[0]), self._real_std(self.quant(b)[0])
        if code == Op.MUL:
            std, opts = sa * sb, tfl.MulOptionsT()
        else:
            std = math.hypot(sa, sb)
            opts = tfl.AddOptionsT() if code == Op.ADD else tfl.SubOptionsT()
        opts.fusedActivationFunction = act
        y = self.activation(name, self.shape(a), self._fresh_quant(std, act))
        self.add_op(code, [a, b], [y], opts)
        return y

    def unary(
        self, name: str, code: int, x: int, out_quant: tuple[float, int] | None = None
    ) -> int:
        """Option-less elementwise op (RELU, RELU6, LOGISTIC, TANH) or QUANTIZE (int8 requant)."""
        fixed = {Op.LOGISTIC: (1.0 / 256, -128), Op.TANH: (1.0 / 128, 0)}
        if code in fixed:
            oq = fixed[code]
        elif code in (Op.RELU, Op.RELU6):
            oq = (self.quant(x)[0], -128)
        else:
            oq = out_quant
        assert oq is not None, "QUANTIZE needs an explicit output quantization"
        y = self.activation(name, self.shape(x), oq)
        self.add_op(code, [x], [y], tfl.QuantizeOptionsT() if code == Op.QUANTIZE else None)
        return y

    def reshape(self, name: str, x: int, new_shape: Sequence[int]) -> int:
        """RESHAPE with the target shape both as an int32 input and in the options."""
        assert math.prod(new_shape) == math.prod(self.shape(x))
        shape_t = self._int32_const(f"{name}/shape", new_shape)
        y = self.activation(name, new_shape, self.quant(x))
        opts = tfl.ReshapeOptionsT()
        opts.newShape = list(new_shape)
        self.add_op(Op.RESHAPE, [x, shape_t], [y], opts)
        return y

    def mean(self, name: str, x: int, axes: Sequence[int], out_quant: tuple[float, int]) -> int:
        """MEAN with keep_dims over the given axes (an int32 constant input)."""
        axes_t = self._int32_const(f"{name}/axes", axes)
        shape = [1 if i in axes else d for i, d in enumerate(self.shape(x))]
        y = self.activation(name, shape, out_quant)
        opts = tfl.ReducerOptionsT()
        opts.keepDims = True
        self.add_op(Op.MEAN, [x, axes_t], [y], opts)
        return y

    def softmax(self, name: str, x: int) -> int:
        y = self.activation(name, self.shape(x), (1.0 / 256, -128))
        opts = tfl.SoftmaxOptionsT()
        opts.beta = 1.0
        self.add_op(Op.SOFTMAX, [x], [y], opts)
        return y


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------


def branchy() -> bytes:
    """Small CNN with a residual block and parallel pooling branches.

    Exercises CONV_2D, DEPTHWISE_CONV_2D, ADD (residual join), MAX_POOL_2D and
    AVERAGE_POOL_2D branches joined by CONCATENATION, then RESHAPE,
    FULLY_CONNECTED and SOFTMAX.

    The stem is laid out so that greedy "largest first, lowest offset that
    fits" placement is not optimal: stem (2048 B, ops 0-1), reduce (1536 B,
    ops 1-2), pool (384 B, ops 2-3) and expand (2048 B, ops 3-4) form a chain
    of interleaved lifetimes. Greedy puts stem and expand at offset 0 and
    reduce above stem, so pool overlaps both and has to go on top: 3968 B
    against a max-live lower bound of 3584 B (stem + reduce), which a smarter
    placement (pool at 0, expand above it) reaches.
    """
    net = Int8Net("memplan fixture: branchy int8 CNN", seed=1)
    x = net.input("input", [1, 16, 16, 3])
    stem = net.conv2d("stem", x, 8, act=Act.RELU)  # 16x16x8 = 2048 B
    reduce = net.conv2d("reduce", stem, 6, kernel=1)  # 16x16x6 = 1536 B
    pool = net.pool2d("pool", Op.MAX_POOL_2D, reduce)  # 8x8x6 = 384 B
    expand = net.conv2d("expand", pool, 32, kernel=1, act=Act.RELU)  # 8x8x32 = 2048 B
    down = net.conv2d("down", expand, 16, stride=2, act=Act.RELU)  # 4x4x16
    # Residual block: down -> depthwise -> pointwise, added back to down.
    dw = net.depthwise_conv2d("block/dw", down, act=Act.RELU)
    pw = net.conv2d("block/pw", dw, 16, kernel=1)
    res = net.binary("block/add", Op.ADD, down, pw)
    # Two pooling branches over the same tensor, joined on channels.
    mp = net.pool2d("branch/maxpool", Op.MAX_POOL_2D, res)  # 2x2x16
    ap = net.pool2d("branch/avgpool", Op.AVERAGE_POOL_2D, res)  # 2x2x16
    cat = net.concat("branch/concat", [mp, ap])  # 2x2x32
    flat = net.reshape("head/flatten", cat, [1, 2 * 2 * 32])
    logits = net.fully_connected("head/fc", flat, 10, out_std=1.5)
    probs = net.softmax("head/softmax", logits)
    return net.finish([x], [probs])


def elementwise() -> bytes:
    """Chain of int8 elementwise ops where in-place reuse is plausible.

    Ops: RELU, ADD, LOGISTIC, MUL, RESHAPE, TANH, SUB, QUANTIZE (int8 ->
    int8 requantization), MUL. Every activation is exactly 512 bytes
    ([1,8,8,8] before the RESHAPE, [1,16,32] after), so a greedy planner
    sees nothing but ties. Some ops could write over an input that dies there
    (ADD over the model input, LOGISTIC, MUL, QUANTIZE, SUB over its second
    operand, RESHAPE as a pure alias) and some cannot (RELU: its input is
    read again by the ADD; TANH: its input is read again by the SUB).
    """
    net = Int8Net("memplan fixture: int8 elementwise chain", seed=2)
    x = net.input("input", [1, 8, 8, 8], scale=0.02, zero_point=3)
    relu = net.unary("relu", Op.RELU, x)
    total = net.binary("add", Op.ADD, x, relu)  # last use of the input
    sig = net.unary("logistic", Op.LOGISTIC, total)
    gated = net.binary("mul", Op.MUL, sig, relu)  # last use of relu
    view = net.reshape("reshape", gated, [1, 16, 32])
    tanh = net.unary("tanh", Op.TANH, view)
    diff = net.binary("sub", Op.SUB, tanh, view)  # last use of the reshape output
    requant = net.unary("requantize", Op.QUANTIZE, diff, out_quant=(net.quant(diff)[0] * 1.5, -7))
    out = net.binary("mul_out", Op.MUL, requant, tanh)
    return net.finish([x], [out])


def mean_tconv() -> bytes:
    """CONV_2D -> TRANSPOSE_CONV (with bias) -> MEAN -> CONV_2D.

    MEAN reduces axes [1, 2] with keep_dims and requantizes (output scale and
    zero point differ from the input's). Both kernels request arena scratch
    in TFLM: int8 MEAN an int32 sum per output element (16 B here), int8
    TRANSPOSE_CONV an int32 accumulator per output element (4096 B here, more
    than all activations together). The int32 constants (output_shape, axes)
    must not be planned as activations.
    """
    net = Int8Net("memplan fixture: int8 mean + transpose conv", seed=3)
    x = net.input("input", [1, 8, 8, 4])
    feat = net.conv2d("conv", x, 8, act=Act.RELU)  # 8x8x8
    up = net.transpose_conv("tconv", feat, 4)  # 16x16x4
    scale, zero_point = net.quant(up)
    pooled = net.mean("mean", up, [1, 2], out_quant=(scale / 2, zero_point + 5))  # 1x1x1x4
    out = net.conv2d("classifier", pooled, 6, kernel=1)  # 1x1x1x6
    return net.finish([x], [out])


def multi_output() -> bytes:
    """Two subgraph outputs, a dead op output and a late use of the input.

    ``stem`` is produced by the first op and is subgraph output 1, so it must
    stay allocated until the end although its last consumer runs early.
    ``stem_pool`` is produced and never read (neither consumed nor an
    output). The model input is read by the first op and again by ``skip``,
    the second-to-last op. Subgraph output 0 is the final ADD.
    """
    net = Int8Net("memplan fixture: multiple outputs, dead tensor", seed=4)
    x = net.input("input", [1, 8, 8, 4])
    stem = net.conv2d("stem", x, 8, act=Act.RELU)  # output 1
    dw = net.depthwise_conv2d("dw", stem, act=Act.RELU)
    net.pool2d("stem_pool", Op.AVERAGE_POOL_2D, stem)  # never consumed
    body = net.conv2d("body", dw, 8)
    skip = net.conv2d("skip", x, 8, kernel=1)  # late use of the model input
    out = net.binary("add", Op.ADD, body, skip)  # output 0
    return net.finish([x], [out, stem])


def equal_sizes() -> bytes:
    """Two stacked diamonds in which every activation is 512 bytes.

    stem fans out to three branches (depthwise, depthwise, 1x1 conv) that are
    joined pairwise by ADDs and then again; the result fans out once more
    into a second diamond. With all sizes equal, a size-sorted greedy planner
    decides everything through its tie-break (tensor index, first use,
    lifetime length, ...), which is what this fixture pins down.
    """
    net = Int8Net("memplan fixture: equal-size diamonds", seed=5)
    x = net.input("input", [1, 8, 8, 8])
    stem = net.conv2d("stem", x, 8, kernel=1, act=Act.RELU)
    left = net.depthwise_conv2d("d1/left", stem)
    mid = net.depthwise_conv2d("d1/mid", stem, act=Act.RELU)
    right = net.conv2d("d1/right", stem, 8, kernel=1)
    join_a = net.binary("d1/join_a", Op.ADD, left, mid)
    join_b = net.binary("d1/join_b", Op.ADD, mid, right)
    join = net.binary("d1/join", Op.ADD, join_a, join_b)
    up = net.conv2d("d2/up", join, 8, kernel=1, act=Act.RELU)
    down = net.depthwise_conv2d("d2/down", join)
    out = net.binary("d2/join", Op.ADD, up, down)
    return net.finish([x], [out])


def unary_chain() -> bytes:
    """A chain of one-input elementwise ops, each the only reader of its input.

    Ops: ADD (so the chain does not start on the model input), RELU, RELU6, TANH,
    LOGISTIC. Every input dies at the op that reads it, so each op can write its
    output over its input: this is the fixture that verifies in-place RELU, RELU6
    and TANH in TFLM.
    """
    net = Int8Net("memplan fixture: int8 unary chain", seed=6)
    x = net.input("input", [1, 8, 8, 4], scale=0.05, zero_point=-2)
    doubled = net.binary("add", Op.ADD, x, x)
    relu = net.unary("relu", Op.RELU, doubled)
    relu6 = net.unary("relu6", Op.RELU6, relu)
    tanh = net.unary("tanh", Op.TANH, relu6)
    out = net.unary("logistic", Op.LOGISTIC, tanh)
    return net.finish([x], [out])


MODELS: dict[str, Callable[[], bytes]] = {
    "branchy.tflite": branchy,
    "elementwise.tflite": elementwise,
    "mean_tconv.tflite": mean_tconv,
    "multi_output.tflite": multi_output,
    "equal_sizes.tflite": equal_sizes,
    "unary_chain.tflite": unary_chain,
}


# ---------------------------------------------------------------------------
# Self-check
# ---------------------------------------------------------------------------


def run(model_bytes: bytes, input_seed: int) -> list[np.ndarray]:
    """Runs the model once in the TFLite Micro interpreter on random inputs.

    Every subgraph input gets uniformly random int8 data drawn from
    ``input_seed``; returns the outputs in subgraph order.
    """
    interp = runtime.Interpreter.from_bytes(model_bytes, arena_size=ARENA_SIZE)
    subgraph = _parse(model_bytes).subgraphs[0]
    rng = np.random.default_rng(input_seed)
    for i in range(len(subgraph.inputs)):
        details = interp.get_input_details(i)
        data = rng.integers(-128, 128, size=tuple(details["shape"]), dtype=np.int8)
        interp.set_input(data.astype(details["dtype"]), i)
    interp.invoke()
    return [interp.get_output(i) for i in range(len(subgraph.outputs))]


def _parse(model_bytes: bytes) -> tfl.ModelT:
    return tfl.ModelT.InitFromObj(tfl.Model.GetRootAs(model_bytes, 0))


def arena_bounds(model_bytes: bytes) -> tuple[int, int]:
    """(max-live lower bound, greedy size-descending first-fit peak) in bytes.

    A non-constant tensor lives from the op that produces it (op 0 for
    subgraph inputs) to its last consumer (the last op for subgraph outputs;
    the producing op itself if nothing reads it). Greedy ties are broken by
    tensor index. No alignment padding, no kernel scratch buffers. (TFLM's own
    planner differs in one point: it also treats subgraph outputs as live
    from the start of the invocation.)
    """
    sg = _parse(model_bytes).subgraphs[0]
    n_ops = len(sg.operators)
    first_use = {t: i for i, op in enumerate(sg.operators) for t in op.outputs}
    first_use.update({t: 0 for t in sg.inputs})
    last_use = dict(first_use)
    for i, op in enumerate(sg.operators):
        last_use.update({t: i for t in op.inputs if t in first_use})
    last_use.update({t: n_ops - 1 for t in sg.outputs})

    buffers = []  # (size, first, last, tensor index)
    for t in sorted(first_use):
        elem_size = 4 if sg.tensors[t].type == tfl.TensorType.INT32 else 1
        buffers.append((math.prod(sg.tensors[t].shape) * elem_size, first_use[t], last_use[t], t))
    lower = max(
        sum(size for size, first, last, _ in buffers if first <= step <= last)
        for step in range(n_ops)
    )

    placed: list[tuple[int, int, int, int]] = []  # (offset, size, first, last)
    for size, first, last, _ in sorted(buffers, key=lambda b: (-b[0], b[3])):
        taken = sorted((o, s) for o, s, f, e in placed if f <= last and first <= e)
        offset = 0
        for o, s in taken:
            if offset + size <= o:
                break
            offset = max(offset, o + s)
        placed.append((offset, size, first, last))
    return lower, max(o + s for o, s, _, _ in placed)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "out_dir", nargs="?", type=Path, default=DEFAULT_OUT_DIR,
        help=f"output folder (default: {DEFAULT_OUT_DIR.relative_to(REPO_ROOT)})",
    )
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)

    ok = True
    for file_name, build in MODELS.items():
        data = build()
        (args.out_dir / file_name).write_bytes(data)
        sg = _parse(data).subgraphs[0]
        lower, greedy = arena_bounds(data)
        print(
            f"{file_name}: {len(data)} bytes, {len(sg.operators)} ops, {len(sg.tensors)} tensors, "
            f"arena lower bound {lower} B, greedy {greedy} B"
        )
        outputs, others = run(data, input_seed=0), run(data, input_seed=1)
        for i, (out, other) in enumerate(zip(outputs, others)):
            # Non-constant within one run and dependent on the input.
            varies = out.min() != out.max() and not np.array_equal(out, other)
            ok &= varies
            print(
                f"  output {i}: shape {list(out.shape)} {out.dtype} "
                f"range [{out.min()}, {out.max()}] crc32 {zlib.crc32(out.tobytes()):08x}"
                + ("" if varies else "  <-- CONSTANT OUTPUT")
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
