"""The training step: model, optimizer, device-resident data and a K-steps-per-call function.

The harness times :meth:`Trainer.run`, one compiled ``tf.function`` that executes K
training steps (forward, gradients, RMSProp update) in a device-side loop, like
TPUEstimator's iterations per loop, so Python overhead vanishes from the timings.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from paradnn.config import policy as check_policy
from paradnn.engine.energy import meter_for
from paradnn.engine.graphcount import count_graph_flops
from paradnn.engine.inputs import dataset, finish, stop_finished
from paradnn.engine.protocol import Measurement, RunSettings, first_line, host_rss, run_protocol
from paradnn.families import Config, family_of
from paradnn.settings import ENGINE_DEFAULTS
from paradnn.tfimport import keras, tf
from paradnn.vocabulary import OK, OOM

# Small enough that the loss stays finite over thousands of steps on random labels:
# non-finite values change arithmetic speed on CPUs, so this is checked after each call.
LEARNING_RATE = 1e-4


# RMSProp as in the original study.
RMSPROP = {"learning_rate": LEARNING_RATE, "rho": 0.9, "momentum": 0.9, "epsilon": 1.0}
# Element-wise operations of one RMSProp-with-momentum update per weight: ms = rho * ms +
# (1 - rho) * g^2 (4), mom = momentum * mom + lr * g / sqrt(ms + epsilon) (6), w -= mom (1).
RMSPROP_FLOPS_PER_WEIGHT = 11


class FusedRMSprop(keras.optimizers.RMSprop):
    """Keras RMSprop computed by TensorFlow's fused ``ResourceApplyRMSProp`` kernel.

    The same arithmetic as Keras's update (tested to agree), in one op per variable
    instead of about 18, as TF 1's ``tf.train.RMSPropOptimizer`` did in the original
    study. Without XLA each op costs executor overhead, which dominated small models.
    """

    def update_step(self, gradient: tf.Tensor, variable: tf.Variable, learning_rate: tf.Tensor) -> None:
        if self.centered or not self.momentum:
            return super().update_step(gradient, variable, learning_rate)
        i = self._get_variable_index(variable)
        dtype = variable.dtype
        tf.raw_ops.ResourceApplyRMSProp(
            var=variable.handle,
            ms=self._velocities[i].value.handle,
            mom=self._momentums[i].value.handle,
            lr=tf.cast(learning_rate, dtype),
            rho=tf.cast(self.rho, dtype),
            momentum=tf.cast(self.momentum, dtype),
            epsilon=tf.cast(self.epsilon, dtype),
            grad=tf.cast(gradient, dtype),
        )


def sparse_cross_entropy() -> keras.losses.Loss:
    """Softmax cross-entropy on integer labels, from logits: the default training loss."""
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def make_optimizer(policy: str) -> keras.optimizers.Optimizer:
    """RMSProp (rho 0.9, momentum 0.9, epsilon 1.0), fused; loss-scaled for float16."""
    opt = FusedRMSprop(**RMSPROP)
    if policy == "mixed_float16":  # float16 gradients underflow without loss scaling
        opt = keras.optimizers.LossScaleOptimizer(opt)
    return opt


def _register_rmsprop_flops() -> None:
    """Give the fused update a FLOP statistic, so ``flops_graph`` still counts the optimizer."""
    from tensorflow.python.framework import graph_util
    from tensorflow.python.framework import ops as tf_ops

    def flops(graph: tf.Graph, node) -> tf_ops.OpStats:
        shape = graph_util.tensor_shape_from_node_def_name(graph, node.input[7])  # the gradient
        shape.assert_is_fully_defined()
        return tf_ops.OpStats("flops", RMSPROP_FLOPS_PER_WEIGHT * shape.num_elements())

    try:
        tf_ops.RegisterStatistics("ResourceApplyRMSProp", "flops")(flops)
    except KeyError:  # already registered in this process
        pass


_register_rmsprop_flops()


@dataclass
class Trainer:
    """A built model, its optimizer, one batch of synthetic data, and the step functions."""

    config: Config
    policy: str = ENGINE_DEFAULTS["dtype"]
    xla: bool = ENGINE_DEFAULTS["xla"]
    seed: int = 0
    input: str = ENGINE_DEFAULTS["input"]  # or host / host-prep: run_host() feeds each step from paradnn.engine.inputs' pipeline
    model: keras.Model = field(init=False)
    optimizer: keras.optimizers.Optimizer = field(init=False)

    def __post_init__(self) -> None:
        check_policy(self.policy)
        self.family = family_of(self.config)
        keras.utils.set_random_seed(self.seed)
        self.model = self.family.build(self.config, self.policy)
        self.optimizer = make_optimizer(self.policy)
        self.optimizer.build(self.model.trainable_variables)
        self.loss_fn = self.family.loss(self.config) if self.family.loss else sparse_cross_entropy()
        # The data's shapes, from a trace of the family's generator: nothing is allocated
        # until the first run, so the step can be traced (and counted) for any batch size.
        traced = tf.function(lambda: self.family.data(self.config, self.seed)).get_concrete_function()
        self.specs = tf.nest.map_structure(tf.TensorSpec.from_tensor, traced.structured_outputs)
        self._data: tuple[Any, Any] | None = None
        # One trace of the step serves both the FLOP count and the K-step loop, which calls it.
        self.traced_step = tf.function(self.step, jit_compile=self.xla)
        self._run = tf.function(self._steps, jit_compile=self.xla)
        # The host loop cannot be one XLA cluster (it reads an iterator); the step it calls still is.
        self._run_host = tf.function(self._host_steps)
        self._iterator = None

    @property
    def data(self) -> tuple[Any, Any]:
        """One batch of synthetic ``(inputs, labels)`` on the current device, made on first use."""
        if self._data is None:
            self._data = self.family.data(self.config, self.seed)
        return self._data

    def step(self, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        """One training step; returns the float32 loss."""
        variables = self.model.trainable_variables
        scaled = isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer)
        with tf.GradientTape() as tape:
            outputs = tf.nest.map_structure(lambda t: tf.cast(t, tf.float32), self.model(x, training=True))
            loss = self.loss_fn(y, outputs)
            target = self.optimizer.scale_loss(loss) if scaled else loss
            replicas = tf.distribute.get_strategy().num_replicas_in_sync
            if replicas > 1:  # data-parallel: the optimizer sums the replicas' gradients; their mean is wanted
                target = target / replicas
        grads = tape.gradient(target, variables)
        # The embedding's gradient arrives as IndexedSlices, whose data-dependent shape makes
        # XLA recompile the step on every call (measured: ~3 s per call for a tiny LSTM);
        # a dense gradient keeps every shape static.
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
        self.optimizer.apply(grads, variables)
        return loss

    def _steps(self, x: tf.Tensor, y: tf.Tensor, k: tf.Tensor) -> tf.Tensor:
        # A plain while loop: autograph's ``for _ in tf.range(k)`` would set
        # ``maximum_iterations=k``, which XLA needs as a constant, recompiling for every k.
        def body(i: tf.Tensor, _: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            return i + 1, self.traced_step(x, y)

        _, loss = tf.while_loop(lambda i, _: i < k, body, (tf.constant(0), tf.constant(0.0)))
        return loss

    def _host_steps(self, iterator: Any, k: tf.Tensor) -> tf.Tensor:
        def body(i: tf.Tensor, _: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            x, y = iterator.get_next()
            return i + 1, self.traced_step(x, y)

        _, loss = tf.while_loop(lambda i, _: i < k, body, (tf.constant(0), tf.constant(0.0)))
        return loss

    def run_host(self, k: int) -> float:
        """Execute ``k`` steps, each on the next batch of the input mode's ``tf.data`` pipeline; returns the last loss."""
        if self._iterator is None:
            self._iterator = iter(dataset(self.input, self.family, self.config, self.seed))
        return float(self._run_host(self._iterator, tf.constant(k, tf.int32)).numpy())

    def detach_input(self) -> Any:
        """The host pipeline's iterator (None if none was made), no longer held by this trainer."""
        iterator, self._iterator = self._iterator, None
        return iterator

    def trace(self) -> tf.types.experimental.ConcreteFunction:
        """Trace the step (once; later calls and the K-step loop reuse this trace). Allocates no data."""
        return self.traced_step.get_concrete_function(*self.specs)

    def run(self, k: int) -> float:
        """Execute ``k`` training steps in one call and wait for them; returns the last loss."""
        x, y = self.data
        loss = self._run(x, y, tf.constant(k, tf.int32))
        return float(loss.numpy())  # copies to the host, so the device has finished


@dataclass
class Compiled:
    """A built and compiled step kept for the configuration's next round, with what building it measured."""

    trainer: Any  # a Trainer, JaxTrainer or TorchTrainer: what its ``run(k)`` times
    graph: Any
    compile_time_s: float
    peak_memory_bytes: int
    calibrated: tuple[int, float]  # steps per call and seconds per step, as the first round calibrated them
    size: int  # the configuration's predicted memory (bytes): what keeping it costs


COMPILED: OrderedDict[tuple, Compiled] = OrderedDict()  # the steps kept, least recently used first
KEEP_SHARE = 0.1  # of the RAM: the predicted memory of the steps one process keeps (and twice that of its RSS)


def _kept_key(config: Config, settings: RunSettings) -> tuple:
    return config.family, config.label, settings.framework, settings.dtype, settings.xla, settings.device


def rerun_kept(config: Config, settings: RunSettings) -> Measurement | None:
    """A later round of ``config``'s kept step (any framework's), timed again; None where none is kept."""
    key = _kept_key(config, settings)
    if settings.input != "device" or key not in COMPILED:
        return None
    COMPILED.move_to_end(key)
    return _rerun(COMPILED[key], settings, time.perf_counter(), time.time())


def keep(config: Config, settings: RunSettings, trainer: Any, m: Measurement) -> None:
    """Keep a device-resident step that measured ok for the configuration's later rounds (:data:`COMPILED`)."""
    if settings.input == "device":
        from paradnn.counting import memory_estimate

        _keep(
            _kept_key(config, settings),
            Compiled(
                trainer,
                m.graph,
                m.compile_time_s,
                m.peak_memory_bytes,
                (m.steps_per_call, m.stats.median),
                memory_estimate(config, settings.dtype),
            ),
        )


def _keep(key: tuple, compiled: Compiled) -> None:
    """Keep a compiled step for a later round of its configuration, within :data:`KEEP_SHARE` of the RAM."""
    import psutil

    limit = KEEP_SHARE * psutil.virtual_memory().total
    if host_rss() > 2 * limit:  # the process holds more than the predictions say: keep nothing
        COMPILED.clear()
        return
    if compiled.size > limit:
        return
    COMPILED[key] = compiled
    while sum(c.size for c in COMPILED.values()) > limit:
        COMPILED.popitem(last=False)


def _rerun(kept: Compiled, settings: RunSettings, start: float, began: float) -> Measurement:
    """Another round of a kept step: the protocol again on the compiled step (its weights trained on,
    which changes no timing), with the compile time, graph count and memory its building measured."""
    m = run_protocol(kept.trainer.run, settings, meter_for(settings.device), began=began, kept=kept.calibrated)
    m.graph, m.compile_time_s, m.peak_memory_bytes = kept.graph, kept.compile_time_s, kept.peak_memory_bytes
    m.reused_step = True  # built and compiled in an earlier round: no build, trace or count this time
    m.wall_time_s = time.perf_counter() - start
    return m


def measure(config: Config, settings: RunSettings, count_graph: bool = True) -> Measurement:
    """Build ``config`` on ``settings.device`` under TensorFlow, count its graph FLOPs and time its step.

    Out-of-memory is a result (state ``oom``), not a crash. One device, one process: the
    JAX and data-parallel backends are :mod:`paradnn.engine.jaxstep` and
    :mod:`paradnn.engine.replicas`; :func:`paradnn.engine.record.measure` picks one.

    A device-resident step is kept after timing (:data:`COMPILED`, least recently used dropped
    past :data:`KEEP_SHARE` of the RAM), so a sweep's later rounds of the configuration time the
    compiled step again instead of building and compiling it anew (about half of an XLA round's
    wall time for a small FC); such a row keeps the compile time, FLOP count and memory its
    first round measured, and says so (``extra.reused_step``).
    """
    if settings.xla is None:
        raise ValueError("settings.xla is None (auto): resolve it with paradnn.engine.ceilings.xla_choice first")
    stop_finished()  # the last configuration's pipeline, where no sweep worker has stopped it yet
    again = rerun_kept(config, settings)
    if again is not None:
        return again
    start, began = time.perf_counter(), time.time()
    rss_before = host_rss()
    gpu = settings.device.upper().startswith("/GPU")
    if gpu:
        tf.config.experimental.reset_memory_stats(settings.device.strip("/"))
    try:
        with tf.device(settings.device):
            trainer = Trainer(config, settings.dtype, settings.xla, input=settings.input)
            built = time.perf_counter()
            step_graph = trainer.trace().graph  # part of compiling; reused by the FLOP count and the first call
            traced = time.perf_counter()
            graph = count_graph_flops(step_graph) if count_graph else None
            counted = time.perf_counter()
            host = settings.input != "device"
            try:
                m = run_protocol(
                    trainer.run_host if host else trainer.run,
                    settings,
                    meter_for(settings.device),
                    reference=trainer.run if host else None,
                    began=began,
                )
            finally:
                finish(trainer.detach_input())
            m.graph = graph
            m.compile_time_s += traced - built
            m.phases.update(build_s=built - start, trace_s=traced - built, count_s=counted - traced)
    except tf.errors.ResourceExhaustedError as exc:
        m = Measurement(state=OOM, error=first_line(exc))
    except MemoryError as exc:
        m = Measurement(state=OOM, error=f"MemoryError: {exc}")
    if gpu:
        m.peak_memory_bytes = int(tf.config.experimental.get_memory_info(settings.device.strip("/"))["peak"])
    else:
        m.peak_memory_bytes = max(0, host_rss() - rss_before)
    m.wall_time_s = time.perf_counter() - start
    if m.state == OK:  # trainer is bound: building it succeeded
        keep(config, settings, trainer, m)
    return m
