"""Inception-V3 (Szegedy et al., 2016) from `tf.keras.applications.InceptionV3(weights=None)`.

The one TensorFlow workload: its graph goes through the TF GraphDef importer, as TF users'
graphs do. Inference is the *frozen* GraphDef (variables folded into constants, training=False).
A training step writes its variables, so it cannot be frozen; it is written functionally with
Keras' `stateless_call`: weights and batch-norm statistics are typed placeholder inputs, the
step returns the loss, the SGD-updated weights and the new statistics. (Resource variables
would leave every weight read untyped in the GraphDef, and the convolutions without FLOPs.)
HLO text comes from TensorFlow's XLA bridge (`experimental_get_compiler_ir`).
Weights are random (seeded); nothing is downloaded. Keras needs image_size >= 75.
`application_graphdef_bytes` does the same for any other `tf.keras.applications` model (Xception,
MobileNetV2, ...): graphs nobody here wrote, for evaluating on models outside the suite.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable

__all__ = ["DEFAULT_SIZES", "PAPER_SIZES", "application_graphdef_bytes", "graphdef_bytes", "hlo_text"]

logger = logging.getLogger(__name__)

DEFAULT_SIZES: dict[str, Any] = {"batch": 2, "image_size": 75, "classes": 1000}
PAPER_SIZES: dict[str, Any] = {"batch": 32, "image_size": 299, "classes": 1000}


def _step(mode: str, batch: int, image_size: int, classes: int, application: str = "InceptionV3") -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A tf.function for the mode and its input signature."""
    if mode not in ("train", "inference"):
        raise ValueError(f"mode must be 'train' or 'inference', got {mode!r}")
    if application == "InceptionV3" and image_size < 75:
        raise ValueError(f"InceptionV3 needs image_size >= 75, got {image_size}")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    constructor = getattr(tf.keras.applications, application, None)
    if not callable(constructor) or not application[:1].isupper():
        known = sorted(name for name in dir(tf.keras.applications) if name[:1].isupper())
        raise ValueError(f"tf.keras.applications has no model {application!r}; known: {', '.join(known)}")
    tf.keras.utils.set_random_seed(0)
    model = constructor(weights=None, input_shape=(image_size, image_size, 3), classes=classes)
    images = tf.TensorSpec((batch, image_size, image_size, 3), tf.float32, name="images")
    if mode == "inference":
        return (lambda x: model(x, training=False)), (images,)

    def train(weights: list[Any], statistics: list[Any], x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(weights)
            probs, new_statistics = model.stateless_call(weights, statistics, x, training=True)
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, probs))
        grads = tape.gradient(loss, weights)
        return loss, [w - 0.01 * g for w, g in zip(weights, grads)], new_statistics

    weights = [tf.TensorSpec(v.shape, v.dtype) for v in model.trainable_variables]
    statistics = [tf.TensorSpec(v.shape, v.dtype) for v in model.non_trainable_variables]
    return train, (weights, statistics, images, tf.TensorSpec((batch,), tf.int32, name="labels"))


def graphdef_bytes(mode: str, *, batch: int, image_size: int, classes: int) -> bytes:
    """The serialized GraphDef: frozen for inference, weights as inputs for training."""
    return application_graphdef_bytes("InceptionV3", mode, batch=batch, image_size=image_size, classes=classes)


def application_graphdef_bytes(application: str, mode: str, *, batch: int, image_size: int, classes: int = 1000) -> bytes:
    """`graphdef_bytes` for `tf.keras.applications.<application>` (random weights)."""
    import tensorflow as tf

    fn, signature = _step(mode, batch, image_size, classes, application)
    concrete = tf.function(fn).get_concrete_function(*signature)
    if mode == "inference":
        from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

        concrete = convert_variables_to_constants_v2(concrete)
    graph_def = concrete.graph.as_graph_def()
    logger.info("%s %s GraphDef: %d nodes", application, mode, len(graph_def.node))
    return graph_def.SerializeToString()


def hlo_text(mode: str, *, batch: int, image_size: int, classes: int) -> str:
    """HLO text of the same step through TensorFlow's XLA bridge (tf2xla)."""
    import tensorflow as tf

    fn, signature = _step(mode, batch, image_size, classes)
    # The XLA bridge takes flat TensorSpec arguments only: repack the lists inside.
    flat = tf.nest.flatten(signature)

    def flat_fn(*args: Any) -> Any:
        return fn(*tf.nest.pack_sequence_as(signature, list(args)))

    return tf.function(flat_fn, jit_compile=True).experimental_get_compiler_ir(*flat)(stage="hlo")
