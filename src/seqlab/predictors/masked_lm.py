"""A pretrained BERT and its tokenizer (seed 002 §10.1): masked tokens filled in, and the masked-LM scores.

``fill_mask(text)`` reads ``[MASK]`` in the text as the model's ``<mask>`` token (the rest is tokenised as
usual), and gives for every mask the most probable tokens with their probabilities, and the text with the best
of each put in. ``scores(examples)`` is the masked-LM loss (nats per predicted token), its perplexity and the
accuracy of the predicted tokens, and with next-sentence prediction its accuracy, over masks drawn from a fixed
seed, so that two evaluations of one model agree. ``seqlab.predictors.masked_lm.load(RUN_DIR)`` rebuilds it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
import torch.nn.functional as F

from seqlab.config import Config
from seqlab.data.batching import pad
from seqlab.data.inputs import chunks
from seqlab.data.masking import IGNORE, mask_tokens, pair, single
from seqlab.loss import token_nll_sum
from seqlab.model import evaluating
from seqlab.model.bert import Bert, BertConfig
from seqlab.predictors.base import TextPredictor
from seqlab.runtime import Runtime
from seqlab.specials import MASK
from seqlab.tokenizer import Tokenizer

MASK_MARK = "[MASK]"  # how a mask is typed in fill_mask's text


@dataclass
class Examples:
    """Encoded pretraining inputs: token ids and segment ids per input; with next-sentence prediction, whether
    B follows A (0 IsNext) or was drawn at random (1 NotNext)."""

    ids: Sequence[Sequence[int]]  # lists, or a prepared directory's rows (``prepared.Rows``)
    segments: Sequence[Sequence[int]] | None  # None: each input one sentence, all segment A
    next_labels: list[int] | None = None



@dataclass
class Filled:
    """One text of ``fill_mask``: the best tokens per mask, and the text with the best of each put in."""

    text: str
    candidates: list[list[tuple[str, float]]]  # per [MASK]: (token, probability), most probable first


class MaskedLanguageModel(TextPredictor):
    model: Bert
    kind = "bert"

    def __init__(self, model: Bert, tokenizer: Tokenizer, config: Config, runtime: Runtime | None = None) -> None:
        super().__init__(model, tokenizer, config, runtime)
        assert isinstance(config.model, BertConfig)
        self.bert: BertConfig = config.model

    @classmethod
    def build(cls, config: Config, vocab_size: int) -> Bert:
        """The masked language model of a ``seqlab pretrain`` run (``model.type: bert``)."""
        assert isinstance(config.model, BertConfig)
        return Bert(config.model, vocab_size)

    # --- inputs -------------------------------------------------------------------------------------------

    def sentences(self, texts: Sequence[str]) -> Examples:
        """One input per text: ``<sos> text <eos>``, all segment A."""
        return Examples(self.sentence_ids(texts), None)

    def sentence_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """``<sos>`` + each text's ids + ``<eos>``, cut to ``data.max_source_length``."""
        return [single(row, self.config.data.max_source_length) for row in self.tokenizer.encode(list(texts))]

    def pairs(self, pairs: Sequence[tuple[str, str]], rng: np.random.Generator) -> Examples:
        """Next-sentence inputs ``<sos> A <eos> B <eos>``: half of the Bs replaced by the B of another pair drawn
        by ``rng`` (label 1, NotNext), the rest kept (label 0, IsNext)."""
        first = self.tokenizer.encode([a for a, _ in pairs])
        second = self.tokenizer.encode([b for _, b in pairs])
        labels = (rng.random(len(pairs)) < 0.5).astype(int)
        shift = rng.integers(1, max(len(pairs), 2), size=len(pairs))  # another pair's B, never its own
        joined = [pair(a, second[(i + shift[i]) % len(pairs)] if labels[i] else second[i],
                       self.config.data.max_source_length) for i, a in enumerate(first)]
        return Examples([ids for ids, _ in joined], [seg for _, seg in joined], labels.tolist())

    def examples(self, texts: Sequence[str] | Sequence[tuple[str, str]], rng: np.random.Generator) -> Examples:
        """The inputs of a split: its sentences, or with next-sentence prediction its pairs (``rng`` draws the
        NotNext ones)."""
        if self.bert.next_sentence:
            return self.pairs(cast(Sequence[tuple[str, str]], texts), rng)
        return self.sentences(cast(Sequence[str], texts))

    # --- the objective ---------------------------------------------------------------------------------------

    def losses(self, examples: Examples, rows: Sequence[int], rng: np.random.Generator) -> dict[str, Any]:
        """The summed masked-LM loss of ``rows`` with masks drawn by ``rng``, the predicted tokens, how many of them
        the model got right, and with next-sentence prediction its summed loss and right answers."""
        ids = pad([examples.ids[i] for i in rows]).numpy()
        segments = (torch.zeros(ids.shape, dtype=torch.long) if examples.segments is None  # (batch, len)
                    else pad([examples.segments[i] for i in rows])).to(self.device)
        inputs, labels = mask_tokens(ids, rng, self.bert.mask_probability, self.bert.mask_split,
                                     (self.tokenizer.first_ordinary_id, self.tokenizer.vocab_size))
        where = torch.from_numpy(labels != IGNORE).to(self.device)  # (batch, len)
        targets = torch.from_numpy(labels).to(self.device)[where]  # (predicted,)
        with self.autocast():
            hidden = self.model.encode(torch.from_numpy(inputs).to(self.device), segments)  # (batch, len, d)
            logits = self.model.masked_logits(hidden, where)  # (predicted, vocab)
        out = {"mlm_sum": token_nll_sum(logits, targets), "predicted": len(targets),
               "right": int((logits.argmax(-1) == targets).sum())}
        if examples.next_labels is not None:
            with self.autocast():
                nsp = self.model.next_sentence_logits(hidden).float()  # (batch, 2)
            truth = torch.tensor([examples.next_labels[i] for i in rows], device=self.device)
            out |= {"nsp_sum": F.cross_entropy(nsp, truth, reduction="sum"), "nsp_right": int((nsp.argmax(-1) == truth).sum())}
        return out

    @torch.no_grad()
    def scores(self, examples: Examples, seed: int = 0) -> dict[str, Any]:
        """{'loss' (masked-LM nats per predicted token), 'perplexity', 'mlm_accuracy' (%), 'predicted'} and with
        next-sentence prediction 'nsp_accuracy' (%), over masks drawn from ``seed``."""
        rng = np.random.default_rng(seed)
        total = {"mlm_sum": 0.0, "predicted": 0, "right": 0, "nsp_sum": 0.0, "nsp_right": 0}
        with evaluating(self.model):
            for rows in chunks(list(range(len(examples.ids))), self.config.eval.batch_size):
                for key, value in self.losses(examples, rows, rng).items():
                    total[key] += float(value)
        loss = total["mlm_sum"] / max(total["predicted"], 1)
        out = {"loss": loss, "perplexity": math.exp(min(loss, 50.0)),
               "mlm_accuracy": 100 * total["right"] / max(total["predicted"], 1), "predicted": int(total["predicted"])}
        if examples.next_labels is not None:
            out["nsp_accuracy"] = 100 * total["nsp_right"] / max(len(examples.ids), 1)
        return out

    # --- use -------------------------------------------------------------------------------------------------

    def encode_masked(self, text: str) -> list[int]:
        """``<sos> … <eos>`` of a text in which ``[MASK]`` marks the tokens to fill in."""
        parts = self.tokenizer.encode(text.split(MASK_MARK))
        ids = [i for n, part in enumerate(parts) for i in ([MASK] if n else []) + part]
        return single(ids, self.config.data.max_source_length)

    @torch.no_grad()
    def fill_mask(self, texts: Sequence[str], top: int = 5) -> list[Filled]:
        """Every [MASK] of every text filled in: its ``top`` most probable tokens, and the text with the best."""
        if isinstance(texts, str):
            raise TypeError("fill_mask() takes a list of strings, not one string")
        self.model.eval()
        out = []
        for text in texts:
            if MASK_MARK not in text:
                raise ValueError(f"no {MASK_MARK} in {text!r}: mark the tokens to fill in with {MASK_MARK}")
            ids = torch.tensor([self.encode_masked(text)], device=self.device)
            where = ids == MASK
            with self.autocast(tokens=ids.numel()):
                logits = self.model.masked_logits(self.model.encode(ids), where)  # (masks, vocab)
            probabilities = torch.softmax(logits.float(), -1)
            best = probabilities.topk(min(top, probabilities.size(-1)), dim=-1)
            candidates = [[(self.tokenizer.tokens_from_ids([int(i)])[0], float(p)) for p, i in zip(ps, rows)]
                          for ps, rows in zip(best.values, best.indices)]
            filled = ids[0].clone()
            filled[where[0]] = best.indices[:, 0]
            out.append(Filled(self.tokenizer.decode([filled.tolist()])[0], candidates))
        return out


load = MaskedLanguageModel.load
