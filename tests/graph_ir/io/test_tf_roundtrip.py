"""TF GraphDef round trips run in TensorFlow: frozen Keras models, v1 loops, functional control
flow. Original and exported GraphDefs get the same seeded inputs; outputs must match."""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from graph_ir.io.tf_export import export_graphdef  # noqa: E402
from graph_ir.io.tf_import import import_graphdef  # noqa: E402

logger = logging.getLogger(__name__)

# Same ops on the same CPU kernels: results should be identical; the tolerance only absorbs
# thread-count dependent reduction order.
RTOL, ATOL = 1e-5, 1e-6


def _run(graph_def, feeds: dict[str, np.ndarray], fetches: list[str]) -> list[np.ndarray]:
    with tf.Graph().as_default() as graph:
        tf.graph_util.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=graph) as session:
            return session.run(fetches, feeds)


def _freeze(model, input_shape):
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    function = tf.function(lambda x: model(x, training=False))
    concrete = function.get_concrete_function(tf.TensorSpec(input_shape, tf.float32))
    frozen = convert_variables_to_constants_v2(concrete)
    return frozen.graph.as_graph_def(), frozen.inputs[0].name, frozen.outputs[0].name


def _check_round_trip(graph_def, feeds, fetches, *, devices: int = 0):
    graph = import_graphdef(graph_def)
    graph.verify()
    assert len(graph) == len(graph_def.node)
    placed = [node for node in graph if node.kind.value in ("conv", "matmul")][: devices or None]
    for node in placed:
        node.device = "/device:CPU:0"
    exported = export_graphdef(graph)
    by_name = {n.name: n for n in exported.node}
    assert all(by_name[node.name].device == "/device:CPU:0" for node in placed)
    expected = _run(graph_def, feeds, fetches)
    actual = _run(exported, feeds, fetches)
    for want, got in zip(expected, actual):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    return graph, exported


def test_small_keras_model_round_trip_runs_equal():
    tf.keras.utils.set_random_seed(0)
    inputs = tf.keras.Input((16, 16, 3))
    x = tf.keras.layers.Conv2D(8, 3, activation="relu")(inputs)
    x = tf.keras.layers.BatchNormalization()(x)
    x = tf.keras.layers.MaxPool2D()(x)
    x = tf.keras.layers.Flatten()(x)
    outputs = tf.keras.layers.Dense(5, activation="softmax")(x)
    graph_def, inp, out = _freeze(tf.keras.Model(inputs, outputs), (2, 16, 16, 3))
    feed = np.random.default_rng(0).standard_normal((2, 16, 16, 3)).astype(np.float32)
    graph, exported = _check_round_trip(graph_def, {inp: feed}, [out], devices=2)

    # A pass's rewiring is what gets written: bypass every Identity, then run again.
    for node in [n for n in graph if n.op_type == "Identity" and not any(v in graph.outputs for v in n.outputs)]:
        node.outputs[0].replace_all_uses_with(node.inputs[0])
        graph.remove(node)
    # ...and a constant the pass made (an initializer, not a node) becomes a Const node.
    from graph_ir.tensors import NumpyTensor

    matmul = next(n for n in graph if n.op_type == "MatMul")
    weights = matmul.inputs[1].producer.attr("value").numpy()
    matmul.set_input(1, graph.add_constant(NumpyTensor(weights.copy()), "folded_weights"))
    graph.verify()
    slim = export_graphdef(graph)
    assert len(slim.node) < len(exported.node)
    assert next(n for n in slim.node if n.op == "MatMul").input[1] == "folded_weights"
    np.testing.assert_allclose(_run(slim, {inp: feed}, [out])[0], _run(graph_def, {inp: feed}, [out])[0], rtol=RTOL, atol=ATOL)


def test_v1_while_loop_and_cond_round_trip_runs_equal():
    tf.compat.v1.disable_control_flow_v2()
    try:
        with tf.Graph().as_default() as built:
            x = tf.compat.v1.placeholder(tf.float32, (3,), name="x")
            _, looped = tf.compat.v1.while_loop(lambda i, v: i < 4, lambda i, v: (i + 1, v * 1.5 + 1.0), [tf.constant(0), x])
            branched = tf.compat.v1.cond(tf.reduce_sum(x) > 0, lambda: looped * 2.0, lambda: looped - 1.0)
            tf.identity(branched, name="out")
    finally:
        tf.compat.v1.enable_control_flow_v2()
    graph_def = built.as_graph_def()
    assert {"Merge", "NextIteration", "Switch", "Enter", "Exit"} <= {n.op for n in graph_def.node}
    graph, _ = _check_round_trip(graph_def, {"x:0": np.array([1.0, -2.0, 0.5], np.float32)}, ["out:0"])
    assert any(node.meta.get("tf.back_edges") for node in graph)
    for value in ([3.0, 1.0, 2.0], [-3.0, -1.0, 0.0]):
        _check_round_trip(graph_def, {"x:0": np.array(value, np.float32)}, ["out:0"])


def test_functional_control_flow_round_trip_runs_equal():
    @tf.function
    def model(x):
        def body(i, v):
            a, b = tf.split(v, 2)
            return i + 1, tf.concat([b * 0.5, a + 1.0], 0)

        _, looped = tf.while_loop(lambda i, v: i < 3, body, [tf.constant(0), x])
        return tf.cond(tf.reduce_sum(looped) > 0, lambda: tf.nn.relu(looped), lambda: looped * -1.0)

    concrete = model.get_concrete_function(tf.TensorSpec((4,), tf.float32))
    graph_def = concrete.graph.as_graph_def()
    ops = {n.op for n in graph_def.node}
    assert ops & {"While", "StatelessWhile"} and ops & {"If", "StatelessIf"}
    inp, out = concrete.inputs[0].name, concrete.outputs[0].name
    graph, exported = _check_round_trip(graph_def, {inp: np.array([1.0, -2.0, 3.0, 0.5], np.float32)}, [out])
    assert len(graph.functions) == len(graph_def.library.function) >= 4
    split = next(n for f in graph.functions.values() for n in f.graph if n.op_type == "Split")
    assert len(split.outputs) == 2
    _check_round_trip(graph_def, {inp: np.array([-1.0, -2.0, -3.0, -0.5], np.float32)}, [out])


@pytest.mark.slow
def test_inception_v3_frozen_round_trip_runs_equal():
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.applications.InceptionV3(weights=None)
    graph_def, inp, out = _freeze(model, (1, 299, 299, 3))
    start = time.perf_counter()
    graph = import_graphdef(graph_def)
    logger.info("InceptionV3 frozen: %d nodes imported in %.2f s", len(graph), time.perf_counter() - start)
    feed = np.random.default_rng(0).standard_normal((1, 299, 299, 3)).astype(np.float32)
    _check_round_trip(graph_def, {inp: feed}, [out], devices=10)


@pytest.mark.slow
def test_inception_v3_training_step_imports_and_exports_losslessly():
    """A GradientTape + optimizer step: about 11k nodes. Freezing it fails in TensorFlow itself
    (the optimizer assigns to the variables), so the variables stay resource captures."""
    from tensorflow.core.framework import graph_pb2

    tf.keras.utils.set_random_seed(0)
    model = tf.keras.applications.InceptionV3(weights=None)
    optimizer = tf.keras.optimizers.SGD(0.01, momentum=0.9)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, model(x, training=True)))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    specs = (tf.TensorSpec((8, 299, 299, 3), tf.float32), tf.TensorSpec((8,), tf.int32))
    raw = train_step.get_concrete_function(*specs).graph.as_graph_def().SerializeToString()
    start = time.perf_counter()
    graph_def = graph_pb2.GraphDef()
    graph_def.ParseFromString(raw)
    parse_s = time.perf_counter() - start
    start = time.perf_counter()
    graph = import_graphdef(graph_def, infer_shapes=False)
    import_s = time.perf_counter() - start
    logger.info("InceptionV3 train step: %d nodes, ParseFromString %.3f s, import %.3f s", len(graph), parse_s, import_s)
    graph.verify()
    assert len(graph) == len(graph_def.node) > 10_000
    exported = export_graphdef(graph)
    assert {n.name: n for n in exported.node} == {n.name: n for n in graph_def.node}
