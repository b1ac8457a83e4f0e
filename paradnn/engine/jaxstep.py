"""The training step under Keras 3's JAX backend: same models, same optimizer arithmetic, same protocol.

The family's own builder makes the model (Keras layers run under any backend). The step
is a pure function of the variables' values: ``model.stateless_call`` for the forward
pass, ``jax.value_and_grad`` for the gradients and ``optimizer.stateless_apply`` for
Keras's RMSProp (the arithmetic TensorFlow's fused kernel is tested to match). K steps
run per call in a ``jax.lax.fori_loop`` under one ``jax.jit`` whose state argument is
donated, on data placed on the device once: as with TensorFlow's K-step loop, neither
Python nor host transfers are inside the timer. K is an argument, not a constant, so
calibration compiles once.

Only a process whose Keras runs the JAX backend can import this module; see
:func:`paradnn.engine.frameworks.activate` and the sweep's worker.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from paradnn.engine.energy import meter_for
from paradnn.engine.frameworks import check_policy
from paradnn.engine.protocol import Measurement, RunSettings, first_line, host_rss, run_protocol
from paradnn.engine.training import RMSPROP, keep, rerun_kept, sparse_cross_entropy
from paradnn.families import Config, family_of
from paradnn.settings import ENGINE_DEFAULTS
from paradnn.tfimport import keras, tf
from paradnn.vocabulary import OK, OOM

if keras.backend.backend() != "jax":  # the model would be built for another backend's arrays
    raise ImportError(f"paradnn.engine.jaxstep needs Keras's JAX backend; this process runs {keras.backend.backend()}")

State = tuple[list[Any], list[Any], list[Any]]  # trainable, non-trainable and optimizer values


def jax_device(tf_device: str) -> jax.Device:
    """The JAX device of a TensorFlow device string such as ``/CPU:0`` or ``/GPU:1``."""
    kind, _, index = tf_device.strip("/").partition(":")
    return jax.devices(kind.lower())[int(index or 0)]


@dataclass
class JaxTrainer:
    """A built model, Keras RMSProp, one batch of synthetic data on ``device``, and the jitted loop."""

    config: Config
    policy: str = ENGINE_DEFAULTS["dtype"]
    device: str = "/CPU:0"
    seed: int = 0
    model: keras.Model = field(init=False)

    def __post_init__(self) -> None:
        check_policy("jax", self.policy)
        self.family = family_of(self.config)
        self.jax_device = jax_device(self.device)
        keras.utils.set_random_seed(self.seed)
        with jax.default_device(self.jax_device):
            self.model = self.family.build(self.config, self.policy)
            self.optimizer = keras.optimizers.RMSprop(**RMSPROP)
            self.optimizer.build(self.model.trainable_variables)
        self.loss_fn = self.family.loss(self.config) if self.family.loss else sparse_cross_entropy()
        # The data's shapes and dtypes, from a trace of the family's generator (nothing allocated).
        traced = tf.function(lambda: self.family.data(self.config, self.seed)).get_concrete_function()
        outputs = traced.structured_outputs
        self.specs = tf.nest.map_structure(lambda t: jax.ShapeDtypeStruct(t.shape, t.dtype.as_numpy_dtype), outputs)
        self._state: State | None = None
        self._data: tuple[Any, Any] | None = None
        self._run = jax.jit(self._steps, donate_argnums=0)

    def _initial_state(self) -> State:
        """Copies of the variables' values (the loop donates its state; the model keeps its own)."""
        values = (
            [v.value for v in self.model.trainable_variables],
            [v.value for v in self.model.non_trainable_variables],
            [v.value for v in self.optimizer.variables],
        )
        return jax.device_put(jax.tree.map(jnp.array, values), self.jax_device)

    def _state_specs(self) -> State:
        return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), self._initial_state())

    @property
    def data(self) -> tuple[Any, Any]:
        """One batch of ``(inputs, labels)`` on the device, made on first use."""
        if self._data is None:
            x, y = self.family.data(self.config, self.seed)
            self._data = jax.device_put((np.asarray(x), np.asarray(y)), self.jax_device)
        return self._data

    def _loss(self, trainable: list, non_trainable: list, x: Any, y: Any) -> tuple[Any, list]:
        outputs, non_trainable = self.model.stateless_call(trainable, non_trainable, x, training=True)
        outputs = jax.tree.map(lambda t: t.astype(jnp.float32), outputs)
        return self.loss_fn(y, outputs), non_trainable

    def step(self, state: State, x: Any, y: Any) -> tuple[State, Any]:
        """One training step: the new state and the float32 loss."""
        trainable, non_trainable, slots = state
        (loss, non_trainable), grads = jax.value_and_grad(self._loss, has_aux=True)(trainable, non_trainable, x, y)
        trainable, slots = self.optimizer.stateless_apply(slots, grads, trainable)
        return (list(trainable), list(non_trainable), list(slots)), loss

    def _steps(self, state: State, x: Any, y: Any, k: Any) -> tuple[State, Any]:
        def body(_: Any, carry: tuple[State, Any]) -> tuple[State, Any]:
            return self.step(carry[0], x, y)

        return jax.lax.fori_loop(0, k, body, (state, jnp.float32(0.0)))

    def flops(self) -> float | None:
        """FLOPs of one step as XLA's cost analysis counts them (lowered, not compiled; nothing allocated)."""
        cost = jax.jit(self.step).lower(self._state_specs(), *self.specs).cost_analysis()
        if isinstance(cost, list):  # older JAX: one dict per computation
            cost = cost[0] if cost else {}
        return float(cost["flops"]) if cost and "flops" in cost else None

    def run(self, k: int) -> float:
        """Execute ``k`` training steps in one call and wait for them; returns the last loss."""
        if self._state is None:
            self._state = self._initial_state()
        x, y = self.data
        self._state, loss = self._run(self._state, x, y, jnp.int32(k))
        return float(loss)  # copies to the host, so the device has finished


def measure(config: Config, settings: RunSettings, count_graph: bool = True) -> Measurement:
    """Build ``config`` under JAX on ``settings.device``, count its step's FLOPs and time it.

    The JAX twin of :func:`paradnn.engine.training.measure`: the same protocol and record; the
    graph count is XLA's (``flops_graph``), so it can be checked against TensorFlow's.
    Out-of-memory is a result (state ``oom``).
    """
    from paradnn.engine.graphcount import GraphCount

    again = rerun_kept(config, settings)  # a later round: the step built and compiled in the first
    if again is not None:
        return again
    start, began = time.perf_counter(), time.time()
    rss_before = host_rss()
    try:
        trainer = JaxTrainer(config, settings.dtype, settings.device)
        built = time.perf_counter()
        flops = trainer.flops() if count_graph else None
        counted = time.perf_counter()
        m = run_protocol(trainer.run, settings, meter_for(settings.device), began=began)
        m.graph = GraphCount(int(flops), {}, []) if flops is not None else None
        m.phases.update(build_s=built - start, count_s=counted - built)
    except jax.errors.JaxRuntimeError as exc:
        if "RESOURCE_EXHAUSTED" not in str(exc):
            raise
        m = Measurement(state=OOM, error=first_line(exc))
    except MemoryError as exc:
        m = Measurement(state=OOM, error=f"MemoryError: {exc}")
    stats = jax_device(settings.device).memory_stats() if not settings.device.upper().startswith("/CPU") else None
    m.peak_memory_bytes = int(stats["peak_bytes_in_use"]) if stats else max(0, host_rss() - rss_before)
    m.wall_time_s = time.perf_counter() - start
    if m.state == OK:  # trainer is bound: building it succeeded
        keep(config, settings, trainer, m)
    return m
