"""compiler-opt inside the pipelines people already run (loaded lazily: importing this package
imports neither torch, nor JAX, nor onnx_ir):

- `compiler_opt_backend`: a `torch.compile` backend (`backend="compiler_opt"`), see `torch_backend`;
- `xla_hook(...)`: a context manager installing an XLA HLO-module transformation for JAX, see
  `xla_hook`;
- `onnx_ir_pass(name, **options)`: any registered compiler-opt pass as an `onnx_ir.passes` pass,
  see `onnx_ir_passes`.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "XlaHookError",
    "compiler_opt_backend",
    "onnx_ir_pass",
    "register_torch_backend",
    "xla_hook",
]

_LAZY = {
    "compiler_opt_backend": "compiler_opt.integrations.torch_backend",
    "register_torch_backend": "compiler_opt.integrations.torch_backend",
    "xla_hook": "compiler_opt.integrations.xla_transform",
    "XlaHookError": "compiler_opt.integrations.xla_transform",
    "onnx_ir_pass": "compiler_opt.integrations.onnx_ir_passes",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'compiler_opt.integrations' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
