"""Data-parallel training under ``torchrun``: which process this is, and what the processes share.

``torchrun --nproc-per-node N -m seqlab train CONFIG`` starts N copies of the command with ``RANK``,
``WORLD_SIZE`` and the rendezvous in their environment; ``World.from_env`` joins them into one process group
(gloo for tensors on the CPU, NCCL for those on CUDA devices). Every process builds the same model and reads the
same epoch's batches, fixed by (seed, epoch); one optimisation step takes ``N × train.accumulate`` consecutive
batches, of which rank r trains on the r-th ``train.accumulate`` (``EpochSteps``, ``World.share``); a prepared
corpus is dealt to the step's parts, and each process reads the chunks of its own. PyTorch's
``DistributedDataParallel`` (``wrap``) averages the gradients over the processes, so N processes take the
steps that one process takes with ``train.accumulate: N`` (the mean of the batches' mean losses). Only rank 0
writes the run directory; the others wait for it where they read what it wrote.

Without ``torchrun`` (no ``WORLD_SIZE`` > 1) the world is one process and nothing here talks to another.
"""

from __future__ import annotations

import datetime
import importlib
import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from seqlab.data.batching import BatchStream
from seqlab.model import device_of


@dataclass(frozen=True)
class World:
    """This process's rank among ``size`` training processes."""

    rank: int = 0
    size: int = 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that writes the run directory and the log."""
        return self.rank == 0

    @classmethod
    def from_env(cls) -> World:
        """The world ``torchrun`` started (``WORLD_SIZE`` > 1): joins its process group (gloo; where PyTorch sees
        GPUs, NCCL for CUDA tensors beside it, each process on the GPU of its ``LOCAL_RANK``); else one process."""
        size = int(os.environ.get("WORLD_SIZE", "1"))
        if size == 1:
            return cls()
        backend = "gloo"
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
            backend = "cpu:gloo,cuda:nccl"
        if not dist.is_initialized():
            # DistributedDataParallel imports torch._dynamo, whose import after the group exists keeps references
            # to it: destroy_process_group would then leave gloo's threads running into the interpreter's exit,
            # where they can abort the process (SIGABRT, "terminate called without an active exception")
            importlib.import_module("torch._dynamo")

            # torchrun ends the job when a process dies; the timeout bounds a wait on rank 0's validation
            dist.init_process_group(backend, timeout=datetime.timedelta(minutes=30))
        return cls(dist.get_rank(), dist.get_world_size())

    def close(self) -> None:
        """Leave the process group once training has ended well, after every process has got there (a process
        that tears gloo down while another still talks to it can abort). After an error a process leaves without
        tearing it down (``seqlab.cli.common.fail``'s ``at_once``)."""
        if self.size > 1 and dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()

    def barrier(self) -> None:
        if self.size > 1:
            dist.barrier()

    def positions(self, accumulate: int) -> range:
        """Where this rank's batches lie in a step of ``size × accumulate``: the rank-th slice."""
        return range(self.rank * accumulate, (self.rank + 1) * accumulate)

    def share(self, group: list[np.ndarray]) -> list[np.ndarray]:
        """This rank's batches of one step's ``group``."""
        mine = self.positions(len(group) // self.size)
        return group[mine.start : mine.stop]

    def sum(self, values: list[float]) -> list[float]:
        """Each value summed over the processes (every process gets the sums)."""
        if self.size == 1:
            return values
        totals = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(totals)
        return totals.tolist()

    def sum_tensors(self, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Tensors summed over the processes (row-sharded state: each process holds zeros in rows it does not
        read, so the sum is the whole state)."""
        if self.size == 1:
            return tensors
        summed = {}
        for name, tensor in sorted(tensors.items()):  # the same order on every process
            summed[name] = tensor.detach().clone()
            dist.all_reduce(summed[name])
        return summed

    def max(self, value: int) -> int:
        """The largest of the processes' ``value`` (every process gets it)."""
        if self.size == 1:
            return value
        box = torch.tensor([value], dtype=torch.int64)
        dist.all_reduce(box, op=dist.ReduceOp.MAX)
        return int(box)

    def from_main(self, value: Any) -> Any:
        """Rank 0's ``value`` on every process (e.g. its validation, which decides the best model for all)."""
        if self.size == 1:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, value: Any) -> list[Any]:
        """Every process's ``value``, in rank order, on every process."""
        if self.size == 1:
            return [value]
        values: list[Any] = [None] * self.size
        dist.all_gather_object(values, value)
        return values

    def wrap(self, model: nn.Module, loss: Callable[[np.ndarray], tuple[torch.Tensor, int]]) -> nn.Module:
        """``loss`` (a family's: batch indices -> summed loss, count) as a module whose forward DDP can run:
        DistributedDataParallel keeps the replicas equal (rank 0's weights at the start) and averages the
        gradients in backward. One process: the plain ``StepLoss``."""
        step = StepLoss(model, loss)
        if self.size == 1:
            return step
        device = device_of(model)
        # every parameter gets a gradient in every step (a model builds no layer it does not use), and no buffer
        # changes in training (positional tables), so none is broadcast again at every forward
        return nn.parallel.DistributedDataParallel(step, device_ids=[device] if device.type == "cuda" else None,
                                                   forward_sync_buffers=False)


class StepLoss(nn.Module):
    """A family's loss as a module: ``forward(indices)`` -> (summed loss, count). Its one submodule is the
    model, so DDP finds the parameters whose gradients it averages; the family calls the same model."""

    def __init__(self, model: nn.Module, loss: Callable[[np.ndarray], tuple[torch.Tensor, int]]) -> None:
        super().__init__()
        self.model = model
        self.loss = loss

    def forward(self, indices: np.ndarray) -> tuple[torch.Tensor, int]:
        return self.loss(indices)


class EpochSteps:
    """An epoch's optimisation steps of ``parts`` batches, this process's share of each (``groups``), made as they
    are reached from a family's streams of batches (``Family.batches``). One stream: a step takes ``parts``
    consecutive batches of it and every process reads it all; the last step is filled up from the epoch's first
    batches (every process takes the same number of steps, as DistributedSampler pads). One stream for each part (a
    prepared corpus dealt to the parts, ``batching.windowed_batches``): a step takes one batch of each, and a
    process reads its own parts' streams only; the epoch has as many steps as the longest stream has batches (the
    processes agree on it), and a shorter stream starts again from its first batch."""

    def __init__(self, streams: list[BatchStream], parts: int, world: World) -> None:
        self.world, self.parts = world, parts
        self.lone = len(streams) == 1
        if self.lone:
            self.read = streams
            self.count = -(-len(streams[0]) // parts)
        else:
            if len(streams) != parts:
                raise ValueError(f"{len(streams)} streams of batches for steps of {parts}: Family.batches returns one "
                                 "stream of batches, or one for each of a step's parts")
            mine = world.positions(parts // world.size)
            self.read = streams[mine.start:mine.stop]
            self.count = world.max(max(map(len, self.read)))

    def __len__(self) -> int:
        return self.count

    def groups(self, start: int = 0) -> Iterator[list[np.ndarray]]:
        """This process's batches of each step, from step ``start`` on."""
        again = [itertools.chain.from_iterable(itertools.repeat(stream)) for stream in self.read]  # started again
        if self.lone:
            steps: Iterator[list[np.ndarray]] = (self.world.share(list(itertools.islice(again[0], self.parts)))
                                                 for _ in itertools.count())
        else:
            steps = map(list, zip(*again))
        return itertools.islice(steps, start, self.count)
