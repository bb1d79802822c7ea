"""Build topologies from preset names, YAML files, or the `NxGPU` short form.

Resolution order of `load_topology(spec)`:
1. an existing file path (`.yaml`, `.yml` or `.json`);
2. a topology preset name (`presets/topologies/<name>.yaml`, case-insensitive);
3. `N x GPU` short form such as `4xV100`, `2xK80`, `8xH100`, optionally `-pcie` or `-nvlink`:
   N GPUs of that device preset plus one host CPU (`cpu0`, the `cpu` preset). Every GPU links to
   the host over its `host_link` (PCIe). GPUs link to each other pairwise over their `peer_link`
   (NVLink) when the preset has one and the interconnect (the suffix, else the preset's
   `box_interconnect`) is not `pcie`, else pairwise at PCIe numbers (peer-to-peer through the PCIe
   switch). So K80 (no NVLink) and P100 (`box_interconnect: pcie`, the PCIe card) boxes default
   to PCIe and V100, A100 and H100 boxes to NVLink;
4. a device preset name (`presets/devices/<name>.yaml`): that one device alone.

File schema (see the shipped presets for commented examples): a file holds either
`device: {...}` (one device type) or `topology: {name, devices: [...], links: [...]}` or
`topology: {name, box: {gpu, count, interconnect}}`. Topology devices are `{name, preset}` or an
inline device, with an optional `count` that makes `name0..nameN-1`. A link entry has `bandwidth`,
`latency` and one of `between: [a, b]`, `all_pairs: [...]`, `ring: [...]`, `chain: [...]` or
`star: hub` with `to: [...]`; a name that was given a `count` stands for all its devices. Every
link entry is bidirectional: each direction gets its own copy engine.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from cost_model.devices.spec import DeviceSpec, DeviceSpecError, Link, LinkSpec, parse_quantity
from cost_model.devices.topology import Topology

__all__ = ["load_topology", "load_device", "preset_names", "box_topology", "topology_from_dict"]

_SHORT_FORM = re.compile(r"^(\d+)\s*[xX]\s*([A-Za-z][A-Za-z0-9_.]*?)(?:-(pcie|nvlink))?$", re.IGNORECASE)
_PRESET_PACKAGE = "cost_model.devices.presets"


# -- preset files -----------------------------------------------------------------------------------
def _preset_dir(kind: str) -> Any:
    return resources.files(_PRESET_PACKAGE).joinpath(kind)


def preset_names() -> dict[str, list[str]]:
    """The shipped preset names: {"devices": [...], "topologies": [...]}."""
    out: dict[str, list[str]] = {}
    for kind in ("devices", "topologies"):
        folder = _preset_dir(kind)
        out[kind] = sorted(p.name.rsplit(".", 1)[0] for p in folder.iterdir() if p.name.endswith(".yaml"))
    return out


def _find_preset(kind: str, name: str) -> Any | None:
    folder = _preset_dir(kind)
    wanted = name.lower()
    for path in folder.iterdir():
        if path.name.endswith(".yaml") and path.name[: -len(".yaml")].lower() == wanted:
            return path
    return None


def _read_document(path: Any, label: str) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise DeviceSpecError(f"cannot read device file: {err.strerror or err}", file=label) from None
    try:
        data = json.loads(text) if str(label).endswith(".json") else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as err:
        raise DeviceSpecError(f"not valid YAML/JSON: {str(err).splitlines()[0]}", file=label) from None
    if not isinstance(data, dict) or not ({"device", "topology"} & data.keys()):
        raise DeviceSpecError("expected a mapping with a 'device' or a 'topology' key", file=label)
    return data


# -- devices ---------------------------------------------------------------------------------------
def _link_spec(data: Any, file: str, field: str) -> LinkSpec:
    if not isinstance(data, dict):
        raise DeviceSpecError("expected a mapping with bandwidth and latency", file=file, field=field)
    _require(data, ("bandwidth", "latency"), file, field)
    return LinkSpec(
        bandwidth=parse_quantity(data["bandwidth"], "bandwidth", file=file, field=f"{field}.bandwidth"),
        latency_s=parse_quantity(data["latency"], "time", file=file, field=f"{field}.latency"),
        kind=str(data.get("kind", "")),
    )


def _require(data: dict[str, Any], keys: tuple[str, ...], file: str, field: str) -> None:
    for key in keys:
        if key not in data:
            raise DeviceSpecError(f"missing required key {key!r}", file=file, field=f"{field}.{key}" if field else key)


def device_from_dict(data: Any, *, name: str = "", file: str = "<dict>", field: str = "device") -> DeviceSpec:
    """A DeviceSpec from a mapping with units, as written in the preset files."""
    if not isinstance(data, dict):
        raise DeviceSpecError("expected a mapping", file=file, field=field)
    _require(data, ("kind", "peak_flops", "mem_bandwidth", "memory", "launch_overhead"), file, field)
    peaks_raw = data["peak_flops"]
    if not isinstance(peaks_raw, dict) or not peaks_raw:
        raise DeviceSpecError("expected a mapping of dtype family to FLOP/s", file=file, field=f"{field}.peak_flops")
    peaks = {
        str(family): parse_quantity(value, "flops", file=file, field=f"{field}.peak_flops.{family}")
        for family, value in peaks_raw.items()
    }
    try:
        return DeviceSpec(
            name=name,
            kind=str(data["kind"]),
            peak_flops=peaks,
            mem_bandwidth=parse_quantity(data["mem_bandwidth"], "bandwidth", file=file, field=f"{field}.mem_bandwidth"),
            memory_bytes=parse_quantity(data["memory"], "bytes", file=file, field=f"{field}.memory"),
            launch_overhead_s=parse_quantity(data["launch_overhead"], "time", file=file, field=f"{field}.launch_overhead"),
            model=str(data.get("model", name)),
            host_link=_link_spec(data["host_link"], file, f"{field}.host_link") if "host_link" in data else None,
            peer_link=_link_spec(data["peer_link"], file, f"{field}.peer_link") if "peer_link" in data else None,
            box_interconnect=_box_interconnect(data.get("box_interconnect"), file, field),
        )
    except DeviceSpecError as err:
        err.file = err.file or file
        if err.field and not err.field.startswith(field):
            err.field = f"{field}.{err.field}"
        raise


def _box_interconnect(value: Any, file: str, field: str) -> str | None:
    if value is not None and value not in ("pcie", "nvlink"):
        raise DeviceSpecError(f"must be 'pcie' or 'nvlink', got {value!r}", file=file, field=f"{field}.box_interconnect")
    return value


def load_device(name: str, *, instance_name: str = "") -> DeviceSpec:
    """A device preset by name (case-insensitive), e.g. "v100", "cpu", "mcm-chip"."""
    path = _find_preset("devices", name)
    if path is None:
        raise DeviceSpecError(f"unknown device preset {name!r}; known: {preset_names()['devices']}")
    label = f"presets/devices/{path.name}"
    data = _read_document(path, label)
    if "device" not in data:
        raise DeviceSpecError("a device preset needs a 'device' key", file=label)
    return device_from_dict(data["device"], name=instance_name, file=label)


# -- topologies ------------------------------------------------------------------------------------
def box_topology(gpu: str | DeviceSpec, count: int, interconnect: str | None = None, *, name: str = "") -> Topology:
    """`count` GPUs plus a host CPU; see the module docstring for the links it makes."""
    spec = load_device(gpu) if isinstance(gpu, str) else gpu
    label = name or f"{count}x{spec.model or gpu}"
    if count < 1:
        raise DeviceSpecError(f"a box needs at least one GPU, got {count}", node=label, field="count")
    if spec.host_link is None:
        raise DeviceSpecError(f"device preset {spec.model!r} has no host_link, so it cannot form a box", node=label)
    if interconnect not in (None, "pcie", "nvlink"):
        raise DeviceSpecError(f"interconnect must be 'pcie' or 'nvlink', got {interconnect!r}", node=label)
    if interconnect == "nvlink" and spec.peer_link is None:
        raise DeviceSpecError(f"device preset {spec.model!r} has no NVLink peer_link", node=label, field="interconnect")
    chosen = interconnect or spec.box_interconnect or ("nvlink" if spec.peer_link is not None else "pcie")
    use_nvlink = chosen == "nvlink" and spec.peer_link is not None
    host = load_device("cpu", instance_name="cpu0")
    gpus = [spec.renamed(f"gpu{i}") for i in range(count)]
    links: list[Link] = []
    hl = spec.host_link
    for g in gpus:
        links += _both_ways(host.name, g.name, hl.bandwidth, hl.latency_s, hl.kind or "pcie")
    peer = spec.peer_link if use_nvlink else hl
    assert peer is not None
    for i in range(count):
        for j in range(i + 1, count):
            links += _both_ways(gpus[i].name, gpus[j].name, peer.bandwidth, peer.latency_s, peer.kind)
    return Topology(label, [host, *gpus], links)


def _both_ways(a: str, b: str, bandwidth: float, latency: float, kind: str) -> list[Link]:
    return [Link(a, b, bandwidth, latency, kind), Link(b, a, bandwidth, latency, kind)]


def topology_from_dict(data: Any, *, file: str = "<dict>") -> Topology:
    """A Topology from the mapping under a file's `topology` key."""
    if not isinstance(data, dict):
        raise DeviceSpecError("expected a mapping", file=file, field="topology")
    name = str(data.get("name", Path(file).stem))
    if "box" in data:
        box = data["box"]
        if not isinstance(box, dict):
            raise DeviceSpecError("expected a mapping {gpu, count, interconnect}", file=file, field="topology.box")
        _require(box, ("gpu", "count"), file, "topology.box")
        try:
            return box_topology(str(box["gpu"]), int(box["count"]), box.get("interconnect"), name=name)
        except DeviceSpecError as err:
            raise err.with_context(file=file)
    _require(data, ("devices",), file, "topology")
    devices, groups = _devices(data["devices"], file)
    index = {d.name for d in devices}
    links: list[Link] = []
    for position, entry in enumerate(data.get("links") or []):
        links += _links(entry, groups, index, file, f"topology.links[{position}]")
    try:
        return Topology(name, devices, links)
    except DeviceSpecError as err:
        raise err.with_context(file=file)


def _devices(entries: Any, file: str) -> tuple[list[DeviceSpec], dict[str, list[str]]]:
    if not isinstance(entries, list) or not entries:
        raise DeviceSpecError("expected a non-empty list of devices", file=file, field="topology.devices")
    devices: list[DeviceSpec] = []
    groups: dict[str, list[str]] = {}
    for position, entry in enumerate(entries):
        field = f"topology.devices[{position}]"
        if not isinstance(entry, dict) or "name" not in entry:
            raise DeviceSpecError("expected a mapping with a 'name'", file=file, field=field)
        base = str(entry["name"])
        count = entry.get("count")
        names = [base] if count is None else [f"{base}{i}" for i in range(int(count))]
        if "preset" in entry:
            try:
                spec = load_device(str(entry["preset"]))
            except DeviceSpecError as err:
                raise DeviceSpecError(err.message, file=file, field=f"{field}.preset") from None
        else:
            spec = device_from_dict(entry, file=file, field=field)
        groups[base] = names
        devices += [spec.renamed(n) for n in names]
    return devices, groups


def _links(entry: Any, groups: dict[str, list[str]], known: set[str], file: str, field: str) -> list[Link]:
    if not isinstance(entry, dict):
        raise DeviceSpecError("expected a mapping", file=file, field=field)
    spec = _link_spec(entry, file, field)

    def names(value: Any, key: str) -> list[str]:
        items = value if isinstance(value, list) else [value]
        out: list[str] = []
        for item in items:
            item = str(item)
            if item in groups and item not in known:
                out += groups[item]
            elif item in known:
                out.append(item)
            else:
                raise DeviceSpecError(f"unknown device {item!r}", file=file, field=f"{field}.{key}")
        return out

    pairs: list[tuple[str, str]]
    if "between" in entry:
        ends = names(entry["between"], "between")
        if len(ends) != 2:
            raise DeviceSpecError(f"'between' needs exactly two devices, got {ends}", file=file, field=f"{field}.between")
        pairs = [(ends[0], ends[1])]
    elif "all_pairs" in entry:
        members = names(entry["all_pairs"], "all_pairs")
        pairs = [(a, b) for i, a in enumerate(members) for b in members[i + 1 :]]
    elif "ring" in entry or "chain" in entry:
        key = "ring" if "ring" in entry else "chain"
        members = names(entry[key], key)
        pairs = list(zip(members, members[1:]))
        if key == "ring" and len(members) > 2:
            pairs.append((members[-1], members[0]))
    elif "star" in entry:
        hub = names(entry["star"], "star")
        if len(hub) != 1 or "to" not in entry:
            raise DeviceSpecError("'star' needs one hub device and a 'to' list", file=file, field=f"{field}.star")
        pairs = [(hub[0], spoke) for spoke in names(entry["to"], "to")]
    else:
        raise DeviceSpecError(
            "a link entry needs one of between, all_pairs, ring, chain, star", file=file, field=field
        )
    out: list[Link] = []
    for a, b in pairs:
        try:
            out += _both_ways(a, b, spec.bandwidth, spec.latency_s, spec.kind)
        except DeviceSpecError as err:
            raise DeviceSpecError(err.message, file=file, field=field) from None
    return out


def _load_file(path: Path) -> Topology:
    label = str(path)
    data = _read_document(path, label)
    if "topology" in data:
        return topology_from_dict(data["topology"], file=label)
    device = device_from_dict(data["device"], name="", file=label)
    return Topology(path.stem, [device.renamed(f"{device.kind}0")])


def load_topology(spec: str | Path) -> Topology:
    """A topology from a file path, an `NxGPU` short form, a topology preset or a device preset."""
    text = str(spec).strip()
    path = Path(text).expanduser()
    if path.suffix.lower() in (".yaml", ".yml", ".json") or path.is_file():
        if not path.is_file():
            raise DeviceSpecError("device file not found", file=text)
        return _load_file(path)
    preset = _find_preset("topologies", text)
    if preset is not None:
        label = f"presets/topologies/{preset.name}"
        return topology_from_dict(_read_document(preset, label)["topology"], file=label)
    match = _SHORT_FORM.match(text)
    if match is not None:
        count, gpu, interconnect = int(match.group(1)), match.group(2), match.group(3)
        return box_topology(gpu, count, interconnect.lower() if interconnect else None, name=text)
    device = _find_preset("devices", text)
    if device is not None:
        spec_ = load_device(text)
        return Topology(text, [spec_.renamed(f"{spec_.kind}0")])
    names = preset_names()
    raise DeviceSpecError(
        f"unknown device spec {text!r}: not a file, not NxGPU (e.g. 4xV100), "
        f"not a preset (topologies: {names['topologies']}; devices: {names['devices']})"
    )
