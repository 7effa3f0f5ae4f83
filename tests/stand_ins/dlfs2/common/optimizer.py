"""The book's ``Adam()``: lr 0.001, β 0.9/0.999 and ε 1e-7, seqlab.scratch's defaults; and ``SGD(lr)``."""

from seqlab.scratch.optimizers import SGD, Adam

__all__ = ["SGD", "Adam"]
