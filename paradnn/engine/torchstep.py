"""The training step under Keras 3's PyTorch backend: same models, same optimizer arithmetic, same protocol.

The family's own builder makes the model (under ``KERAS_BACKEND=torch`` a Keras model is a
``torch.nn.Module``). The step is PyTorch's own: the forward pass, the loss in float32,
``loss.backward()`` and Keras's RMSProp (``optimizer.apply``, the arithmetic TensorFlow's
fused kernel is tested to match; ``torch.optim.RMSprop`` puts epsilon outside the square
root and the learning rate after the momentum, so it would train another optimizer). K steps
run per timed call on data placed on the device once; the loss is read (which waits for the
device) after the last. PyTorch runs eagerly, one Python call per step, which is how it
trains; the XLA setting's counterpart is ``torch.compile`` of the whole step (its first
call, compilation included, is stored as the compile time).

Only a process whose Keras runs the PyTorch backend can import this module; see
:func:`paradnn.engine.frameworks.activate` and the sweep's worker.
"""

from __future__ import annotations

import time
import types
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_map

from paradnn.engine.energy import meter_for
from paradnn.engine.frameworks import check_policy
from paradnn.engine.graphcount import GraphCount
from paradnn.engine.protocol import Measurement, RunSettings, first_line, host_rss, run_protocol
from paradnn.engine.training import RMSPROP, RMSPROP_FLOPS_PER_WEIGHT, keep, rerun_kept, sparse_cross_entropy
from paradnn.families import Config, family_of
from paradnn.settings import ENGINE_DEFAULTS
from paradnn.tfimport import keras, tf
from paradnn.vocabulary import ERROR, OK, OOM

if keras.backend.backend() != "torch":  # the model would be built for another backend's arrays
    raise ImportError(f"paradnn.engine.torchstep needs Keras's torch backend; this process runs {keras.backend.backend()}")

# Past dynamo's recompile limits a compiled function silently runs eagerly: a compiled row would then
# time an eager step. Reaching a limit is an error instead (an error row), and each trainer compiles a
# copy of the step's code (:meth:`TorchTrainer.compiled_step`), so the limits count one trainer's
# recompiles, not every configuration a sweep's worker compiled before.
torch._dynamo.config.fail_on_recompile_limit_hit = True


def torch_device(tf_device: str) -> str:
    """PyTorch's name of a TensorFlow device string: ``/CPU:0`` is ``cpu``, ``/GPU:1`` is ``cuda:1``."""
    kind, _, index = tf_device.strip("/").partition(":")
    return "cpu" if kind.upper() == "CPU" else f"cuda:{int(index or 0)}"


@dataclass
class TorchTrainer:
    """A built model, Keras RMSProp, one batch of synthetic data on ``device``, and the step (compiled or eager)."""

    config: Config
    policy: str = ENGINE_DEFAULTS["dtype"]
    device: str = "/CPU:0"
    compiled: bool = False  # torch.compile the step: the XLA setting's counterpart
    seed: int = 0
    model: keras.Model = field(init=False)

    def __post_init__(self) -> None:
        check_policy("torch", self.policy)
        self.family = family_of(self.config)
        self.torch_device = torch_device(self.device)
        keras.utils.set_random_seed(self.seed)
        with keras.device(self.torch_device):
            self.model = self.family.build(self.config, self.policy)
            self.optimizer = keras.optimizers.RMSprop(**RMSPROP)
            self.optimizer.build(self.model.trainable_variables)
        self.loss_fn = self.family.loss(self.config) if self.family.loss else sparse_cross_entropy()
        self.weights = [v.value for v in self.model.trainable_variables]
        self._data: tuple[Any, Any] | None = None
        self._step = self.compiled_step() if self.compiled else self.step

    @property
    def data(self) -> tuple[Any, Any]:
        """One batch of ``(inputs, labels)`` on the device, made on first use."""
        if self._data is None:
            x, y = self.family.data(self.config, self.seed)
            as_torch = lambda t: torch.tensor(np.asarray(t), device=self.torch_device)  # noqa: E731
            self._data = tf.nest.map_structure(as_torch, (x, y))
        return self._data

    def step(self, x: Any, y: Any) -> torch.Tensor:
        """One training step: forward, float32 loss, gradients, RMSProp; returns the loss."""
        outputs = tree_map(lambda t: t.float(), self.model(x, training=True))  # a pytree torch.compile traces through
        loss = self.loss_fn(y, outputs)
        for w in self.weights:
            w.grad = None
        loss.backward()
        self.optimizer.apply([w.grad for w in self.weights], self.model.trainable_variables)
        return loss.detach()

    def compiled_step(self) -> Any:
        """``torch.compile`` of :meth:`step` through a code object of this trainer's own: dynamo keeps its
        compiled entries per code object, so they go with the trainer and never count against another's."""
        code = TorchTrainer.step.__code__.replace()
        own = types.FunctionType(code, TorchTrainer.step.__globals__, "step", None, TorchTrainer.step.__closure__)
        return torch.compile(types.MethodType(own, self))

    def run(self, k: int) -> float:
        """Execute ``k`` training steps in one call and wait for them; returns the last loss."""
        x, y = self.data
        loss = torch.zeros(())
        for _ in range(k):
            loss = self._step(x, y)
        return float(loss)  # copies to the host, so the device has finished

    def flops(self) -> int:
        """FLOPs of one step: PyTorch's count of its matrix products and convolutions (forward and
        backward, ``FlopCounterMode``) and RMSProp's element-wise arithmetic per weight. Runs one
        eager step, which trains the weights once before the protocol's calibration."""
        from torch.utils.flop_counter import FlopCounterMode

        counter = FlopCounterMode(display=False)
        with counter:
            self.step(*self.data)
        weights = sum(int(w.numel()) for w in self.weights)
        return int(counter.get_total_flops()) + RMSPROP_FLOPS_PER_WEIGHT * weights


def measure(config: Config, settings: RunSettings, count_graph: bool = True) -> Measurement:
    """Build ``config`` under PyTorch on ``settings.device``, count its step's FLOPs and time it.

    The PyTorch twin of :func:`paradnn.engine.training.measure`: the same protocol and record.
    Out-of-memory is a result (state ``oom``); a model ``torch.compile`` cannot handle is an
    error row with the compiler's first line.
    """
    again = rerun_kept(config, settings)  # a later round: the step built and compiled in the first
    if again is not None:
        return again
    start, began = time.perf_counter(), time.time()
    rss_before = host_rss()
    cuda = settings.device.upper().startswith("/GPU")
    if cuda:
        torch.cuda.reset_peak_memory_stats(torch_device(settings.device))
    try:
        trainer = TorchTrainer(config, settings.dtype, settings.device, compiled=bool(settings.xla))
        built = time.perf_counter()
        flops = trainer.flops() if count_graph else None
        counted = time.perf_counter()
        m = run_protocol(trainer.run, settings, meter_for(settings.device), began=began)
        m.graph = GraphCount(flops, {}, []) if flops is not None else None
        m.phases.update(build_s=built - start, count_s=counted - built)
    except torch.OutOfMemoryError as exc:
        m = Measurement(state=OOM, error=first_line(exc))
    except MemoryError as exc:
        m = Measurement(state=OOM, error=f"MemoryError: {exc}")
    except torch._dynamo.exc.TorchDynamoException as exc:  # what torch.compile could not handle
        m = Measurement(state=ERROR, error=f"torch.compile: {first_line(exc)}")
    if cuda:
        m.peak_memory_bytes = int(torch.cuda.max_memory_allocated(torch_device(settings.device)))
    else:
        m.peak_memory_bytes = max(0, host_rss() - rss_before)
    m.wall_time_s = time.perf_counter() - start
    if m.state == OK:  # trainer is bound: building it succeeded
        keep(config, settings, trainer, m)
    return m
