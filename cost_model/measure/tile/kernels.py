"""Tile kernels as TVM tensor expressions: the ops that dominate the workload suite and the HLO
testdata (matmul, batch matmul, conv2d NHWC/NCHW, depthwise conv, reductions, an elementwise
chain feeding a reduction). Element types (`DTYPES`): float32, what the datasets and rankers know;
float64; and bfloat16 / float16 (an LLM's dots), whose products and sums are carried in float32 (as
XLA's CPU backend does) and rounded to the output type at the end, in a stage after the main block
that no schedule touches. A dot whose bf16 operands give a float32 result (XLA's
`preferred_element_type`) is `out_dtype="float32"`.

A `KernelSpec` is (kind, dims); `build_kernel(spec)` returns a `TileKernel` with its TensorIR
function (`te.create_prim_func`), the name of the main block (the one with reduction axes; the
others are injective producers that every schedule inlines), and the small dataflow graph of its
stages that the learned model reads (`stages`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["DTYPES", "KINDS", "KernelSpec", "Stage", "TileKernel", "accumulator", "build_kernel"]

DTYPES = {"float32": "f32", "float64": "f64", "bfloat16": "bf16", "float16": "f16"}  # element type -> graph_ir's short name (`DType`)
KINDS = ("matmul", "batch_matmul", "conv2d_nhwc", "conv2d_nchw", "depthwise_nhwc", "reduce", "ew_reduce")

# Dims each kind takes, in order.
_DIMS = {
    "matmul": ("m", "n", "k"),
    "batch_matmul": ("b", "m", "n", "k"),
    "conv2d_nhwc": ("n", "h", "w", "c", "f", "kh", "kw", "stride"),
    "conv2d_nchw": ("n", "h", "w", "c", "f", "kh", "kw", "stride"),
    "depthwise_nhwc": ("n", "h", "w", "c", "kh", "kw", "stride"),
    "reduce": ("rows", "cols"),
    "ew_reduce": ("rows", "cols"),
}


@dataclass(frozen=True)
class KernelSpec:
    kind: str
    dims: tuple[int, ...]
    source: str = ""  # where the shape came from (workload / HLO file); not part of the identity
    dtype: str = "float32"  # the inputs' element type
    out_dtype: str = ""  # the result's, when it differs (bf16 operands, float32 result); "" = dtype

    def __post_init__(self) -> None:
        if self.kind not in _DIMS:
            raise ValueError(f"unknown tile kernel kind {self.kind!r} (known: {', '.join(KINDS)})")
        if len(self.dims) != len(_DIMS[self.kind]) or any(int(d) < 1 for d in self.dims):
            raise ValueError(f"{self.kind} takes positive dims {_DIMS[self.kind]}, got {self.dims}")
        for name, value in (("dtype", self.dtype), ("out_dtype", self.out_dtype or self.dtype)):
            if value not in DTYPES:
                raise ValueError(f"tile kernels take {name} one of {', '.join(DTYPES)}, got {value!r}")
        if self.out_dtype == self.dtype:
            object.__setattr__(self, "out_dtype", "")  # one spelling per kernel, so one signature

    @property
    def result_dtype(self) -> str:
        return self.out_dtype or self.dtype

    @property
    def float32_twin(self) -> KernelSpec:
        """The same loop nest in float32: what the rankers, fitted on float32 kernels only, score."""
        return KernelSpec(self.kind, self.dims, self.source)

    @property
    def named(self) -> dict[str, int]:
        return dict(zip(_DIMS[self.kind], self.dims))

    @property
    def signature(self) -> str:
        types = self.dtype + (f"->{self.out_dtype}" if self.out_dtype else "")
        return f"tvm-tile:{self.kind}({','.join(str(d) for d in self.dims)}):{types}"

    @property
    def flops(self) -> int:
        d = self.named
        if self.kind == "matmul":
            return 2 * d["m"] * d["n"] * d["k"]
        if self.kind == "batch_matmul":
            return 2 * d["b"] * d["m"] * d["n"] * d["k"]
        if self.kind in ("conv2d_nhwc", "conv2d_nchw"):
            oh, ow = _out(d["h"], d["kh"], d["stride"]), _out(d["w"], d["kw"], d["stride"])
            return 2 * d["n"] * oh * ow * d["f"] * d["c"] * d["kh"] * d["kw"]
        if self.kind == "depthwise_nhwc":
            oh, ow = _out(d["h"], d["kh"], d["stride"]), _out(d["w"], d["kw"], d["stride"])
            return 2 * d["n"] * oh * ow * d["c"] * d["kh"] * d["kw"]
        if self.kind == "reduce":
            return d["rows"] * d["cols"]
        return 4 * d["rows"] * d["cols"]  # ew_reduce: mul, add, exp, add


@dataclass(frozen=True)
class Stage:
    """One node of a kernel's dataflow graph: op kind, output shape, layout, inputs (stage indices),
    and the element type its values are held in (the main stage: the kernel's result type)."""

    op: str
    shape: tuple[int, ...]
    layout: str
    inputs: tuple[int, ...]
    reduce_extents: tuple[int, ...] = ()
    dtype: str = "float32"


@dataclass
class TileKernel:
    spec: KernelSpec
    func: Any  # tvm PrimFunc
    main_block: str
    inline_blocks: tuple[str, ...]
    stages: tuple[Stage, ...]
    arg_shapes: tuple[tuple[int, ...], ...]


def _out(size: int, window: int, stride: int) -> int:
    pad = window // 2
    return (size + 2 * pad - window) // stride + 1


def accumulator(dtype: str) -> str:
    """The type products and sums are carried in: float64 for float64, float32 otherwise."""
    return "float64" if dtype == "float64" else "float32"


def _widen(value: Any, dtype: str) -> Any:
    """`value` in its accumulator type (a no-op for float32 and float64, so their TIR is unchanged)."""
    return value if accumulator(dtype) == dtype else value.astype(accumulator(dtype))


def _finish(spec: KernelSpec, inputs: list[Any], main: Any, shape: tuple[int, ...]) -> Any:
    """The PrimFunc of `inputs` -> `main`, with a last stage rounding to the result type where the
    accumulator differs (left unscheduled: the tile knobs act on the main block)."""
    from tvm import te

    if main.dtype == spec.result_dtype:
        return te.create_prim_func([*inputs, main])
    rounded = te.compute(shape, lambda *i: main(*i).astype(spec.result_dtype), name="R")
    return te.create_prim_func([*inputs, rounded])


def build_kernel(spec: KernelSpec) -> TileKernel:
    """The TensorIR function of `spec` (imports TVM)."""
    from tvm import te

    d = spec.named
    e = spec.dtype
    if spec.kind in ("matmul", "batch_matmul"):
        b = (d["b"],) if spec.kind == "batch_matmul" else ()
        a = te.placeholder(b + (d["m"], d["k"]), e, name="A")
        w = te.placeholder(b + (d["k"], d["n"]), e, name="B")
        k = te.reduce_axis((0, d["k"]), name="k")
        if b:
            c = te.compute(b + (d["m"], d["n"]), lambda q, i, j: te.sum(_widen(a[q, i, k], e) * _widen(w[q, k, j], e), axis=k), name="C")
        else:
            c = te.compute((d["m"], d["n"]), lambda i, j: te.sum(_widen(a[i, k], e) * _widen(w[k, j], e), axis=k), name="C")
        stages = (Stage("input", _shape_ints(a), "row_major", (), dtype=e), Stage("input", _shape_ints(w), "row_major", (), dtype=e),
                  Stage("matmul", _shape_ints(c), "row_major", (0, 1), (d["k"],), spec.result_dtype))
        func = _finish(spec, [a, w], c, _shape_ints(c))
        return TileKernel(spec, func, "C", (), stages, (_shape_ints(a), _shape_ints(w), _shape_ints(c)))
    if spec.kind in ("conv2d_nhwc", "conv2d_nchw", "depthwise_nhwc"):
        return _conv(spec, d)
    rows, cols = d["rows"], d["cols"]
    x = te.placeholder((rows, cols), e, name="X")
    r = te.reduce_axis((0, cols), name="r")
    if spec.kind == "reduce":
        y = te.compute((rows,), lambda i: te.sum(_widen(x[i, r], e), axis=r), name="Y")
        stages = (Stage("input", (rows, cols), "row_major", (), dtype=e), Stage("reduce", (rows,), "row_major", (0,), (cols,), spec.result_dtype))
        func = _finish(spec, [x], y, (rows,))
        return TileKernel(spec, func, "Y", (), stages, ((rows, cols), (rows,)))
    scaled = te.compute((rows, cols), lambda i, j: _widen(x[i, j], e) * 0.5 + 1.0, name="S")
    expd = te.compute((rows, cols), lambda i, j: te.exp(scaled[i, j]), name="E")
    y = te.compute((rows,), lambda i: te.sum(expd[i, r], axis=r), name="Y")
    wide = accumulator(e)  # the producers work on widened values
    stages = (Stage("input", (rows, cols), "row_major", (), dtype=e), Stage("fma", (rows, cols), "row_major", (0,), dtype=wide),
              Stage("exp", (rows, cols), "row_major", (1,), dtype=wide), Stage("reduce", (rows,), "row_major", (2,), (cols,), spec.result_dtype))
    func = _finish(spec, [x], y, (rows,))
    return TileKernel(spec, func, "Y", ("S", "E"), stages, ((rows, cols), (rows,)))


def _conv(spec: KernelSpec, d: dict[str, int]) -> TileKernel:
    from tvm import te, tirx

    n, h, w, c, kh, kw, s = d["n"], d["h"], d["w"], d["c"], d["kh"], d["kw"], d["stride"]
    e = spec.dtype
    zero = 0.0 if e == "float32" else tirx.const(0, e)  # float32 keeps the literal its datasets were built with
    ph, pw = kh // 2, kw // 2
    oh, ow = _out(h, kh, s), _out(w, kw, s)
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    nchw = spec.kind == "conv2d_nchw"
    layout = "NCHW" if nchw else "NHWC"

    def inside(y: Any, x: Any) -> Any:
        return te.all(y >= ph, y < h + ph, x >= pw, x < w + pw)

    if nchw:
        data = te.placeholder((n, c, h, w), e, name="X")
        padded = te.compute((n, c, h + 2 * ph, w + 2 * pw), lambda b, ch, y, x: te.if_then_else(inside(y, x), data[b, ch, y - ph, x - pw], zero), name="P")
    else:
        data = te.placeholder((n, h, w, c), e, name="X")
        padded = te.compute((n, h + 2 * ph, w + 2 * pw, c), lambda b, y, x, ch: te.if_then_else(inside(y, x), data[b, y - ph, x - pw, ch], zero), name="P")
    if spec.kind == "depthwise_nhwc":
        weight = te.placeholder((kh, kw, c), e, name="W")
        out = te.compute((n, oh, ow, c), lambda b, y, x, ch: te.sum(_widen(padded[b, y * s + ry, x * s + rx, ch], e) * _widen(weight[ry, rx, ch], e),
                                                                    axis=[ry, rx]), name="O")
        reduce = (kh, kw)
        op = "depthwise_conv"
    else:
        f = d["f"]
        rc = te.reduce_axis((0, c), name="rc")
        if nchw:
            weight = te.placeholder((f, c, kh, kw), e, name="W")
            out = te.compute((n, f, oh, ow), lambda b, o, y, x: te.sum(_widen(padded[b, rc, y * s + ry, x * s + rx], e) * _widen(weight[o, rc, ry, rx], e),
                                                                       axis=[rc, ry, rx]), name="O")
        else:
            weight = te.placeholder((kh, kw, c, f), e, name="W")
            out = te.compute((n, oh, ow, f), lambda b, y, x, o: te.sum(_widen(padded[b, y * s + ry, x * s + rx, rc], e) * _widen(weight[ry, rx, rc, o], e),
                                                                       axis=[rc, ry, rx]), name="O")
        reduce = (c, kh, kw)
        op = "conv"
    stages = (Stage("input", _shape_ints(data), layout, (), dtype=e), Stage("pad", _shape_ints(padded), layout, (0,), dtype=e),
              Stage("input", _shape_ints(weight), "HWIO" if not nchw else "OIHW", (), dtype=e),
              Stage(op, _shape_ints(out), layout, (1, 2), reduce, spec.result_dtype))
    func = _finish(spec, [data, weight], out, _shape_ints(out))
    return TileKernel(spec, func, "O", ("P",), stages, (_shape_ints(data), _shape_ints(weight), _shape_ints(out)))


def _shape_ints(tensor: Any) -> tuple[int, ...]:
    return tuple(int(x) for x in tensor.shape)
