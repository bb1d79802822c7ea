"""Quantized StableHLO (`!quant.uniform<...>` element types) with MLIR bindings that ship no
`quant` dialect (jaxlib's).

Before parsing, each distinct quantized element type is replaced by its storage type tagged with
a string encoding (`tensor<4x!quant.uniform<i8:f32, 0.5:-1>>` -> `tensor<4xi8, "__cq0">`), and
`uniform_quantize`/`uniform_dequantize` are spelled `convert` (same assembly format, and
`convert` accepts the storage types), so StableHLO's verifier still checks everything else.
The importer maps the tags back: such values get the quantized storage dtype (QINT8...) and their
`QuantParams` (scale, zero point, expressed type, read from the type text) in
`value.meta["stablehlo.quant"]`; a `convert` with a quantized result is `uniform_quantize`, one
with only a quantized operand `uniform_dequantize`. `restore` puts the original text back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from graph_ir.dtypes import DType
from graph_ir.errors import UnsupportedOpError

__all__ = ["QuantParams", "QuantTable", "hide_quant_types", "QUANT_TAG"]

QUANT_TAG = "__cq"
_OPEN = "!quant."
_STORAGE = re.compile(r"!quant\.uniform<(i\d+|u\d+)(?:<(-?\d+):(-?\d+)>)?:(\w+)(?::(\d+))?,\s*(.*)>$", re.DOTALL)
_SCALE = re.compile(r"([-+0-9.eE]+)(?::(-?\d+))?")
_TAGGED = re.compile(r'(u?i\d+), "' + QUANT_TAG + r'(\d+)"')
_QUANT_DTYPES = {"i8": DType.QINT8, "ui8": DType.QUINT8, "i16": DType.QINT16, "ui16": DType.QUINT16, "i32": DType.QINT32}
_PLAIN = {"i2": DType.INT2, "i4": DType.INT4, "ui2": DType.UINT2, "ui4": DType.UINT4, "i64": DType.INT64, "ui32": DType.UINT32}


@dataclass(frozen=True)
class QuantParams:
    """A `!quant.uniform` element type: real = scale * (stored - zero_point)."""

    text: str
    storage: str  # "i8", "ui8", ...
    expressed: str  # "f32", ...
    scales: tuple[float, ...]
    zero_points: tuple[int, ...]
    axis: int | None  # the quantized dimension of a per-axis type
    storage_min: int | None = None
    storage_max: int | None = None

    @property
    def dtype(self) -> DType | None:
        return _QUANT_DTYPES.get(self.storage) or _PLAIN.get(self.storage)

    @classmethod
    def parse(cls, text: str) -> QuantParams:
        match = _STORAGE.match(text)
        if match is None:
            raise UnsupportedOpError(f"quantized type {text!r} is not a !quant.uniform type this importer reads", field="type")
        storage, low, high, expressed, axis, rest = match.groups()
        storage = "ui" + storage[1:] if storage.startswith("u") else storage
        body = rest.strip()
        if body.startswith("{"):
            body = body.strip("{}")
        scales, zeros = [], []
        for item in filter(None, (part.strip() for part in body.split(","))):
            pair = _SCALE.fullmatch(item)
            try:
                if pair is None:
                    raise ValueError(item)
                scales.append(float(pair.group(1)))
                zeros.append(int(pair.group(2) or 0))
            except ValueError:  # found by fuzzing: "0.-1" matches the pattern but is no float
                raise UnsupportedOpError(f"cannot read scale:zero_point {item!r} of {text!r}", field="type") from None
        return cls(text, storage, expressed, tuple(scales), tuple(zeros), int(axis) if axis else None,
                   int(low) if low else None, int(high) if high else None)


class QuantTable:
    """The quantized types of one module, by tag index."""

    def __init__(self) -> None:
        self.types: list[QuantParams] = []
        self._index: dict[str, int] = {}

    def add(self, text: str) -> int:
        if text not in self._index:
            self._index[text] = len(self.types)
            self.types.append(QuantParams.parse(text))
        return self._index[text]

    def lookup(self, tag: str) -> QuantParams | None:
        if not tag.startswith(QUANT_TAG):
            return None
        index = int(tag[len(QUANT_TAG):])
        return self.types[index] if index < len(self.types) else None

    def restore(self, text: str) -> str:
        """MLIR text printed from the hidden module -> the same text with the quantized types."""
        if not self.types:
            return text
        return _TAGGED.sub(lambda m: self.types[int(m.group(2))].text, text)


_QUANT_NAME = re.compile(r"!quant\.\w+<")


def _closing(text: str, start: int) -> int:
    """Index just past the `>` that closes the `<` of the quant type at `start`."""
    head = _QUANT_NAME.match(text, start)
    if head is None:
        raise UnsupportedOpError(f"line {text.count(chr(10), 0, start) + 1}: malformed !quant type", field="type")
    depth = 0
    for index in range(head.end() - 1, len(text)):
        char = text[index]
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
            if depth == 0:
                return index + 1
    raise UnsupportedOpError("unterminated !quant type", field="type")


def hide_quant_types(text: str) -> tuple[str, QuantTable]:
    """See the module doc; returns the text MLIR can parse and the table of hidden types."""
    table = QuantTable()
    if _OPEN not in text:
        return text, table
    pieces, last, start = [], 0, text.find(_OPEN)
    while start >= 0:
        end = _closing(text, start)
        quant = text[start:end]
        if not text.startswith(">", end) or not re.search(r"tensor<[0-9?x]*$", text[max(0, start - 512):start]):
            line = text.count("\n", 0, start) + 1
            raise UnsupportedOpError(f"line {line}: a quantized type outside a tensor<...> is not supported", field="type")
        params_index = table.add(quant)
        storage = table.types[params_index].storage
        pieces.append(text[last:start])
        pieces.append(f'{storage}, "{QUANT_TAG}{params_index}"')
        last = end
        start = text.find(_OPEN, end)
    pieces.append(text[last:])
    hidden = "".join(pieces)
    hidden = hidden.replace("stablehlo.uniform_quantize", "stablehlo.convert").replace("stablehlo.uniform_dequantize", "stablehlo.convert")
    return hidden, table
