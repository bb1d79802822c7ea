from __future__ import annotations

import importlib.metadata
import logging
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from graph_ir import Graph
from passes import available_passes, get_pass_class, register_pass
from passes.basic import ConstantFolding, DeadCodeElimination
from passes.infra import Pass, PassError, PassResult, load_plugins, pass_options, unregister_pass
from passes.infra.registry import ENTRY_POINT_GROUP, PassRegistrationError, UnknownPassError


def _make_pass(pass_name: str) -> type[Pass]:
    @dataclass(frozen=True)
    class Made(Pass):
        name = pass_name

        def call(self, graph: Graph) -> PassResult:
            return PassResult(graph, False)

    return Made


def test_basic_passes_are_registered() -> None:
    passes = available_passes()
    for name in ("dce", "cse", "constant-folding", "shape-infer", "topo-sort"):
        assert name in passes
    assert get_pass_class("dce") is DeadCodeElimination


def test_register_and_unregister(isolated_registry: dict) -> None:
    cls = register_pass(_make_pass("my-pass"))
    assert get_pass_class("my-pass") is cls
    assert register_pass(cls) is cls  # registering the same class again is harmless
    unregister_pass("my-pass")
    with pytest.raises(UnknownPassError):
        get_pass_class("my-pass")


def test_duplicate_name_is_rejected(isolated_registry: dict) -> None:
    with pytest.raises(PassRegistrationError, match=r"'dce' is already registered by passes\.basic\.dce\.DeadCodeElimination"):
        register_pass(_make_pass("dce"))
    assert get_pass_class("dce") is DeadCodeElimination


@pytest.mark.parametrize("bad", ["", "DCE", "my_pass", "-dce", "dce-", "two--dashes", "1pass"])
def test_non_kebab_names_are_rejected(isolated_registry: dict, bad: str) -> None:
    with pytest.raises(PassRegistrationError, match="kebab-case"):
        register_pass(_make_pass(bad))


def test_undecorated_subclass_is_rejected(isolated_registry: dict) -> None:
    class Plain(Pass):
        name = "plain"
        level: int = 3  # silently not an option without @dataclass

    with pytest.raises(PassRegistrationError, match=r"@dataclass\(frozen=True\)"):
        register_pass(Plain)


def test_non_pass_is_rejected(isolated_registry: dict) -> None:
    with pytest.raises(PassRegistrationError, match="not a Pass subclass"):
        register_pass(int)  # type: ignore[arg-type]


def test_unknown_name_suggests_the_closest_and_lists_all() -> None:
    with pytest.raises(UnknownPassError) as info:
        get_pass_class("constant-foldin")
    message = str(info.value)
    assert "unknown pass 'constant-foldin'; did you mean 'constant-folding'?" in message
    assert "known passes: " in message and "dce" in message and "topo-sort" in message
    assert isinstance(info.value, PassError) and isinstance(info.value, KeyError)


def test_unknown_name_without_close_match_has_no_suggestion() -> None:
    with pytest.raises(UnknownPassError) as info:
        get_pass_class("zzzzzzzz")
    assert "did you mean" not in str(info.value)


def test_pass_options_describe_fields() -> None:
    options = {o.name: o for o in pass_options(ConstantFolding)}
    assert list(options) == ["size-limit", "fold-shape-ops", "same-size"]
    size = options["size-limit"]
    assert (size.field_name, size.type, size.default, size.type_name) == ("size_limit", int, 1 << 20, "int")
    assert "bytes" in size.doc
    assert options["fold-shape-ops"].type is bool and options["fold-shape-ops"].default is True


# -- plugins through entry points ----------------------------------------------------------------

PLUGIN_MODULE = textwrap.dedent(
    """
    from dataclasses import dataclass
    from passes.infra import Pass, PassResult, register_pass

    @register_pass
    @dataclass(frozen=True)
    class SelfRegistered(Pass):
        name = "plugin-self-registered"
        def call(self, graph):
            return PassResult(graph, False)

    @dataclass(frozen=True)
    class ByEntryPoint(Pass):
        name = "plugin-by-entry-point"
        factor: int = 2
        def call(self, graph):
            return PassResult(graph, True)

    NOT_A_PASS = 42
    """
)


@pytest.fixture
def fake_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_registry: dict) -> list[str]:
    (tmp_path / "fake_pass_plugin.py").write_text(PLUGIN_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    entries = [
        importlib.metadata.EntryPoint("whole-module", "fake_pass_plugin", ENTRY_POINT_GROUP),
        importlib.metadata.EntryPoint("one-class", "fake_pass_plugin:ByEntryPoint", ENTRY_POINT_GROUP),
        importlib.metadata.EntryPoint("missing", "no_such_module_xyz:Thing", ENTRY_POINT_GROUP),
        importlib.metadata.EntryPoint("not-a-pass", "fake_pass_plugin:NOT_A_PASS", ENTRY_POINT_GROUP),
    ]
    calls: list[str] = []

    def entry_points(**kwargs: str) -> list[importlib.metadata.EntryPoint]:
        calls.append(kwargs.get("group", ""))
        return [e for e in entries if e.group == kwargs.get("group")]

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    return calls


def test_entry_point_plugins_are_discovered_lazily_once(fake_plugins: list[str], caplog: pytest.LogCaptureFixture) -> None:
    assert fake_plugins == []  # nothing is loaded at import or fixture time
    with caplog.at_level(logging.WARNING, logger="passes.infra.registry"):
        cls = get_pass_class("plugin-by-entry-point")
        assert get_pass_class("plugin-self-registered").__module__ == "fake_pass_plugin"
        available_passes()
    assert fake_plugins == [ENTRY_POINT_GROUP]
    assert cls.__name__ == "ByEntryPoint" and cls().factor == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert any("'missing'" in w and "no_such_module_xyz" in w for w in warnings)
    assert any("'not-a-pass'" in w and "loaded a int" in w for w in warnings)


def test_builtin_lookups_do_not_load_plugins(fake_plugins: list[str]) -> None:
    get_pass_class("dce")
    assert fake_plugins == []


def test_plugins_can_be_reloaded(fake_plugins: list[str]) -> None:
    load_plugins()
    load_plugins()
    load_plugins(reload=True)
    assert fake_plugins == [ENTRY_POINT_GROUP, ENTRY_POINT_GROUP]
    assert "plugin-by-entry-point" in available_passes()


def test_plugin_pass_runs_from_a_pipeline(fake_plugins: list[str]) -> None:
    from passes import run_pipeline

    result = run_pipeline(Graph(), "plugin-by-entry-point{factor=5},dce")
    assert result.modified


def test_plugin_with_conflicting_name_is_skipped(
    isolated_registry: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "clashing_pass_plugin.py").write_text(PLUGIN_MODULE.replace('"plugin-by-entry-point"', '"dce"'))
    monkeypatch.syspath_prepend(str(tmp_path))
    entries = [
        importlib.metadata.EntryPoint("clash", "clashing_pass_plugin:ByEntryPoint", ENTRY_POINT_GROUP),
        importlib.metadata.EntryPoint("same", "passes.basic.dce:DeadCodeElimination", ENTRY_POINT_GROUP),
    ]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: entries)
    with caplog.at_level(logging.WARNING, logger="passes.infra.registry"):
        load_plugins(reload=True)
    assert get_pass_class("dce") is DeadCodeElimination
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1  # the entry point naming the registered class itself is fine
    assert "'clash'" in warnings[0] and "already registered" in warnings[0]


def test_broken_entry_point_listing_only_warns(
    isolated_registry: dict, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(**kwargs: str) -> list:
        raise RuntimeError("metadata is corrupt")

    monkeypatch.setattr(importlib.metadata, "entry_points", broken)
    with caplog.at_level(logging.WARNING, logger="passes.infra.registry"):
        assert "dce" in available_passes()
    assert "metadata is corrupt" in caplog.text
