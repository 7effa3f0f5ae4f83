"""The book's models on the scratch layers: TwoLayerNet (ch. 1), SimpleRnnlm / Rnnlm / BetterRnnlm (ch. 5–6),
Seq2seq / PeekySeq2seq (ch. 7), AttentionSeq2seq (ch. 8)."""

from seqlab.scratch.models.attention_seq2seq import AttentionSeq2seq
from seqlab.scratch.models.base import Init, Model
from seqlab.scratch.models.rnnlm import RNNLM, BetterRnnlm, Rnnlm, SimpleRnnlm
from seqlab.scratch.models.seq2seq import PeekySeq2seq, Seq2seq
from seqlab.scratch.models.two_layer_net import TwoLayerNet

__all__ = ["Model", "Init", "TwoLayerNet", "RNNLM", "SimpleRnnlm", "Rnnlm", "BetterRnnlm", "Seq2seq",
           "PeekySeq2seq", "AttentionSeq2seq"]
