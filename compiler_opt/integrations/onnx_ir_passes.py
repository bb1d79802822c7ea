"""compiler-opt passes as `onnx_ir.passes` passes, for onnx_ir `PassManager`s and onnxscript's
optimizer pipeline (which is a sequence of onnx_ir passes).

`onnx_ir_pass("fuse")` looks the pass up in our registry (`passes.infra.registry`) and wraps it:
the onnx_ir model is serialized (`onnx_ir.serde`), imported into our IR, the pass runs, and the
result is exported (decisions in node `metadata_props`; with `fused_groups_as_functions=True`
each fused group becomes an ONNX local function) and deserialized again. Our IR is not onnx_ir's
(WORKSPACE.md, "The IR: why our own"), so the round trip is the bridge; it costs one
serialization each way.

The in-place contract (onnx_ir's `PassBase.__call__` checks it):
- `in_place=True` (default; what onnxscript's optimizer sequence requires): an `InPlacePass`
  that returns the SAME `ir.Model` object, whose graph, functions and opset imports are replaced
  by the pass's result when the pass changed something (values and nodes the caller held from
  the old graph belong to the old graph afterwards);
- `in_place=False`: a `FunctionalPass` that leaves the input model untouched and returns a new
  one.
`PassResult.modified` is what our pass reported.
"""

from __future__ import annotations

import logging
from typing import Any

import onnx_ir as ir
from onnx_ir.passes import FunctionalPass, InPlacePass, PassResult

from passes.infra.base import Pass, PassError
from passes.infra.registry import get_pass_class, pass_options

__all__ = ["onnx_ir_pass", "CompilerOptOnnxIrPass"]

logger = logging.getLogger(__name__)


class _Bridge:
    """Runs one compiler-opt pass on an onnx_ir model through our IR."""

    def __init__(self, pass_: Pass, *, target: Any, fused_groups_as_functions: bool) -> None:
        self.inner = pass_
        self.target = target  # cost_model.costs.Target or None (the pass's own options / defaults)
        self.fused_groups_as_functions = fused_groups_as_functions

    def run(self, model: ir.Model) -> tuple[ir.Model, bool]:
        from graph_ir.io.onnx_export import export_onnx
        from graph_ir.io.onnx_import import import_onnx

        proto = ir.serde.serialize_model(model)
        graph = import_onnx(proto)
        from passes.infra.context import PassContext

        # Errors name the pass (PassError and friends); a pass option contradicting the target too.
        result = self.inner(graph) if self.target is None else self.inner(graph, PassContext(self.target))
        result.graph.verify()
        if not result.modified:
            return model, False
        out = export_onnx(result.graph, fused_groups_as_functions=self.fused_groups_as_functions)
        return ir.serde.deserialize_model(out), True


class CompilerOptOnnxIrPass(InPlacePass):
    """A compiler-opt pass run in place on an `ir.Model` (see the module docstring)."""

    def __init__(self, bridge: _Bridge) -> None:
        super().__init__()
        self._bridge = bridge

    @property
    def inner(self) -> Pass:
        return self._bridge.inner

    def call(self, model: ir.Model) -> PassResult:
        new, modified = self._bridge.run(model)
        if modified:
            _replace_contents(model, new)
        return PassResult(model, modified)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner})"


class _FunctionalCompilerOptPass(FunctionalPass):
    def __init__(self, bridge: _Bridge) -> None:
        super().__init__()
        self._bridge = bridge

    @property
    def inner(self) -> Pass:
        return self._bridge.inner

    def call(self, model: ir.Model) -> PassResult:
        new, modified = self._bridge.run(model)
        if not modified:  # a functional pass must not hand back its input object
            new = ir.serde.deserialize_model(ir.serde.serialize_model(model))
        return PassResult(new, modified)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner})"


def _replace_contents(model: ir.Model, new: ir.Model) -> None:
    model.graph = new.graph
    model.functions.clear()
    model.functions.update(new.functions)
    model.ir_version = new.ir_version


def onnx_ir_pass(
    name: str,
    *,
    in_place: bool = True,
    target: str | None = None,
    fused_groups_as_functions: bool = False,
    **options: Any,
) -> InPlacePass | FunctionalPass:
    """The registered compiler-opt pass `name` (options as keyword arguments, `max_nodes=8` or
    `**{"max-nodes": 8}`) as an onnx_ir pass. `target` ("host", a device spec or a `Target`) is handed
    to the pass as its context (`compiler_opt.integrations._target.resolve_target`); a `devices=`
    option that contradicts it is an error."""
    cls = get_pass_class(name)
    known = {o.field_name for o in pass_options(cls)}
    kwargs = {key.replace("-", "_"): value for key, value in options.items()}
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise PassError(
            f"pass '{name}' has no option {', '.join(repr(u) for u in unknown)} "
            f"(options: {', '.join(sorted(known)) or 'none'})",
            pass_name=name,
        )
    resolved = None
    if target is not None:
        from compiler_opt.integrations._target import resolve_target

        resolved = resolve_target(target)
    try:
        pass_ = cls(**kwargs)
    except PassError:
        raise
    except (TypeError, ValueError) as err:
        raise PassError(f"pass '{name}': bad options {kwargs}: {err}", pass_name=name) from err
    if resolved is not None:
        from passes.infra.context import resolve_pipeline_target

        resolve_pipeline_target([pass_], resolved)  # a contradicting devices= fails now, not later
    bridge = _Bridge(pass_, target=resolved, fused_groups_as_functions=fused_groups_as_functions)
    return CompilerOptOnnxIrPass(bridge) if in_place else _FunctionalCompilerOptPass(bridge)
