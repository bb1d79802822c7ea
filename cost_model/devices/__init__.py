"""Device specs, topologies (devices plus directed links with routing) and their YAML presets.

`load_topology("4xV100")`, `load_topology("mcm36-ring")`, `load_topology("my_box.yaml")`.
"""

from __future__ import annotations

from cost_model.devices.loader import (
    box_topology,
    device_from_dict,
    load_device,
    load_topology,
    preset_names,
    topology_from_dict,
)
from cost_model.devices.spec import (
    DEVICE_KINDS,
    DTYPE_FAMILIES,
    DeviceSpec,
    DeviceSpecError,
    Link,
    LinkSpec,
    parse_quantity,
)
from cost_model.devices.topology import Topology

__all__ = [
    "DEVICE_KINDS",
    "DTYPE_FAMILIES",
    "DeviceSpec",
    "DeviceSpecError",
    "Link",
    "LinkSpec",
    "Topology",
    "box_topology",
    "device_from_dict",
    "load_device",
    "load_topology",
    "parse_quantity",
    "preset_names",
    "topology_from_dict",
]
