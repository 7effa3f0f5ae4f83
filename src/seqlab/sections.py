"""The sections of a run's configuration but its data (``seqlab.corpora``) and its model (each beside its model):
how text becomes tokens, how it trains, how it is evaluated; and ``Section``, the base of every section."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Section(BaseModel):
    """Unknown keys are errors; so are NaN and infinity in a float: no setting needs them (``train.stop_at`` and
    ``train.clip_norm`` say "never" and "none" with null)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# --- tokens ------------------------------------------------------------------


class TokenizerConfig(Section):
    """How text becomes token ids. ``char``/``word`` learn a vocabulary; ``bpe``/``wordpiece`` learn subwords."""

    level: Literal["char", "word", "bpe", "wordpiece"] = "char"
    vocab_size: int = Field(8000, gt=4, description="upper bound on ids, the 4 specials included")
    min_frequency: int = Field(1, ge=1, description="char/word: keep symbols seen this often; bpe/wordpiece: merges")
    lowercase: bool = False
    morphemes: bool = Field(
        False, description="Korean: cut words at kiwipiepy's morpheme boundaries first (word/bpe/wordpiece)")
    punctuation: bool = Field(
        True, description="word/bpe/wordpiece: each punctuation mark is a piece of its own; false: cut at spaces "
        "only, for text tokenised already (PTB's <unk>)")
    sample: int | None = Field(
        None, gt=0, description="learn the vocabulary from at most this many training texts, drawn uniformly at "
        "random (seed 0) in one pass over them, as SentencePiece's input_sentence_size: for corpora of millions of "
        "sentences; none: from all of them")

    @model_validator(mode="after")
    def _morphemes_need_words(self) -> TokenizerConfig:
        if self.morphemes and self.level == "char":
            raise ValueError("tokens.morphemes cuts words into morphemes; it does not apply to level 'char'")
        return self


class TokensConfig(Section):
    source: TokenizerConfig = TokenizerConfig()
    target: TokenizerConfig = TokenizerConfig()
    shared: bool = Field(False, description="one tokenizer, trained on both sides (uses `source` settings)")




class TrainConfig(Section):
    epochs: int = Field(10, gt=0)
    max_steps: int | None = Field(
        None, gt=0, description="stop after this many optimisation steps, even inside an epoch, which then ends "
                                "there (validated, logged, checkpointed); the schedule spans the steps taken")
    batch_tokens: int = Field(4096, gt=0, description="token budget per batch (padded source + target)")
    batch_sentences: int | None = Field(
        None, gt=0, description="instead of the token budget: this many sentences per batch, in random order"
    )
    batch_window: int = Field(
        4, gt=0, description="with data.prepared: how many of its chunks (record batches of 100,000 rows, or "
                             "seqlab data prepare --chunk-rows) are batched together, "
                             "in an order fixed by the seed and epoch: the rows in memory at a time, for each part of "
                             "a step a process trains (a corpus in memory is one chunk, batched whole)")
    schedule: Literal["transformer", "constant", "cosine", "linear", "plateau"] = Field(
        "transformer", description="the seed's warm-up; or train.lr fixed, or decayed to 0 along a half cosine, "
        "or BERT's (a linear rise to train.lr over train.warmup steps, then a linear fall to 0 at the last), or "
        "divided by train.plateau_factor after an epoch whose valid score is not the best (the book's RNN LMs)"
    )
    plateau_factor: float = Field(4.0, gt=1, description="schedule plateau: what the rate is divided by")
    optimizer: Literal["adam", "sgd"] = Field(
        "adam", description="Adam (train.adam_betas, train.adam_eps), or plain SGD (the book's LMs: lr 20, clip_norm 0.25)")
    adam_betas: tuple[float, float] = Field(
        (0.9, 0.98), description="Adam's β1, β2: the Transformer paper's; the book's are 0.9, 0.999")
    adam_eps: float = Field(1e-9, ge=0, description="Adam's ε: the Transformer paper's 1e-9; PyTorch's and the book's ~1e-8")
    weight_decay: float = Field(
        0.0, ge=0, description="decoupled weight decay (AdamW): each step takes the rate × this × the weight off "
                               "every weight matrix and embedding, never off a bias or a LayerNorm (BERT's 0.01)")
    engine: Literal["torch", "numpy"] = Field(
        "torch", description="what takes the training steps: PyTorch, or the book's NumPy framework (seqlab.scratch; "
                             "RNN language models and the book's one-layer LSTM seq2seq models)")
    loss_average: Literal["tokens", "all"] = Field(
        "tokens", description="a batch's loss: the mean over its target tokens, or over all its positions, padding "
                              "included (seed 000's masked mean, S93; the book's fixed-length answers)")
    warmup: int = Field(4000, gt=0, description="warm-up steps of the seed's schedule and of schedule linear")
    lr_scale: float = Field(1.0, gt=0, description="factor on d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)")
    lr: float = Field(1e-3, gt=0, description="the (first) learning rate of the constant and cosine schedules")
    label_smoothing: float = Field(0.0, ge=0, lt=1)
    clip_norm: float | None = Field(1.0, gt=0)
    precision: Literal["auto", "bf16", "fp32"] = Field(
        "auto", description="auto/bf16: bf16 autocast (fp32 master weights) where the CPU has native bf16, else fp32; "
                            "on a CUDA GPU bf16, or fp16 with a gradient scaler where it has no bf16"
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="where the model trains and decodes: auto is a CUDA GPU where PyTorch sees one, else the "
                            "CPU (decided on the machine that runs it)")
    best_metric: Literal["exact_match", "bleu", "loss", "accuracy", "macro_f1", "f1"] | None = Field(
        None, description="valid score that picks the best model, ties broken by the lower valid loss; default: "
                          "bleu, loss for language models, macro_f1 for classifiers, f1 for span extraction")
    early_stopping: int = Field(0, ge=0, description="stop after this many epochs without a better valid score; 0 = off")
    stop_at: float | None = Field(
        None, description="stop once the best valid score (train.best_metric) reaches this, e.g. 99.9 for exact "
                          "match; for loss, once it is this low")
    save_every: int = Field(0, ge=0, description="also checkpoint every N steps inside an epoch; 0 = epoch ends only")
    valid_every: int = Field(
        0, ge=0, description="also score the valid split every N steps inside an epoch, kept in the epoch's log "
                             "record (looks) for the learning curve; the best model, the schedule and early "
                             "stopping still go by the epochs' ends; 0 = epoch ends only")
    keep_checkpoints: int = Field(
        0, ge=0, description="keep the weights of the last N epochs (RUN/epochs/) for seqlab average; 0 = none")
    nt_asgd: int = Field(
        0, ge=0, description="NT-AvSGD (AWD-LSTM's nonmono): after the first epoch whose valid loss is worse than the "
                             "best of those more than N epochs before, the weights are averaged over every later step, "
                             "and validation and the saved model use the mean; 0 = off")
    nonfinite: Literal["stop", "skip"] = Field(
        "stop", description="a step whose loss is NaN or infinite: stop training with an error naming it (the last "
                            "checkpoint is kept), or skip its update (no Adam step; the schedule moves on) and count it "
                            "in the epoch's log record (skipped)")
    accumulate: int = Field(
        1, gt=0, description="batches per optimisation step in each process, their gradients summed: one process with "
                             "accumulate N takes the steps of N processes under torchrun")
    threads: int | None = Field(None, gt=0, description="torch threads; default: all cores")
    streams: int = Field(20, gt=0, description="language models: rows reading the token stream in parallel")
    time_size: int = Field(35, gt=0, description="language models: time steps per update (truncated BPTT)")
    carry_state: bool = Field(
        False, description="RNN language models: carry each row's state from an epoch's last batch into the next "
                           "epoch's first, as the book's RnnlmTrainer over several epochs (ch. 5); false: every "
                           "epoch starts from zeros, as its train_better_rnnlm.py (reset_state())")

    @model_validator(mode="after")
    def _betas(self) -> TrainConfig:
        if not all(0 <= b < 1 for b in self.adam_betas):
            raise ValueError(f"train.adam_betas must lie in [0, 1), got {list(self.adam_betas)}")
        return self

    @model_validator(mode="after")
    def _decay_needs_adam(self) -> TrainConfig:
        if self.weight_decay and (self.optimizer != "adam" or self.engine != "torch"):
            raise ValueError("train.weight_decay is decoupled Adam's (AdamW): it needs train.optimizer adam and "
                             "train.engine torch")
        return self

    @model_validator(mode="after")
    def _average_needs_torch(self) -> TrainConfig:
        if self.nt_asgd and self.engine != "torch":
            raise ValueError("train.nt_asgd averages the weights PyTorch's steps make: it needs train.engine torch")
        return self

    @model_validator(mode="after")
    def _skip_needs_torch(self) -> TrainConfig:
        if self.nonfinite == "skip" and self.engine == "numpy":
            raise ValueError("train.nonfinite skip: the NumPy engine updates the weights in the step that computes the "
                             "loss, so it cannot skip one; use train.nonfinite stop")
        return self


class EvalConfig(Section):
    max_output_length: int = Field(128, gt=0, description="decoding stops after this many tokens")
    beam: int = Field(1, ge=1, description="the beam seqlab eval, translate, chat, generate, serve and the Python "
                                           "API search with where they are not given one (1: greedy); validation "
                                           "during training decodes greedily")
    length_penalty: float = Field(0.0, ge=0.0, description="GNMT's α of those searches at a beam above 1, where "
                                                            "they are not given one")
    batch_size: int = Field(256, gt=0, description="sentences per decoding batch")
    valid_limit: int | None = Field(None, gt=0, description="decode only this many valid pairs for exact match / BLEU")
