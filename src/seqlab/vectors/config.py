"""``seqlab vectors train``'s configuration: the corpora, how text becomes words, and how the vectors are made."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from seqlab.corpora import TextCorpus
from seqlab.sections import Section


class VectorsTrainConfig(Section):
    """How word vectors are made (seqlab.vectors): by counting (PPMI + SVD) or by word2vec, whose options
    take gensim's defaults."""

    method: Literal["count", "cbow", "skipgram"] = "skipgram"
    dim: int = Field(100, gt=0, description="vector size")
    window: int = Field(5, gt=0, description="count: the window; word2vec: the widest, each position draws 1..window")
    min_count: int = Field(5, gt=0, description="words seen fewer times are dropped")
    negative: int = Field(5, gt=0, description="word2vec: negative words per example")
    sample: float = Field(1e-3, ge=0, description="word2vec: subsampling threshold t of frequent words; 0 = off")
    epochs: int = Field(5, gt=0, description="word2vec: passes over the corpus")
    alpha: float = Field(0.025, gt=0, description="word2vec: the first learning rate, decayed linearly to min_alpha")
    min_alpha: float = Field(0.0001, ge=0)
    workers: int = Field(1, gt=0, description="word2vec: threads training at once on the same tables; 1 gives the "
                                             "same vectors every time, more are faster and differ from run to run "
                                             "(as word2vec.c's and gensim's)")
    batch_size: int = Field(1024, gt=0, description="the book's recipe: examples per Adam step (word2vec's recipe "
                                                    "steps one example at a time)")
    recipe: Literal["word2vec", "book"] = Field(
        "word2vec", description="word2vec: the word2vec tools' training (SGD from alpha to min_alpha, windows drawn "
                                "within sentences, every context word given the whole gradient of their mean); book: "
                                "the book's CBOW (ch. 4 train.py: the sentences as one stream, every position with "
                                "window words on each side, the mean's gradient split 1/C between the context words, "
                                "Adam at alpha, the book's 0.001, on each batch's mean loss)")
    seed: int = 1

    @model_validator(mode="after")
    def _book_is_cbow(self) -> VectorsTrainConfig:
        if self.recipe == "book" and self.method != "cbow":
            raise ValueError("train.recipe book is the book's CBOW: it needs train.method cbow")
        if self.recipe == "book" and self.workers > 1:
            raise ValueError("train.recipe book trains in PyTorch's threads: train.workers is word2vec's, keep it 1")
        return self


class WordsConfig(Section):
    """How word-vector text becomes words: the ``word`` level's pre-tokenisation (tokenizer.split_words)."""

    lowercase: bool = True
    morphemes: bool = Field(False, description="Korean: cut words at kiwipiepy's morpheme boundaries")


class VectorsDataConfig(Section):
    """The sentences of a word-vector corpus: every line of ``lines`` files, both sides of pair corpora."""

    corpora: list[TextCorpus] = Field(min_length=1)
    skip_bad_lines: bool = Field(False, description="skip malformed lines (counted) instead of failing")
    on_disk: bool = Field(False, description="word2vec: the corpus read once as it streams by, its words counted and "
                                             "written as ids into the run directory, and trained on a window of "
                                             "about 8 million words at a time: memory no longer grows with the "
                                             "corpus (lines files are streamed; pair corpora are read whole first)")


class VectorsConfig(Section):
    """``seqlab vectors train``'s configuration."""

    data: VectorsDataConfig
    words: WordsConfig = WordsConfig()
    train: VectorsTrainConfig = VectorsTrainConfig()

    @model_validator(mode="after")
    def _on_disk_is_word2vecs(self) -> VectorsConfig:
        if self.data.on_disk and (self.train.method == "count" or self.train.recipe == "book"):
            raise ValueError("data.on_disk is word2vec's (train.recipe word2vec): counting and the book's recipe "
                             "read the corpus into memory")
        return self
