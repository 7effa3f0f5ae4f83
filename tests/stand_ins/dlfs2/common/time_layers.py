"""The state of the book's ``TimeLSTM`` (``h``, ``c``, ``reset_state``), which the language-model race saves and puts
back around its evaluation; here without weights: the stand-in models of ch06 score every word alike."""

from __future__ import annotations

import numpy as np


class TimeLSTM:
    def __init__(self, hidden_size: int) -> None:
        self.hidden_size = hidden_size
        self.h: np.ndarray | None = None
        self.c: np.ndarray | None = None

    def forward(self, xs: np.ndarray) -> None:
        """The state after the ids ``xs`` (N, T): zeros (N, H)."""
        self.h = self.c = np.zeros((len(xs), self.hidden_size), dtype=np.float32)

    def reset_state(self) -> None:
        self.h = self.c = None
