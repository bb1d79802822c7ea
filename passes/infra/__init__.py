"""Pass infrastructure: the Pass base, registry, pipeline strings, manager and instruments."""

from __future__ import annotations

from passes.infra.base import Pass, PassError, PassResult, option
from passes.infra.context import PassContext, TargetConflictError, resolve_pipeline_target
from passes.infra.instruments import (
    BasePassInstrument,
    DumpAfterPassInstrument,
    PassInstrument,
    TimingInstrument,
    VerifyInstrument,
)
from passes.infra.manager import FixpointError, PassManager
from passes.infra.pipeline import PipelineSyntaxError, format_pipeline, parse_pipeline
from passes.infra.registry import (
    PassOption,
    PassRegistrationError,
    UnknownPassError,
    available_passes,
    get_pass_class,
    load_plugins,
    pass_options,
    register_pass,
    unregister_pass,
)

__all__ = [
    "BasePassInstrument",
    "DumpAfterPassInstrument",
    "FixpointError",
    "Pass",
    "PassContext",
    "PassError",
    "PassInstrument",
    "PassManager",
    "PassOption",
    "PassRegistrationError",
    "PassResult",
    "PipelineSyntaxError",
    "TargetConflictError",
    "TimingInstrument",
    "UnknownPassError",
    "VerifyInstrument",
    "available_passes",
    "format_pipeline",
    "get_pass_class",
    "load_plugins",
    "option",
    "parse_pipeline",
    "pass_options",
    "register_pass",
    "resolve_pipeline_target",
    "unregister_pass",
]
