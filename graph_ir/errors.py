"""Exception hierarchy of the IR, its importers and exporters.

Every error names, where known, the file, the node and the field at fault, so a CLI can print
one clear line and an API user can catch a specific class.
"""

from __future__ import annotations

__all__ = [
    "CompilerOptError",
    "GraphIRError",
    "VerificationError",
    "OwnershipError",
    "UseDefError",
    "CycleError",
    "TopologicalOrderError",
    "DuplicateNameError",
    "UndefinedValueError",
    "TypeConsistencyError",
    "InvalidShapeError",
    "ModelFormatError",
    "EmptyModelError",
    "CorruptModelError",
    "UnknownFormatError",
    "UnsupportedOpError",
    "UnsupportedOpsetError",
    "TensorDataError",
    "ExternalDataError",
    "LimitExceededError",
    "ExportError",
]


class CompilerOptError(Exception):
    """Base of every error this project raises on purpose.

    `file`, `node` and `field` (and for text formats `line`/`column`) locate the fault;
    `str(err)` joins them into one line.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        node: str | None = None,
        field: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.node = node
        self.field = field
        self.line = line
        self.column = column

    def with_context(self, *, file: str | None = None, node: str | None = None, field: str | None = None) -> CompilerOptError:
        """Fill in missing location details (importers add the file name on the way out)."""
        if file is not None and self.file is None:
            self.file = file
        if node is not None and self.node is None:
            self.node = node
        if field is not None and self.field is None:
            self.field = field
        return self

    def __str__(self) -> str:
        parts = []
        if self.line is not None:  # text formats: file:line:column like a compiler
            column = f":{self.column}" if self.column is not None else ""
            parts.append(f"{self.file or '<text>'}:{self.line}{column}")
        elif self.file:
            parts.append(str(self.file))
        if self.node:
            parts.append(f"node '{self.node}'")
        if self.field:
            parts.append(f"field '{self.field}'")
        prefix = ": ".join(parts)
        return f"{prefix}: {self.message}" if prefix else self.message


class GraphIRError(CompilerOptError):
    """Misuse of the IR API or a broken IR invariant."""


class VerificationError(GraphIRError):
    """`graph.verify()` found a broken invariant."""


class OwnershipError(VerificationError):
    """A node or value belongs to another graph than the one holding it."""


class UseDefError(VerificationError):
    """A value's recorded uses disagree with the inputs of the nodes that use it."""


class CycleError(VerificationError):
    """The graph's dataflow has a cycle."""


class TopologicalOrderError(VerificationError):
    """A node comes before the producer of one of its inputs."""


class DuplicateNameError(VerificationError):
    """Two nodes or two values share a name within one scope."""


class UndefinedValueError(VerificationError):
    """A node uses a value that nothing in scope defines."""


class TypeConsistencyError(VerificationError):
    """Types disagree: a constant and its declared type, or an op's operands."""


class InvalidShapeError(VerificationError):
    """A declared shape is impossible: negative dims or an element count that overflows."""


class ModelFormatError(CompilerOptError):
    """A model file cannot be read: wrong format, corrupt bytes, unsupported content."""


class EmptyModelError(ModelFormatError):
    """The file is empty or holds no graph."""


class CorruptModelError(ModelFormatError):
    """The bytes are not a valid model of the format the file claims (truncated or random)."""


class UnknownFormatError(ModelFormatError):
    """No importer or exporter is registered for the file's extension."""


class UnsupportedOpError(ModelFormatError):
    """An op that the source format's own registry does not know."""


class UnsupportedOpsetError(ModelFormatError):
    """An opset version outside the range that the installed tools support."""


class TensorDataError(ModelFormatError):
    """A constant's stored data does not match its dtype and dims."""


class ExternalDataError(ModelFormatError):
    """External tensor data is missing, too short, or points outside the model's folder."""


class LimitExceededError(ModelFormatError):
    """The input is over a resource limit of `graph_ir.io.limits` (size, nesting, nodes, elements);
    `field` names the limit, the message says how to raise it."""


class ExportError(CompilerOptError):
    """A graph cannot be written in the requested format."""
