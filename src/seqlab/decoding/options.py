"""How to decode: the options shared by ``seqlab translate``, ``seqlab eval``, the server and ``Translator.translate``,
declared once here (the command line's options are made from these fields, so this module imports no torch)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from seqlab.specials import PAD

if TYPE_CHECKING:
    import torch

MIN_TEMPERATURE = 0.01  # below it (but above 0, which is greedy) a softmax of log p / T overflows to NaN
MAX_SEED = 2**32 - 1  # every engine's generator takes a 32-bit unsigned seed


RUN_SEARCH = ("beam", "length_penalty")  # the fields a run's config fills where options leave them (or_run_search)


def _run_search_in_schema(schema: dict[str, Any]) -> None:
    """The JSON schema (the server's /openapi.json) says of ``RUN_SEARCH``'s fields what ``--help`` says: left out,
    they are the run's own, so no default of their own."""
    for name in RUN_SEARCH:
        field = schema.get("properties", {}).get(name)
        if field is not None:
            default = field.pop("default", None)
            field["description"] = f"{field.get('description', '')}; left out: the run's eval.{name} ({default} " \
                                   "unless its config says)"


class DecodeOptions(BaseModel):
    """Greedy by default; ``beam > 1`` searches, ``sample`` draws. A run's predictor fills what options leave
    open with the run's own search (``or_run_search``), so ``DecodeOptions()`` decodes as the run's config says
    and ``DecodeOptions(beam=1)`` greedily."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, json_schema_extra=_run_search_in_schema)

    beam: int = Field(1, ge=1, description="beam size; 1 is greedy")
    nbest: int = Field(1, ge=1, description="hypotheses returned per input (at most the beam size)")
    length_penalty: float = Field(0.0, ge=0.0, description="GNMT's α: rank by log P / ((5 + len) / 6)^α")
    normalize: bool = Field(False, description="rank by the average log-probability per word instead")
    sample: bool = Field(False, description="draw words from the softmax instead of searching")
    temperature: float = Field(1.0, ge=0.0,
                               description=f"sampling temperature; 0 is greedy, else at least {MIN_TEMPERATURE}")
    top_k: int = Field(0, ge=0, description="sample among the k most probable words (0: all)")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="sample among the most probable words holding p of the mass")
    num_samples: int = Field(1, ge=1, description="samples per input")
    seed: int = Field(0, ge=0, le=MAX_SEED, description="seed of the sampling generator")
    max_length: int | None = Field(None, gt=0, description="most output words [default: eval.max_output_length]")
    length_ratio: float | None = Field(
        None, gt=0.0, description="limit each output to length_ratio × its source length + length_extra words"
    )
    length_extra: int = Field(10, ge=0, description="see length_ratio")
    min_length: int = Field(0, ge=0, description="<eos> cannot end an output of fewer words")
    no_repeat_ngram_size: int = Field(0, ge=0, description="no n-gram of this many words twice in an output (0: off)")
    repetition_penalty: float = Field(
        1.0, gt=0.0, description="CTRL's penalty on every word already in the output: its logit divided by it where "
                                 "positive, multiplied where negative (1: off; > 1 penalises)")

    @model_validator(mode="after")
    def _consistent(self) -> DecodeOptions:
        if self.sample and self.beam > 1:
            raise ValueError("choose beam search (beam > 1) or sampling, not both")
        if self.nbest > self.beam and ("beam" in self.model_fields_set or self.sample):  # else the run's beam comes
            raise ValueError(f"nbest ({self.nbest}) cannot exceed the beam size ({self.beam})")
        if self.num_samples > 1 and not self.sample:
            raise ValueError("num_samples needs sample=True")
        if self.normalize and self.length_penalty:
            raise ValueError("choose length_penalty or normalize, not both")
        if 0.0 < self.temperature < MIN_TEMPERATURE:
            raise ValueError(f"temperature {self.temperature:g}: 0 (greedy) or at least {MIN_TEMPERATURE}")
        return self

    def or_run_search(self, beam: int, length_penalty: float) -> DecodeOptions:
        """These options, with the run's own search (``eval.beam``, ``eval.length_penalty``: the ones chosen on
        valid) where they leave it open: its beam where they neither set a beam nor sample, its length penalty
        where the search that results has beams and they neither set a length penalty nor normalise. Options
        that set both, or any made here, come back as they are. ``nbest`` without a beam is checked against the
        run's: a ValueError on one line where it is the larger."""
        given = self.model_fields_set
        update: dict[str, int | float] = {}
        if "beam" not in given and not self.sample:
            update["beam"] = beam
        if "length_penalty" not in given and not self.normalize and update.get("beam", self.beam) > 1:
            update["length_penalty"] = length_penalty
        if not update:
            return self
        if self.nbest > update.get("beam", self.beam):
            raise ValueError(f"nbest ({self.nbest}) cannot exceed the beam size ({update['beam']}), the run's "
                             f"(eval.beam): ask for a beam of at least {self.nbest}")
        return DecodeOptions(**self.model_dump(exclude_unset=True), **update)  # checked again (normalize)

    @property
    def rows_per_input(self) -> int:
        """The rows a search decodes side by side for each input: its beams, or its samples."""
        return self.num_samples if self.sample else self.beam

    def constrained(self) -> bool:
        """Whether any of min_length, no_repeat_ngram_size, repetition_penalty changes the words' scores."""
        return bool(self.min_length or self.no_repeat_ngram_size or self.repetition_penalty != 1.0)

    def limit(self, source_length: int, default_max: int) -> int:
        """The most output words for a source of ``source_length`` tokens (<eos> included, padding not)."""
        cap = self.max_length or default_max
        if self.length_ratio is None:
            return cap
        return max(1, math.ceil(min(cap, self.length_ratio * source_length + self.length_extra)))

    def limits(self, src: torch.Tensor, default_max: int) -> torch.Tensor:
        """The most output words for each source (batch, src_len) -> (batch,)."""
        import torch

        lengths = (src != PAD).sum(dim=1)
        return torch.tensor([self.limit(n, default_max) for n in lengths.tolist()], dtype=torch.long)


GREEDY = DecodeOptions(beam=1)
"""Greedy, with the beam set, so that a run's ``eval.beam`` does not fill it (``or_run_search``): how training scores
its epochs on valid, and how ``seqlab average`` scores the mean of them, so that the two compare."""
