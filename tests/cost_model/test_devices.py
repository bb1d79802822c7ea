"""Device presets, topology files, the NxGPU short form, routing, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from cost_model.devices import (
    DeviceSpec,
    DeviceSpecError,
    Link,
    Topology,
    load_device,
    load_topology,
    parse_quantity,
    preset_names,
)
from graph_ir.errors import CompilerOptError


def test_every_shipped_preset_parses() -> None:
    names = preset_names()
    assert {"cpu", "k80", "p100", "v100", "a100", "h100", "mcm-chip"} <= set(names["devices"])
    assert {"mcm36-ring", "4xV100-nvlink", "8xP100-pcie"} <= set(names["topologies"])
    for name in names["devices"] + names["topologies"]:
        topology = load_topology(name)
        assert topology.num_devices >= 1
        for device in topology.devices:
            assert device.peak("fp32") > 0 and device.mem_bandwidth > 0 and device.memory_bytes > 0


def test_datasheet_numbers_in_units() -> None:
    v100 = load_device("v100")
    assert v100.peak("fp32") == 15.7e12
    assert v100.peak("fp16") == 125e12
    assert v100.mem_bandwidth == 900e9
    assert v100.memory_bytes == 32 * 2**30
    assert v100.launch_overhead_s == 5e-6
    # A family the preset does not list runs at the fp32 rate.
    chip = load_device("mcm-chip")
    assert chip.peak("int8") == 24e12 and chip.memory_bytes == 32 * 2**20
    assert chip.peak("fp64") == chip.peak("fp32")


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("900 GB/s", "bandwidth", 900e9),
        ("16GiB/s", "bandwidth", 16 * 2**30),
        ("32 GiB", "bytes", 32 * 2**30),
        ("10 us", "time", 1e-5),
        ("3 ms", "time", 3e-3),
        ("15.7 TFLOPS", "flops", 15.7e12),
        ("24 TOPS", "flops", 24e12),
        (7, "time", 7.0),
        ("1.5e3", "bytes", 1500.0),
    ],
)
def test_parse_quantity(text: object, kind: str, expected: float) -> None:
    assert parse_quantity(text, kind) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize(("text", "kind"), [("3 GB", "time"), ("fast", "bandwidth"), (True, "bytes"), ([1], "bytes")])
def test_parse_quantity_rejects(text: object, kind: str) -> None:
    with pytest.raises(DeviceSpecError, match=kind):
        parse_quantity(text, kind, file="f.yaml", field="x")


def test_short_form_4xv100_is_nvlink_box_with_host() -> None:
    topology = load_topology("4xV100")
    assert topology.device_names == ("cpu0", "gpu0", "gpu1", "gpu2", "gpu3")
    assert topology.devices[0].kind == "cpu" and topology.devices[1].model == "V100"
    (peer,) = topology.link("gpu0", "gpu3")
    assert (peer.bandwidth, peer.latency_s, peer.kind) == (50e9, 5e-6, "nvlink")
    (host,) = topology.link("cpu0", "gpu2")
    assert (host.bandwidth, host.kind) == (15.75e9, "pcie")
    # 4 host links + 6 GPU pairs, both directions each.
    assert len(topology.links) == 2 * (4 + 6)
    assert topology.default_device == 1
    # Identical GPUs share one device type.
    types, type_of = topology.device_types
    assert len(types) == 2 and type_of.tolist() == [0, 1, 1, 1, 1]


@pytest.mark.parametrize(("spec", "kind"), [("2xK80", "pcie"), ("8xP100", "pcie"), ("2xP100-nvlink", "nvlink"), ("8xH100", "nvlink"), ("2xA100-pcie", "pcie")])
def test_short_form_interconnect_defaults(spec: str, kind: str) -> None:
    topology = load_topology(spec)
    (peer,) = topology.link("gpu0", "gpu1")
    assert peer.kind == kind


def test_box_preset_matches_short_form() -> None:
    preset = load_topology("4xV100-nvlink")
    short = load_topology("4xV100")
    assert preset.devices == short.devices
    assert preset.links == short.links


def test_nvlink_on_a_gpu_without_it_is_an_error() -> None:
    with pytest.raises(DeviceSpecError, match="NVLink"):
        load_topology("2xK80-nvlink")


def test_mcm36_ring_routes_the_short_way_round() -> None:
    ring = load_topology("mcm36-ring")
    assert ring.num_devices == 36 and len(ring.links) == 72
    assert len(ring.route("chip0", "chip1")) == 1
    assert len(ring.route("chip0", "chip35")) == 1  # the ring is closed
    assert len(ring.route("chip0", "chip18")) == 18
    assert len(ring.route("chip3", "chip30")) == 9
    hops = ring.link("chip0", "chip2")
    assert [(l.src, l.dst) for l in hops] == [("chip0", "chip1"), ("chip1", "chip2")]
    # Store-and-forward: two hops of 1 us + 16 MB / 16 GB/s each.
    assert ring.transfer_time("chip0", "chip2", 16e6) == pytest.approx(2 * (1e-6 + 1e-3), rel=1e-12)
    assert ring.route("chip5", "chip5") == ()


def test_device_index_accepts_tensorflow_names() -> None:
    topology = load_topology("2xV100")
    assert topology.device_index("gpu1") == 2
    assert topology.device_index("/job:localhost/replica:0/task:0/device:GPU:1") == 2
    assert topology.device_index("CPU:0") == 0
    with pytest.raises(DeviceSpecError, match="unknown device 'tpu0'"):
        topology.device_index("tpu0")


def test_unknown_preset_lists_known_ones() -> None:
    with pytest.raises(DeviceSpecError, match="unknown device spec 'z80'.*mcm36-ring"):
        load_topology("z80")
    with pytest.raises(DeviceSpecError, match="unknown device preset 'Z80'"):
        load_topology("4xZ80")
    assert issubclass(DeviceSpecError, CompilerOptError)


def _write(tmp_path: Path, text: str, name: str = "box.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_topology_file_with_inline_devices_and_ring(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
topology:
  name: tiny
  devices:
    - {name: host, preset: cpu}
    - name: acc
      count: 3
      kind: chip
      peak_flops: {fp32: 1 TFLOPS}
      mem_bandwidth: 100 GB/s
      memory: 1 GiB
      launch_overhead: 2 us
  links:
    - {chain: acc, bandwidth: 10 GB/s, latency: 1 us}
    - {star: host, to: [acc0], bandwidth: 5 GB/s, latency: 10 us}
""",
    )
    topology = load_topology(str(path))
    assert topology.name == "tiny"
    assert topology.device_names == ("host", "acc0", "acc1", "acc2")
    assert topology.devices[1].launch_overhead_s == 2e-6
    # host -> acc2 goes host->acc0->acc1->acc2.
    assert [l.dst for l in topology.link("host", "acc2")] == ["acc0", "acc1", "acc2"]
    assert topology.transfer_time("host", "acc1", 1e6) == pytest.approx((10e-6 + 1e6 / 5e9) + (1e-6 + 1e6 / 10e9))


def test_single_device_file(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "device: {kind: gpu, peak_flops: {fp32: 2 TFLOPS}, mem_bandwidth: 1 TB/s, memory: 8 GiB, launch_overhead: 4 us}\n",
        "mine.yaml",
    )
    topology = load_topology(path)
    assert topology.device_names == ("gpu0",)
    assert topology.devices[0].mem_bandwidth == 1e12


def test_missing_field_names_file_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path, "device: {kind: gpu, peak_flops: {fp32: 1 TFLOPS}, memory: 1 GiB, launch_overhead: 1 us}\n")
    with pytest.raises(DeviceSpecError) as info:
        load_topology(str(path))
    assert info.value.file == str(path)
    assert info.value.field == "device.mem_bandwidth"
    assert str(path) in str(info.value) and "mem_bandwidth" in str(info.value)


def test_bad_unit_names_file_and_field(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "device: {kind: gpu, peak_flops: {fp32: 1 TFLOPS}, mem_bandwidth: 3 GiB, memory: 1 GiB, launch_overhead: 1 us}\n",
    )
    with pytest.raises(DeviceSpecError, match="not a bandwidth unit") as info:
        load_topology(str(path))
    assert info.value.field == "device.mem_bandwidth" and info.value.file == str(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("topology: {devices: [{name: a, preset: cpu}], links: [{between: [a, b], bandwidth: 1 GB/s, latency: 1 us}]}", "unknown device 'b'"),
        ("topology: {devices: [{name: a, preset: nope}]}", "unknown device preset 'nope'"),
        ("topology: {devices: [{name: a, preset: cpu}, {name: a, preset: cpu}]}", "used twice"),
        ("topology: {devices: [{name: a, preset: cpu}, {name: b, preset: cpu}], links: [{between: [a, b], latency: 1 us}]}", "bandwidth"),
        ("topology: {devices: [{name: a, preset: cpu}, {name: b, preset: cpu}], links: [{across: [a, b], bandwidth: 1 GB/s, latency: 1 us}]}", "needs one of"),
        ("device: {kind: tpu, peak_flops: {fp32: 1}, mem_bandwidth: 1, memory: 1, launch_overhead: 0}", "kind must be"),
        ("device: {kind: gpu, peak_flops: {fp8: 1}, mem_bandwidth: 1, memory: 1, launch_overhead: 0}", "fp32"),
        ("[1, 2", "not valid YAML"),
        ("just a string", "expected a mapping"),
    ],
)
def test_malformed_files(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(DeviceSpecError, match=message) as info:
        load_topology(str(path))
    assert info.value.file == str(path)


def test_missing_file() -> None:
    with pytest.raises(DeviceSpecError, match="not found"):
        load_topology("/nonexistent/box.yaml")


def test_unreachable_route_is_an_error() -> None:
    spec = DeviceSpec("a", "gpu", {"fp32": 1.0}, 1.0, 1.0, 0.0)
    topology = Topology("split", [spec, spec.renamed("b"), spec.renamed("c")], [Link("a", "b", 1.0, 0.0)])
    assert topology.route("a", "b") == (0,)
    with pytest.raises(DeviceSpecError, match="no route from b to a"):
        topology.route("b", "a")
