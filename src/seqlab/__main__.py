"""``python -m seqlab``: the ``seqlab`` command, as ``torchrun -m seqlab train CONFIG`` starts it."""

from seqlab.cli import app

app(prog_name="seqlab")
