"""The workload registry: named benchmark models, built from code, cached on disk as source text.

    build_workload("resnet-50")                       # training step, default sizes -> Graph
    build_workload("rnnlm-4", mode="inference", steps=40, hidden=2048)
    export_workload("bert-base", "train", "bert.hlo")  # HLO text; .pb for the TF model, .onnx for torch

A workload's source (HLO text from JAX, a GraphDef from TensorFlow, ONNX from PyTorch) is
cached under `cache_dir()/workloads`, keyed by name, mode, sizes, the model module's version
and the framework's version; importing the cached text takes a fraction of building it. A
small JSON beside it records the node count so `compiler-opt workloads` can show it without
importing anything. Frameworks are imported only when a workload is built.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from graph_ir.errors import CompilerOptError

if TYPE_CHECKING:
    from graph_ir.graph import Graph

__all__ = [
    "MODES",
    "Workload",
    "WorkloadError",
    "build_workload",
    "cached_node_count",
    "export_workload",
    "get_workload",
    "is_cached",
    "list_workloads",
    "parse_workload_spec",
    "register_workload",
    "source_path",
    "workload_spec_label",
    "workload_spec_sizes",
]

logger = logging.getLogger(__name__)

MODES = ("train", "inference")
# Bump when the cache layout changes. Model code changes need no bump: the key hashes the
# source files of the model's module (and the shared JAX helpers).
_CACHE_VERSION = 1
# Source format -> (file suffix, framework whose version keys the cache).
_FORMATS = {"hlo": (".hlo", "jax"), "graphdef": (".pb", "tensorflow"), "onnx": (".onnx", "torch")}
_EXPORT_SUFFIXES = {".hlo": "hlo", ".txt": "hlo", ".pb": "graphdef", ".onnx": "onnx"}


class WorkloadError(CompilerOptError):
    """An unknown workload, mode, size or export format."""


@dataclass(frozen=True)
class Workload:
    """A named model. `sources` maps a format to `"module:function"`, called as f(mode, **sizes)
    and returning the source text or bytes; the first entry is what `build` imports."""

    name: str
    family: str
    description: str
    sources: Mapping[str, str]
    default_sizes: Mapping[str, Any]
    # Sizes the name pins (rnnlm-4 has layers=4); part of the cache key, not overridable.
    fixed_sizes: Mapping[str, Any] = field(default_factory=dict)
    paper_sizes: Mapping[str, Any] = field(default_factory=dict)
    # Where the paper sizes come from (paper, section or table) and which values are our own
    # choices; `bench` and `bench_placement.py` build these sizes by default.
    paper_source: str = ""
    modes: tuple[str, ...] = MODES
    slow: bool = False  # builds take tens of seconds (tests mark them slow)

    @property
    def source_format(self) -> str:
        return next(iter(self.sources))

    def sizes(self, overrides: Mapping[str, Any] | None = None, *, paper: bool = False) -> dict[str, Any]:
        """Default sizes (or paper-like ones) with `overrides`, checked and coerced to the defaults' types."""
        sizes = {**self.default_sizes, **(self.paper_sizes if paper else {}), **self.fixed_sizes}
        for key, value in (overrides or {}).items():
            if key in self.fixed_sizes:
                if value != self.fixed_sizes[key]:
                    raise WorkloadError(f"size {key!r} is fixed to {self.fixed_sizes[key]!r} by the name {self.name!r}", field=key)
                continue
            if key not in sizes:
                raise WorkloadError(f"{self.name} has no size {key!r} (sizes: {', '.join(sorted(sizes))})", field=key)
            kind = type(self.default_sizes.get(key, self.fixed_sizes.get(key)))
            try:
                sizes[key] = kind(value)
            except (TypeError, ValueError):
                raise WorkloadError(f"size {key}={value!r} is not a {kind.__name__}", field=key) from None
        return sizes

    def check_mode(self, mode: str) -> None:
        if mode not in self.modes:
            raise WorkloadError(f"{self.name} has no mode {mode!r} (modes: {', '.join(self.modes)})", field="mode")

    def build(self, mode: str = "train", *, paper: bool = False, **sizes: Any) -> Graph:
        return build_workload(self.name, mode, paper=paper, **sizes)


_REGISTRY: dict[str, Workload] = {}


def register_workload(workload: Workload) -> Workload:
    if workload.name in _REGISTRY:
        raise ValueError(f"workload {workload.name!r} is already registered")
    _REGISTRY[workload.name] = workload
    return workload


def list_workloads() -> list[Workload]:
    return list(_REGISTRY.values())


def get_workload(name: str) -> Workload:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise WorkloadError(f"unknown workload {name!r} (known: {', '.join(_REGISTRY)})") from None


def parse_workload_spec(text: str) -> tuple[Workload, str] | None:
    """`resnet-50` or `resnet-50:train` -> (workload, mode); None when the name is not registered.
    Sizes after the mode (`rnnlm:inference@layers=5@batch=32`) are checked here and read by
    `workload_spec_sizes`."""
    head, _, _ = text.partition("@")
    name, _, mode = head.partition(":")
    if name not in _REGISTRY:
        return None
    workload = _REGISTRY[name]
    mode = mode or workload.modes[0]
    workload.check_mode(mode)
    workload.sizes(_spec_overrides(text))  # unknown or mistyped sizes fail here, naming the field
    return workload, mode


def _spec_overrides(text: str) -> dict[str, str]:
    overrides: dict[str, str] = {}
    for item in text.split("@")[1:]:
        key, eq, value = item.partition("=")
        if not eq or not key or not value:
            raise WorkloadError(f"size {item!r} in {text!r} is not KEY=VALUE", field="sizes")
        if key in overrides:
            raise WorkloadError(f"size {key!r} is given twice in {text!r}", field=key)
        overrides[key] = value
    return overrides


def _spec_sizes(workload: Workload, text: str) -> dict[str, Any]:
    overrides = _spec_overrides(text)
    sizes = workload.sizes(overrides)
    return {key: sizes[key] for key in overrides if key not in workload.fixed_sizes}


def workload_spec_sizes(text: str) -> dict[str, Any]:
    """The sizes a spec names (`@key=value` after the name and mode), coerced to the workload's
    types; {} for a plain name."""
    parsed = parse_workload_spec(text)
    if parsed is None:
        raise WorkloadError(f"{text!r} is not a workload spec", file=text)
    return _spec_sizes(parsed[0], text)


def workload_spec_label(text: str) -> str:
    """The label a spec's graph is reported under: `name:mode`, then its sizes in key order."""
    parsed = parse_workload_spec(text)
    if parsed is None:
        return text
    workload, mode = parsed
    sizes = _spec_sizes(workload, text)
    return f"{workload.name}:{mode}" + "".join(f"@{key}={sizes[key]}" for key in sorted(sizes))


# -- cache -----------------------------------------------------------------------------------
def _framework_version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "none"


@functools.lru_cache(maxsize=None)
def _code_digest(source: str) -> str:
    """Hash of the files that produce `source` ("module:function"), found without importing them."""
    module = source.partition(":")[0]
    digest = hashlib.sha1()
    names = [module] + (["compiler_opt.workloads._jax"] if source.endswith(":hlo_text") else [])
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin and os.path.isfile(spec.origin):
            digest.update(Path(spec.origin).read_bytes())
    return digest.hexdigest()[:12]


def source_path(workload: Workload, mode: str, sizes: Mapping[str, Any], fmt: str | None = None) -> Path:
    """Where the source of (workload, mode, sizes) in format `fmt` is cached."""
    from compiler_opt.workloads import cache_dir

    fmt = fmt or workload.source_format
    suffix, framework = _FORMATS[fmt]
    key = json.dumps(
        {
            "v": _CACHE_VERSION, "sizes": dict(sorted(sizes.items())), "fw": _framework_version(framework), "fmt": fmt,
            "code": _code_digest(workload.sources[fmt]),
        },
        sort_keys=True,
    )
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    return cache_dir() / "workloads" / f"{workload.name}-{mode}-{digest}{suffix}"


def is_cached(name: str, mode: str = "train", *, paper: bool = False, **sizes: Any) -> bool:
    workload = get_workload(name)
    return source_path(workload, mode, workload.sizes(sizes, paper=paper)).is_file()


def cached_node_count(name: str, mode: str = "train", *, paper: bool = False, **sizes: Any) -> int | None:
    """The node count recorded when the graph was last built from the cache, else None."""
    workload = get_workload(name)
    info = source_path(workload, mode, workload.sizes(sizes, paper=paper)).with_suffix(".json")
    try:
        return int(json.loads(info.read_text())["nodes"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _call_source(workload: Workload, fmt: str, mode: str, sizes: Mapping[str, Any]) -> str | bytes:
    module_name, _, function = workload.sources[fmt].partition(":")
    builder = getattr(importlib.import_module(module_name), function)
    try:
        return builder(mode, **sizes)
    except ValueError as err:  # the model's own size checks
        raise WorkloadError(f"{workload.name}: {err}") from None


def _ensure_source(workload: Workload, mode: str, sizes: Mapping[str, Any], fmt: str, *, use_cache: bool) -> Path:
    from graph_ir.io.atomic import atomic_path

    path = source_path(workload, mode, sizes, fmt)
    if use_cache and path.is_file():
        return path
    start = time.perf_counter()
    source = _call_source(workload, fmt, mode, sizes)
    with atomic_path(path) as tmp:
        if isinstance(source, str):
            tmp.write_text(source)
        else:
            tmp.write_bytes(source)
    logger.info("built %s (%s, %s) in %.1f s -> %s", workload.name, mode, fmt, time.perf_counter() - start, path)
    return path


def build_workload(name: str, mode: str = "train", *, paper: bool = False, use_cache: bool = True, **sizes: Any) -> Graph:
    """Build (or load from the cache) the workload's graph for `mode`: default sizes, or the
    paper-like ones with `paper=True`, updated by `sizes`."""
    workload = get_workload(name)
    workload.check_mode(mode)
    resolved = workload.sizes(sizes, paper=paper)
    path = _ensure_source(workload, mode, resolved, workload.source_format, use_cache=use_cache)
    start = time.perf_counter()
    graph = _import_source(workload.source_format, path)
    graph.meta["workload"] = {"name": name, "mode": mode, "sizes": resolved}
    logger.info("imported %s (%s): %d nodes in %.2f s", name, mode, len(graph), time.perf_counter() - start)
    _record_node_count(path, workload, mode, resolved, len(graph))
    return graph


def _import_source(fmt: str, path: Path) -> Graph:
    if fmt == "hlo":
        from graph_ir.io.hlo_import import import_hlo_text

        return import_hlo_text(path.read_text(), file=os.fspath(path))
    if fmt == "graphdef":
        from graph_ir.io.tf_import import load_tf

        return load_tf(path)
    from graph_ir.io.onnx_import import load_onnx

    return load_onnx(path)


def _record_node_count(path: Path, workload: Workload, mode: str, sizes: Mapping[str, Any], nodes: int) -> None:
    from graph_ir.io.atomic import atomic_path

    info = {"name": workload.name, "mode": mode, "sizes": dict(sizes), "nodes": nodes, "format": workload.source_format}
    try:
        with atomic_path(path.with_suffix(".json")) as tmp:
            tmp.write_text(json.dumps(info, indent=1))
    except OSError as err:  # a read-only cache still serves builds
        logger.debug("could not record node count: %s", err)


def export_workload(name: str, mode: str, path: str | os.PathLike[str], *, paper: bool = False, **sizes: Any) -> Path:
    """Write the workload's source in the format the extension names (.hlo/.txt: HLO text,
    .pb: TF GraphDef, .onnx: ONNX), where the workload has that format."""
    import shutil

    from graph_ir.io.atomic import atomic_path

    workload = get_workload(name)
    workload.check_mode(mode)
    target = Path(path)
    fmt = _EXPORT_SUFFIXES.get(target.suffix.lower())
    if fmt is None or fmt not in workload.sources:
        available = ", ".join(s for s, f in _EXPORT_SUFFIXES.items() if f in workload.sources)
        raise WorkloadError(f"{name} cannot be exported as {target.suffix or 'a file without extension'} (formats: {available})", file=os.fspath(target))
    source = _ensure_source(workload, mode, workload.sizes(sizes, paper=paper), fmt, use_cache=True)
    with atomic_path(target) as tmp:
        shutil.copyfile(source, tmp)
    return target


def _jax_workload(name: str, family: str, module: str, description: str, **kwargs: Any) -> Workload:
    return register_workload(Workload(name, family, description, {"hlo": f"compiler_opt.workloads.{module}:hlo_text"}, **kwargs))


# The paper sizes and where they come from. "Ours" marks a value no paper gives for this setting.
_RNNLM_SOURCE = (
    "ColocRL (Mirhoseini et al., ICML 2017, sec. 4) and HDP (Mirhoseini et al., ICLR 2018), whose setting GO "
    "(Zhou et al., NeurIPS 2020) reuses with 2/4/8 layers: LSTM of 2048 units, batch 64; 40 unrolled steps and a "
    "10k (Penn Treebank) vocabulary"
)
_GNMT_SOURCE = (
    "HDP (Mirhoseini et al., ICLR 2018: NMT with 2, 4 and 8 layers, ColocRL's settings) and GO's GNMT-2/4/8: "
    "LSTM of 1024 units, batch 128, 32k word-piece vocabulary as GNMT (Wu et al., 2016); source and target "
    "length 50 are ours (the papers bucket sentences by length)"
)
_TRANSFORMER_XL_SOURCE = (
    "Transformer-XL base on WikiText-103 (Dai et al., ACL 2019; the authors' run_wt103_base.sh): 16 layers, "
    "d_model 410, 10 heads of 41, d_inner 2100, segment and memory 150, batch 60; the vocabulary is ours (32k "
    "with a full softmax, where the paper has 267k words with an adaptive softmax)"
)
_INCEPTION_SOURCE = "ColocRL and HDP (Inception-V3 on ImageNet): 299x299 images, batch 32"
_RESNET_SOURCE = (
    "ours: batch 64 at 224x224 (HDP places ResNet-152 and GO none; NVIDIA's DeepLearningExamples train "
    "ResNet-50 at 112-256 per V100)"
)
_CELL_SOURCES = {
    "nasnet": "NASNet-A 6@768 on CIFAR-10 (Zoph et al., CVPR 2018): N = 6 cells per stage, 32 filters; batch 32 is ours",
    "amoebanet": (
        "AmoebaNet-A on CIFAR-10 (Real et al., AAAI 2019): N = 6 cells per stage; 32 filters where the paper "
        "has F = 36, and batch 32, are ours"
    ),
}
_WAVENET_SOURCE = (
    "WaveNet (van den Oord et al., 2016): 16 kHz audio, one second (16000 samples), 256 mu-law classes; 2x18 "
    "and 4x36 stacks/layers as GO's WaveNet workloads (dilations 1..256 per stack, where the paper cycles to "
    "512); channel widths (64 residual, 512 skip) and batch 16 are ours (the paper gives none)"
)
_BERT_SOURCE = (
    "BERT-base pre-training, phase 2 (Devlin et al., NAACL 2019): 512 tokens, about 15 % masked (76); batch 32 "
    "per device is ours (the paper's 256 sequences span many chips)"
)


def _register_builtin() -> None:
    # Default and paper sizes live beside each model; the module imports only its framework
    # lazily, so reading them here would import JAX. They are repeated as literals instead and
    # a test checks they agree with the modules.
    rnn = {"hidden": 256, "vocab": 2000, "steps": 8, "batch": 16}
    rnn_paper = {"hidden": 2048, "vocab": 10000, "steps": 40, "batch": 64}
    _jax_workload(
        "rnnlm", "rnn", "rnnlm", "RNNLM with the layer count as a size (`rnnlm:inference@layers=3`); rnnlm-2/4/8 pin it",
        default_sizes={**rnn, "layers": 2}, paper_sizes=rnn_paper, paper_source=_RNNLM_SOURCE,
    )
    for layers in (2, 4, 8):
        _jax_workload(
            f"rnnlm-{layers}", "rnn", "rnnlm", f"RNNLM: {layers} LSTM layers unrolled over time, softmax over the vocabulary",
            default_sizes=rnn, fixed_sizes={"layers": layers}, paper_sizes=rnn_paper, paper_source=_RNNLM_SOURCE,
        )
    seq = {"hidden": 256, "vocab": 2000, "src_len": 8, "tgt_len": 8, "batch": 16}
    seq_paper = {"hidden": 1024, "vocab": 32000, "src_len": 50, "tgt_len": 50, "batch": 128}
    for layers in (2, 4, 8):
        _jax_workload(
            f"gnmt-{layers}", "seq2seq", "gnmt",
            f"GNMT seq2seq: {layers}-layer LSTM encoder (bidirectional bottom) and decoder, additive attention; "
            "inference decodes greedily",
            default_sizes=seq, fixed_sizes={"layers": layers}, paper_sizes=seq_paper, paper_source=_GNMT_SOURCE,
        )
    _jax_workload(
        "transformer-xl", "transformer", "transformer_xl",
        "Transformer-XL decoder: relative-position attention over [segment memory; segment], memory in and out",
        default_sizes={"layers": 4, "d_model": 256, "heads": 4, "d_ff": 1024, "seg_len": 64, "mem_len": 64, "vocab": 2000, "batch": 8},
        paper_sizes={"layers": 16, "d_model": 410, "heads": 10, "d_ff": 2100, "seg_len": 150, "mem_len": 150, "vocab": 32000, "batch": 60},
        paper_source=_TRANSFORMER_XL_SOURCE,
    )
    register_workload(Workload(
        "inception-v3", "cnn",
        "Inception-V3 from tf.keras.applications (random weights) through the TF GraphDef importer; "
        "inference frozen, training as a functional step (weights in, updated weights out)",
        {"graphdef": "compiler_opt.workloads.inception:graphdef_bytes", "hlo": "compiler_opt.workloads.inception:hlo_text"},
        {"batch": 2, "image_size": 75, "classes": 1000},
        paper_sizes={"batch": 32, "image_size": 299}, slow=True, paper_source=_INCEPTION_SOURCE,
    ))
    _jax_workload(
        "resnet-50", "cnn", "resnet", "ResNet-50 v1.5: bottleneck blocks (3, 4, 6, 3), batch norm with running statistics",
        default_sizes={"batch": 32, "image_size": 224, "classes": 1000}, fixed_sizes={"depth": 50},
        paper_sizes={"batch": 64}, paper_source=_RESNET_SOURCE,
    )
    cells = {"cells_per_stage": 1, "filters": 32, "image_size": 32, "classes": 10, "batch": 32}
    for genotype, title in (("nasnet", "NASNet-A"), ("amoebanet", "AmoebaNet-A")):
        _jax_workload(
            genotype, "cnn", "nasnet",
            f"{title} cell network (CIFAR layout): N normal cells per stage, 2 reduction cells, separable convs and pools",
            default_sizes=cells, fixed_sizes={"genotype": genotype}, paper_sizes={"cells_per_stage": 6},
            paper_source=_CELL_SOURCES[genotype],
        )
    _jax_workload(
        "randcell", "cnn", "nasnet",
        "a cell network of the NASNet layout whose cells are drawn at random from NASNet's search space "
        "(`genotype=random-<seed>`): branchy CNNs for training the policy on graphs nobody designed",
        default_sizes={**cells, "genotype": "random-0"}, paper_sizes={"cells_per_stage": 6},
        paper_source="ours: the NASNet-A 6@768 layout (see nasnet) with random cells",
    )
    wave = {"residual_channels": 64, "skip_channels": 256, "classes": 256, "length": 4096, "batch": 4}
    for stacks, layers in ((2, 18), (4, 36)):
        _jax_workload(
            f"wavenet-{stacks}x{layers}", "audio", "wavenet",
            f"WaveNet: {stacks} stacks, {layers} gated dilated causal conv layers (dilations 1..{2 ** (layers // stacks - 1)})",
            default_sizes=wave, fixed_sizes={"stacks": stacks, "layers": layers},
            paper_sizes={"skip_channels": 512, "length": 16000, "batch": 16}, paper_source=_WAVENET_SOURCE,
        )
    _jax_workload(
        "bert-base", "transformer", "bert", "BERT-base encoder (12 x 768, 12 heads) with masked-LM and next-sentence heads",
        default_sizes={"layers": 12, "hidden": 768, "heads": 12, "d_ff": 3072, "vocab": 30522, "seq_len": 128, "masked": 20, "batch": 8},
        paper_sizes={"seq_len": 512, "masked": 76, "batch": 32}, paper_source=_BERT_SOURCE,
    )
    register_workload(Workload(
        "densenet-121", "cnn", "DenseNet-121 in PyTorch, exported with torch.onnx (dynamo); inference only",
        {"onnx": "compiler_opt.workloads.densenet:onnx_bytes"}, {"batch": 1, "image_size": 224},
        modes=("inference",), slow=True,
        paper_source="no paper sizes: the default (batch 1, 224x224, single-image latency) is the only size",
    ))


_register_builtin()
