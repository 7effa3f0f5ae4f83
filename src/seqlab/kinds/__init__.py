"""The built-in kinds of model, one module each; importing this package registers them (``seqlab.registry``),
in the order ``seqlab --help`` lists their commands."""

# isort: off
from seqlab.kinds import seq2seq, lm, classifier, bert, span, vectors  # noqa: I001 (the order of registration)

__all__ = ["bert", "classifier", "lm", "seq2seq", "span", "vectors"]
