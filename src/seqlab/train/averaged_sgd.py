"""NT-AvSGD, the non-monotonically triggered averaged SGD of AWD-LSTM (Merity, Keskar & Socher 2018, §3).

Averaged SGD answers with the mean of the iterates since step T instead of the last one,

    w̄ = 1 / (k − T + 1) · Σ_{i=T..k} w_i,

kept as a running mean (w̄ ← w̄ + (w_k − w̄) / (k − T + 1)) beside the weights SGD goes on training. T is not
chosen in advance: averaging starts after the first epoch whose valid loss is worse than the best of the epochs
more than ``interval`` before it (``train.nt_asgd``, AWD-LSTM's ``nonmono``: 5), so that SGD's rate still does the
work while valid improves. From then on validation and the saved model read the mean (``applied``), and the
checkpoint carries the mean, its count and the valid losses, so that a resumed run averages on exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

PREFIX = "nt_average."  # carried tensors: the mean of each trained parameter, the count, the valid losses


def _trained(model: nn.Module) -> list[torch.Tensor]:
    return [p for p in model.parameters() if p.requires_grad]


class NTAverage:
    """The running mean of a model's trained weights from the step NT-AvSGD's trigger fires (``interval`` 0: never)."""

    def __init__(self, interval: int) -> None:
        self.interval = interval
        self.losses: list[float] = []  # every epoch's valid loss so far
        self.mean: list[torch.Tensor] | None = None  # one per trained parameter, once averaging has started
        self.count = 0  # the weights averaged so far

    def observe(self, model: nn.Module, valid_loss: float) -> bool:
        """After an epoch's validation: starts averaging from the present weights where ``valid_loss`` is worse
        than the best of the losses more than ``interval`` epochs before (AWD-LSTM's test); True when it started."""
        earlier, n = self.losses, self.interval
        self.losses = earlier + [valid_loss]
        if self.mean is not None or n == 0 or len(earlier) <= n or valid_loss <= min(earlier[:-n]):
            return False
        self.mean = [p.detach().clone() for p in _trained(model)]
        self.count = 1
        return True

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """After an optimizer step: the mean takes in the new weights."""
        if self.mean is None:
            return
        self.count += 1
        torch._foreach_lerp_(self.mean, [p.detach() for p in _trained(model)], 1.0 / self.count)

    @contextmanager
    def applied(self, model: nn.Module) -> Iterator[None]:
        """Inside, the model holds the mean (before averaging starts: its own weights); after, the trained ones."""
        if self.mean is None:
            yield
            return
        params = _trained(model)
        trained = [p.detach().clone() for p in params]
        with torch.no_grad():
            torch._foreach_copy_(params, self.mean)
        try:
            yield
        finally:
            with torch.no_grad():
                torch._foreach_copy_(params, trained)

    def carried(self) -> dict[str, torch.Tensor]:
        """What a checkpoint keeps (nothing where ``interval`` is 0): the valid losses, and once averaging has
        started its count and mean."""
        if not self.interval:
            return {}
        carried = {f"{PREFIX}losses": torch.tensor(self.losses, dtype=torch.float64)}
        if self.mean is not None:
            carried[f"{PREFIX}count"] = torch.tensor(self.count)
            carried.update({f"{PREFIX}{i}": m for i, m in enumerate(self.mean)})
        return carried

    def restore(self, carried: dict[str, torch.Tensor]) -> None:
        """Take back what ``carried`` gave (a checkpoint without it: nothing observed yet)."""
        losses = carried.get(f"{PREFIX}losses")
        self.losses = [] if losses is None else losses.tolist()
        if f"{PREFIX}count" in carried:
            self.count = int(carried[f"{PREFIX}count"])
            means = sorted((k for k in carried if k[len(PREFIX):].isdigit()), key=lambda k: int(k[len(PREFIX):]))
            self.mean = [carried[k].clone() for k in means]
