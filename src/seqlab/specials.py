"""The special tokens: the same four ids at the start of every vocabulary.

``<pad>`` fills batches to one length and is masked out of attention and the loss (seed 000's
``create_padding_mask``: id 0); ``<sos>`` starts every decoder input, ``<eos>`` ends every
sequence, ``<unk>`` stands for what the vocabulary does not hold. Tokenizers put them at these
ids; models, masks, batching, the loss and decoding take the ids from here.

A masked language model's vocabulary (BERT, ``seqlab pretrain``) has a fifth, ``<mask>`` at id 4. BERT's
names map onto these: ``[PAD]`` = ``<pad>``, ``[CLS]`` = ``<sos>`` (the start of every input), ``[SEP]`` =
``<eos>`` (the end of every sentence), ``[UNK]`` = ``<unk>``, ``[MASK]`` = ``<mask>``.
"""

from __future__ import annotations

PAD, SOS, EOS, UNK = 0, 1, 2, 3
SPECIALS = ("<pad>", "<sos>", "<eos>", "<unk>")  # the token strings of ids 0..3
MASK = 4
MASK_TOKEN = "<mask>"  # id 4 of a masked language model's vocabulary
BERT_NAMES = {"[PAD]": PAD, "[CLS]": SOS, "[SEP]": EOS, "[UNK]": UNK, "[MASK]": MASK}
