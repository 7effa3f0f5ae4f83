"""Decoding strategies: given a trained model and source ids, produce target ids."""

from seqlab.decoding.greedy import greedy_decode

__all__ = ["greedy_decode"]
