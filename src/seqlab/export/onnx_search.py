"""An ONNX export decoded by ONNX Runtime's own search, without PyTorch: ``OnnxSearch(EXPORT).translate(texts)``.

``seqlab export RUN --to onnx`` also writes ``search.onnx``: ONNX Runtime's ``BeamSearch`` operator (domain
``com.microsoft``, in the encoder-decoder form of its T5 models) over two subgraphs of the model, the encoder with
the first decoder step (``Transformer.start``, then ``step`` of <sos>) and one decoder step (``Transformer.step``).
The whole search (the beams, their caches, the stopping rule) runs in ONNX Runtime's C++ loop, with no Python
between two steps. ``search.json`` holds what seqlab's translator reads from the run's config (how a source is
cut and ended, the length limit) and names the run's tokenizers, which lie beside it; so this module decodes
with onnxruntime, numpy and Hugging Face ``tokenizers`` alone and imports no PyTorch (tested): an export runs
where PyTorch is not installed.

It decodes as seqlab does where their rules agree (tested): greedy (one beam) and beam search ranked by the
log-probability (no length penalty), with ``nbest`` and the length limits; scores are log-probabilities, with
<pad> and <sos> never chosen. The rest is left to seqlab's own search over the step graphs (``seqlab.export.onnx``,
which needs PyTorch): length penalties (ONNX Runtime divides by len^α and stops by a test that is exact only for
α = 0), sampling, attention weights, and the constraints, which ONNX Runtime applies to log-probabilities where
seqlab changes the logits (a repetition penalty scales the used words' log-probabilities; a minimum length does
not renormalise the others), its no-repeat n-gram size fixed when the graph is made.

ONNX Runtime's stopping test reads the scores at the wrong offset for every sentence of a batch but the first
(``BeamSearchScorer::Process``, onnxruntime 1.32), so a batch of different sentences runs to its length limit:
this search decodes one sentence per call, which is what it is for: one sentence at a time, as the page, chat and
the server decode.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from seqlab.data.inputs import around_blanks, check_texts, source_ids, truncate
from seqlab.decoding.options import DecodeOptions
from seqlab.specials import EOS, PAD, SOS
from seqlab.tokenizer import Tokenizer

SEARCH, MANIFEST = "search.onnx", "search.json"
Output = tuple[list[int], float]  # the output's tokens (no <sos>, <eos>) and its log-probability


def onnxruntime() -> Any:
    """The onnxruntime module, or one line saying how to install it."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise ImportError("ONNX Runtime is not installed: pip install onnxruntime (or seqlab's [export] extra)") from None
    return ort


def unserved(options: DecodeOptions, need_weights: bool = False) -> str | None:
    """Why ONNX Runtime's search cannot decode with ``options`` as seqlab does, or None where it can."""
    if options.sample:
        return "sampling"
    if options.length_penalty or options.normalize:
        return "a length penalty"
    if options.constrained():
        return "min_length, no_repeat_ngram_size or a repetition penalty"
    if need_weights:
        return "attention weights"
    return None


class OnnxSearch:
    """``search.onnx`` of an ONNX export in an ONNX Runtime session, with the run's tokenizers and limits."""

    def __init__(self, export_dir: str | Path, threads: int | None = None) -> None:
        ort = onnxruntime()
        export_dir = Path(export_dir)
        path = export_dir / MANIFEST
        if not path.exists():
            raise FileNotFoundError(f"{export_dir}: no {SEARCH} and {MANIFEST} (an ONNX export of an earlier seqlab, "
                                    "or none: seqlab export RUN --to onnx)")
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
            self.max_source_tokens: int = manifest["max_source_tokens"]
            self.source_eos: bool = manifest["source_eos"]
            self.source_width: int | None = manifest["source_width"]
            self.fill: int = manifest["fill"]
            self.target_width: int | None = manifest["target_width"]  # the book's answers: that many words, no <eos>
            self.max_output_length: int = manifest["max_output_length"]
            tokenizers = [export_dir / manifest[side] for side in ("source_tokenizer", "target_tokenizer")]
        except (ValueError, KeyError, TypeError) as exc:  # not UTF-8, not JSON, a key missing
            raise ValueError(f"{path}: not a seqlab search manifest (damaged or truncated: {exc!r}); "
                             "export the run again") from None
        self.source, self.target = (Tokenizer.from_json(p.read_text(encoding="utf-8")) for p in tokenizers)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or _cores()
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(export_dir / SEARCH), options, providers=["CPUExecutionProvider"])
        vocab = next(i for i in self.session.get_inputs() if i.name == "vocab_mask").shape[0]
        self.vocab_mask = np.ones(vocab, dtype=np.int32)  # the words a step may choose: never <pad> or <sos>
        self.vocab_mask[[PAD, SOS]] = 0
        if self.target_width is not None:
            self.vocab_mask[EOS] = 0

    def translate(self, texts: Sequence[str], options: DecodeOptions | None = None) -> list[str]:
        """The best output for every input text (an empty or whitespace-only text: an empty output); greedy unless
        ``options`` say otherwise: the run's own search (``eval.beam``, ``eval.length_penalty``) is not assumed, for
        ONNX Runtime's search has no GNMT length penalty."""
        options = options or DecodeOptions()

        def best(kept: list[str]) -> list[str]:
            return self.target.decode([outputs[0][0] for outputs in self.search_ids(self.encode_sources(kept), options)])

        check_texts(texts, "translate")
        return around_blanks(texts, best, "")

    def encode_sources(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids cut to what the model reads, then <eos> (or the book's fixed width), as seqlab's translator."""
        kept = truncate(self.source.encode(texts), self.max_source_tokens, "input sources")
        return [source_ids(ids, self.source_eos, self.source_width, self.fill) for ids in kept]

    def search_ids(self, src: Sequence[Sequence[int]], options: DecodeOptions) -> list[list[Output]]:
        """Each encoded source's ``nbest`` outputs, best first; one sentence per call of the graph."""
        reason = unserved(options)
        if reason is not None:
            raise ValueError(f"ONNX Runtime's search does not decode with {reason}: use seqlab's search "
                             "(seqlab translate EXPORT --engine onnx, with PyTorch installed)")
        return [self._search(ids, options) for ids in src]

    def _search(self, ids: Sequence[int], options: DecodeOptions) -> list[Output]:
        """One source (its encoder ids) -> its nbest outputs. ONNX Runtime counts <sos> in a sequence's length,
        so its length limit is one more than seqlab's, which counts words."""
        length = sum(i != PAD for i in ids)
        limit = self.target_width or options.limit(length, self.max_output_length)
        src = np.asarray([ids], dtype=np.int32)  # (1, src_len)
        feeds = {"input_ids": src, "attention_mask": (src != PAD).astype(np.int32),
                 "max_length": np.array([limit + 1], np.int32), "min_length": np.array([1], np.int32),
                 "num_beams": np.array([options.beam], np.int32),
                 "num_return_sequences": np.array([options.nbest], np.int32),
                 "length_penalty": np.array([0.0], np.float32),
                 "repetition_penalty": np.array([1.0], np.float32),
                 "vocab_mask": self.vocab_mask}
        sequences, scores = self.session.run(None, feeds)  # (1, nbest, limit + 1) from <sos>, PAD after; (1, nbest)
        return [(_words(row[1:]), float(score)) for row, score in zip(sequences[0], scores[0])]


def _cores() -> int:
    """The cores this process may run on (all of the machine's where the system cannot say)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _words(row: np.ndarray) -> list[int]:
    """A sequence after <sos> -> its words: up to <eos>, or to the padding after the length limit."""
    words = row.tolist()
    for end in (EOS, PAD):
        if end in words:
            return words[: words.index(end)]
    return words
