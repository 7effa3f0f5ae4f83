"""seqlab: sequence-to-sequence learning on the CPU.

    >>> import seqlab
    >>> model = seqlab.load("runs/date")
    >>> model.translate(["september 27, 1994"])
    ['1994-09-27']
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from seqlab.predictors.translator import Translator, load

__version__ = "0.1.0"
__all__ = ["Translator", "load", "__version__"]


def __getattr__(name: str) -> Any:
    # torch is imported only when a model is needed, so `import seqlab.tokenizer` stays quick.
    if name in ("Translator", "load"):
        from seqlab.predictors import translator

        return getattr(translator, name)
    raise AttributeError(f"module 'seqlab' has no attribute {name!r}")
