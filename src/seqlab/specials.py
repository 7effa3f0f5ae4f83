"""The special tokens: the same four ids at the start of every vocabulary.

``<pad>`` fills batches to one length and is masked out of attention and the loss (seed 000's
``create_padding_mask``: id 0); ``<sos>`` starts every decoder input, ``<eos>`` ends every
sequence, ``<unk>`` stands for what the vocabulary does not hold. Tokenizers put them at these
ids; models, masks, batching, the loss and decoding take the ids from here.
"""

from __future__ import annotations

PAD, SOS, EOS, UNK = 0, 1, 2, 3
SPECIALS = ("<pad>", "<sos>", "<eos>", "<unk>")  # the token strings of ids 0..3
