"""`optimize()` on a frozen Keras GraphDef (checked in TensorFlow) and on a JAX function's HLO
(checked in XLA). TensorFlow is imported at collection: importing it after onnxruntime ran in
the same process aborts it."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
pytest.importorskip("jaxlib")

import compiler_opt  # noqa: E402


def _frozen_keras_graphdef():
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    tf.keras.utils.set_random_seed(0)
    inputs = tf.keras.Input((12, 12, 3))
    x = tf.keras.layers.Conv2D(8, 3, activation="relu")(inputs)
    left = tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    right = tf.keras.layers.Conv2D(8, 1, activation="tanh")(x)
    x = tf.keras.layers.Add()([left, right])
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(4, activation="softmax")(x))
    function = tf.function(lambda v: model(v, training=False))
    frozen = convert_variables_to_constants_v2(function.get_concrete_function(tf.TensorSpec((2, 12, 12, 3), tf.float32)))
    return frozen.graph.as_graph_def()


def test_optimize_a_keras_graphdef_runs_equal_in_tensorflow():
    result = compiler_opt.optimize(_frozen_keras_graphdef(), target="2xV100", method="m-etf", check=True)
    assert result.format == "tf_graphdef"
    assert result.numerics.ok and result.numerics.backend.startswith("TensorFlow"), result.numerics.one_line()
    assert result.step_time_after_s >= result.lower_bound_s > 0
    assert {n.device for n in result.graph if n.op_type == "Conv2D"} <= {"/device:GPU:0", "/device:GPU:1"}


def test_optimize_a_jax_function_hlo_runs_equal_in_xla():
    import jax
    import jax.numpy as jnp

    def mlp(x, w1, w2):
        h = jax.nn.relu(x @ w1 + 1.0)
        return jnp.tanh(h @ w2) * 2.0

    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((8, 16), (16, 32), (32, 4))]
    text = jax.jit(mlp).lower(*args).as_text(dialect="hlo")
    result = compiler_opt.optimize(text, target="4xV100", method="auto", budget_s=2, check=True)
    assert result.format == "hlo"
    assert result.numerics.ok and result.numerics.backend.startswith("XLA"), result.numerics.one_line()
    assert any(n.fusion_group is not None for n in result.graph)


def test_a_graphdef_placed_for_another_cluster_is_placed_anew():
    # GraphDefs carry the devices their authors had ("/device:GPU:*", "/job:worker/task:3/..."):
    # the placement passes and GO decide every device anyway, so those count as unplaced.
    graph_def = _frozen_keras_graphdef()
    for index, node in enumerate(graph_def.node):
        node.device = ("/device:GPU:*", "/job:worker/replica:0/task:3/device:GPU:7", "1")[index % 3]
    result = compiler_opt.optimize(graph_def, target="2xV100", method="auto", budget_s=3, check=True)
    assert result.numerics.ok, result.numerics.one_line()
    assert not [note for note in result.notes if "failed" in note]  # go and every classical method ran
    assert {n.device for n in result.graph} <= {"/device:GPU:0", "/device:GPU:1", "/device:CPU:0"}


def test_decisions_from_graph_names_an_unknown_device_unless_asked_not_to():
    from cost_model.costs.target import resolve_topology
    from cost_model.decisions import DecisionError, Decisions
    from graph_ir.io.tf_import import import_graphdef

    graph = import_graphdef(_frozen_keras_graphdef())
    first = next(iter(graph))
    first.device = "/device:GPU:*"
    topology = resolve_topology("2xV100")
    with pytest.raises(DecisionError, match="GPU") as info:
        Decisions.from_graph(graph, topology, nodes=list(graph))
    assert info.value.node == first.name and info.value.field == "device"
    decisions = Decisions.from_graph(graph, topology, nodes=list(graph), unknown_devices="default")
    assert decisions.device[0] == topology.default_device


def test_a_graph_that_waits_on_a_queue_is_not_run_by_the_check():
    # Fed random inputs, a dequeue from a queue nothing fills blocks the session forever.
    with tf.Graph().as_default() as graph:
        queue = tf.queue.FIFOQueue(4, tf.float32, shapes=[(3,)])
        enqueue = queue.enqueue(tf.constant([1.0, 2.0, 3.0]))  # in the graph, never run by the fetch
        del enqueue
        tf.multiply(queue.dequeue(), 2.0, name="doubled")
    result = compiler_opt.optimize(graph.as_graph_def(), target="2xV100", method="m-etf", check=True)
    assert not result.numerics.ran and "waits for data from outside the graph" in result.numerics.one_line()
