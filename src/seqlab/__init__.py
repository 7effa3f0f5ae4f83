"""seqlab: sequence-to-sequence learning on the CPU.

    >>> import seqlab
    >>> model = seqlab.load("runs/date")
    >>> model.translate(["september 27, 1994"])
    ['1994-09-27']
"""

from seqlab.translator import Translator, load

__version__ = "0.1.0"
__all__ = ["Translator", "load", "__version__"]
