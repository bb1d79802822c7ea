"""How decisions (device, fusion group, priority, tile) travel through file formats that have a
string key/value slot per op: ONNX node metadata_props, HLO frontend attributes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from graph_ir.errors import CorruptModelError

if TYPE_CHECKING:
    from graph_ir.core import Node

__all__ = ["DECISION_KEYS", "decision_items", "read_decision"]

DECISION_KEYS = {
    "device": "compiler_opt.device",
    "fusion_group": "compiler_opt.fusion_group",
    "priority": "compiler_opt.priority",
    "tile": "compiler_opt.tile",
}
_FIELD_BY_KEY = {key: field for field, key in DECISION_KEYS.items()}


def decision_items(node: Node) -> list[tuple[str, str]]:
    """The node's set decisions as (key, text) pairs."""
    items = []
    if node.device is not None:
        items.append((DECISION_KEYS["device"], str(node.device)))
    if node.fusion_group is not None:
        items.append((DECISION_KEYS["fusion_group"], str(node.fusion_group)))
    if node.priority is not None:
        items.append((DECISION_KEYS["priority"], repr(float(node.priority))))
    if node.tile is not None:
        items.append((DECISION_KEYS["tile"], ",".join(str(t) for t in node.tile)))
    return items


def read_decision(node: Node, key: str, text: str) -> bool:
    """Set the decision that `key` names from `text`; False when `key` is not a decision key."""
    field = _FIELD_BY_KEY.get(key)
    if field is None:
        return False
    try:
        if field == "device":
            node.device = text
        elif field == "fusion_group":
            node.fusion_group = int(text)
        elif field == "priority":
            node.priority = float(text)
        else:
            node.tile = tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise CorruptModelError(f"decision '{key}' has an invalid value {text!r}", node=node.name, field=key) from None
    return True
