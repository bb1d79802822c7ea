"""Placement decisions exported to a TF GraphDef: a placement pass's devices land in
NodeDef.device, and the GraphDef still runs in TensorFlow (soft placement puts GPU ops on this
machine's CPU) with the original's outputs."""

from __future__ import annotations

import collections
import logging

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from graph_ir.io.tf_export import export_graphdef  # noqa: E402
from graph_ir.io.tf_import import import_graphdef  # noqa: E402

logger = logging.getLogger(__name__)

# Same ops on the same CPU kernels: only thread-dependent reduction order can differ.
RTOL, ATOL = 1e-5, 1e-6


def _tf_device(name: str) -> str:
    """A topology device name ("cpu0", "gpu1") as a TensorFlow device string."""
    kind, index = name.rstrip("0123456789"), name[len(name.rstrip("0123456789")) :]
    return f"/device:{kind.upper()}:{index or 0}"


def _run(graph_def, feeds: dict[str, np.ndarray], fetches: list[str]) -> list[np.ndarray]:
    config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
    with tf.Graph().as_default() as graph:
        tf.graph_util.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=graph, config=config) as session:
            return session.run(fetches, feeds)


def _frozen_keras_model():
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    tf.keras.utils.set_random_seed(0)
    inputs = tf.keras.Input((12, 12, 3))
    x = tf.keras.layers.Conv2D(8, 3, activation="relu")(inputs)
    left = tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    right = tf.keras.layers.Conv2D(8, 1, activation="tanh")(x)
    x = tf.keras.layers.Add()([left, right])
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    outputs = tf.keras.layers.Dense(4, activation="softmax")(x)
    model = tf.keras.Model(inputs, outputs)
    function = tf.function(lambda v: model(v, training=False))
    concrete = function.get_concrete_function(tf.TensorSpec((2, 12, 12, 3), tf.float32))
    frozen = convert_variables_to_constants_v2(concrete)
    return frozen.graph.as_graph_def(), frozen.inputs[0].name, frozen.outputs[0].name


def test_placement_pass_devices_are_written_and_the_graph_runs_equal():
    from passes.placement import place, resolve_topology

    graph_def, inp, out = _frozen_keras_model()
    graph = import_graphdef(graph_def)
    topology = resolve_topology("2xV100")
    place(graph, "m-etf", topology).apply(graph, topology)
    for node in graph:
        node.device = _tf_device(node.device)
    used = collections.Counter(node.device for node in graph)
    assert len(used) >= 2, used  # the placement spreads the graph (else the test shows nothing)

    exported = export_graphdef(graph)
    by_name = {n.name: n for n in exported.node}
    assert {node.name: by_name[node.name].device for node in graph} == {node.name: node.device for node in graph}

    feed = np.random.default_rng(0).standard_normal((2, 12, 12, 3)).astype(np.float32)
    (want,) = _run(graph_def, {inp: feed}, [out])
    (got,) = _run(exported, {inp: feed}, [out])
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    logger.info("keras: %d nodes on %s, max |diff| %.3g", len(graph), dict(used), float(np.max(np.abs(got - want))))
