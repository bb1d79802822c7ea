"""Tile kernels as TVM tensor expressions: the ops that dominate the workload suite and the HLO
testdata (matmul, batch matmul, conv2d NHWC/NCHW, depthwise conv, reductions, an elementwise
chain feeding a reduction), float32.

A `KernelSpec` is (kind, dims); `build_kernel(spec)` returns a `TileKernel` with its TensorIR
function (`te.create_prim_func`), the name of the main block (the one with reduction axes; the
others are injective producers that every schedule inlines), and the small dataflow graph of its
stages that the learned model reads (`stages`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["KINDS", "KernelSpec", "Stage", "TileKernel", "build_kernel"]

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

    def __post_init__(self) -> None:
        if self.kind not in _DIMS:
            raise ValueError(f"unknown tile kernel kind {self.kind!r} (known: {', '.join(KINDS)})")
        if len(self.dims) != len(_DIMS[self.kind]) or any(int(d) < 1 for d in self.dims):
            raise ValueError(f"{self.kind} takes positive dims {_DIMS[self.kind]}, got {self.dims}")

    @property
    def named(self) -> dict[str, int]:
        return dict(zip(_DIMS[self.kind], self.dims))

    @property
    def signature(self) -> str:
        return f"tvm-tile:{self.kind}({','.join(str(d) for d in self.dims)}):float32"

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
    """One node of a kernel's dataflow graph: op kind, output shape, layout, inputs (stage indices)."""

    op: str
    shape: tuple[int, ...]
    layout: str
    inputs: tuple[int, ...]
    reduce_extents: tuple[int, ...] = ()


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


def build_kernel(spec: KernelSpec) -> TileKernel:
    """The TensorIR function of `spec` (imports TVM)."""
    from tvm import te

    d = spec.named
    f32 = "float32"
    if spec.kind in ("matmul", "batch_matmul"):
        b = (d["b"],) if spec.kind == "batch_matmul" else ()
        a = te.placeholder(b + (d["m"], d["k"]), f32, name="A")
        w = te.placeholder(b + (d["k"], d["n"]), f32, name="B")
        k = te.reduce_axis((0, d["k"]), name="k")
        if b:
            c = te.compute(b + (d["m"], d["n"]), lambda q, i, j: te.sum(a[q, i, k] * w[q, k, j], axis=k), name="C")
        else:
            c = te.compute((d["m"], d["n"]), lambda i, j: te.sum(a[i, k] * w[k, j], axis=k), name="C")
        stages = (Stage("input", _shape_ints(a), "row_major", ()), Stage("input", _shape_ints(w), "row_major", ()),
                  Stage("matmul", _shape_ints(c), "row_major", (0, 1), (d["k"],)))
        return TileKernel(spec, te.create_prim_func([a, w, c]), "C", (), stages, (_shape_ints(a), _shape_ints(w), _shape_ints(c)))
    if spec.kind in ("conv2d_nhwc", "conv2d_nchw", "depthwise_nhwc"):
        return _conv(spec, d)
    rows, cols = d["rows"], d["cols"]
    x = te.placeholder((rows, cols), f32, name="X")
    r = te.reduce_axis((0, cols), name="r")
    if spec.kind == "reduce":
        y = te.compute((rows,), lambda i: te.sum(x[i, r], axis=r), name="Y")
        stages = (Stage("input", (rows, cols), "row_major", ()), Stage("reduce", (rows,), "row_major", (0,), (cols,)))
        return TileKernel(spec, te.create_prim_func([x, y]), "Y", (), stages, ((rows, cols), (rows,)))
    scaled = te.compute((rows, cols), lambda i, j: x[i, j] * 0.5 + 1.0, name="S")
    expd = te.compute((rows, cols), lambda i, j: te.exp(scaled[i, j]), name="E")
    y = te.compute((rows,), lambda i: te.sum(expd[i, r], axis=r), name="Y")
    stages = (Stage("input", (rows, cols), "row_major", ()), Stage("fma", (rows, cols), "row_major", (0,)),
              Stage("exp", (rows, cols), "row_major", (1,)), Stage("reduce", (rows,), "row_major", (2,), (cols,)))
    return TileKernel(spec, te.create_prim_func([x, y]), "Y", ("S", "E"), stages, ((rows, cols), (rows,)))


def _conv(spec: KernelSpec, d: dict[str, int]) -> TileKernel:
    from tvm import te

    n, h, w, c, kh, kw, s = d["n"], d["h"], d["w"], d["c"], d["kh"], d["kw"], d["stride"]
    ph, pw = kh // 2, kw // 2
    oh, ow = _out(h, kh, s), _out(w, kw, s)
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    nchw = spec.kind == "conv2d_nchw"
    layout = "NCHW" if nchw else "NHWC"

    def inside(y: Any, x: Any) -> Any:
        return te.all(y >= ph, y < h + ph, x >= pw, x < w + pw)

    if nchw:
        data = te.placeholder((n, c, h, w), "float32", name="X")
        padded = te.compute((n, c, h + 2 * ph, w + 2 * pw), lambda b, ch, y, x: te.if_then_else(inside(y, x), data[b, ch, y - ph, x - pw], 0.0), name="P")
    else:
        data = te.placeholder((n, h, w, c), "float32", name="X")
        padded = te.compute((n, h + 2 * ph, w + 2 * pw, c), lambda b, y, x, ch: te.if_then_else(inside(y, x), data[b, y - ph, x - pw, ch], 0.0), name="P")
    if spec.kind == "depthwise_nhwc":
        weight = te.placeholder((kh, kw, c), "float32", name="W")
        out = te.compute((n, oh, ow, c), lambda b, y, x, ch: te.sum(padded[b, y * s + ry, x * s + rx, ch] * weight[ry, rx, ch], axis=[ry, rx]), name="O")
        reduce = (kh, kw)
        op = "depthwise_conv"
    else:
        f = d["f"]
        rc = te.reduce_axis((0, c), name="rc")
        if nchw:
            weight = te.placeholder((f, c, kh, kw), "float32", name="W")
            out = te.compute((n, f, oh, ow), lambda b, o, y, x: te.sum(padded[b, rc, y * s + ry, x * s + rx] * weight[o, rc, ry, rx], axis=[rc, ry, rx]), name="O")
        else:
            weight = te.placeholder((kh, kw, c, f), "float32", name="W")
            out = te.compute((n, oh, ow, f), lambda b, y, x, o: te.sum(padded[b, y * s + ry, x * s + rx, rc] * weight[ry, rx, rc, o], axis=[rc, ry, rx]), name="O")
        reduce = (c, kh, kw)
        op = "conv"
    stages = (Stage("input", _shape_ints(data), layout, ()), Stage("pad", _shape_ints(padded), layout, (0,)),
              Stage("input", _shape_ints(weight), "HWIO" if not nchw else "OIHW", ()), Stage(op, _shape_ints(out), layout, (1, 2), reduce))
    func = te.create_prim_func([data, weight, out])
    return TileKernel(spec, func, "O", ("P",), stages, (_shape_ints(data), _shape_ints(weight), _shape_ints(out)))


def _shape_ints(tensor: Any) -> tuple[int, ...]:
    return tuple(int(x) for x in tensor.shape)
