"""Where the time goes: torch.profiler over training steps of a config, over decoding with a trained run, or
over one epoch of word2vec.

    SEQLAB_DATA=../shared/data python benchmarks/profile_ops.py train configs/book/date-transformer.yaml [--set k=v]
    python benchmarks/profile_ops.py decode runs/multi30k --data-dir ../shared/data --beam 5 [--sentences 512] \\
        [--one-at-a-time]
    SEQLAB_DATA=../shared/data python benchmarks/profile_ops.py vectors configs/vectors/multi30k.yaml \\
        [--set train.method=cbow]

``train``: the config's model on its real batches (as ``throughput.py`` builds them), fused Adam,
clipping; ``--steps`` steps, then the same steps again profiled (their shapes warm, as in a run), in
``--precision`` (fp32, or bf16 autocast), with the time
of each phase of a step (forward and loss, backward, optimizer) and what falls between them.
``decode``: the run's test split, sorted and
batched as ``seqlab eval`` does. ``vectors``: the first epoch of a word2vec config on its corpus
(words, vocabulary and ids made before the profile starts), run once unprofiled for its time. Prints the
time per step (or in all) and the ops by self CPU time. The write-up of what these showed is in docs/benchmarks.md ("Speed").
"""

from __future__ import annotations

import argparse
import time

import torch
from throughput import PHASES, make_batches, training_step
from torch.profiler import profile

from seqlab.config import load_config
from seqlab.data import load_splits, resolve_data_dir
from seqlab.decoding import DecodeOptions
from seqlab.evaluate import EncodedSplit
from seqlab.model import build_model
from seqlab.predictors.translator import load


def profile_training(config: str, overrides: list[str], steps: int, precision: str) -> profile:
    """The profile of ``steps`` training steps of the config's model on its batches, after the same steps unprofiled, in
    ``precision`` (fp32, or bf16 autocast); first the steps' phases (``throughput.PHASES``), each's share of the
    time."""
    cfg = load_config(config, overrides)
    batches, src_vocab, trg_vocab = make_batches(cfg, steps)
    torch.manual_seed(0)
    step = training_step(build_model(cfg.model, src_vocab, trg_vocab).train(), precision == "bf16")
    for batch in batches:  # warm-up: the shapes of the profiled steps
        step(batch)
    with profile() as prof:
        start = time.perf_counter()
        for batch in batches:
            step(batch)
        seconds = time.perf_counter() - start  # the steps, not the profiler's work after them
    tokens = sum(b.num_target_tokens for b in batches)
    print(f"{precision}: {seconds / steps * 1000:.0f} ms per step (profiled), {tokens / seconds:,.0f} target tokens/s")
    phases = {e.key: e.cpu_time_total / 1e6 for e in prof.key_averages() if e.key in PHASES}
    print("phases: " + ", ".join(f"{name} {phases.get(name, 0.0) / steps * 1000:.1f} ms "
                                 f"({phases.get(name, 0.0) / seconds:.0%})" for name in PHASES)
          + f", between them {(seconds - sum(phases.values())) / steps * 1000:.1f} ms")
    return prof


def profile_decoding(run_dir: str, data_dir: str | None, beam: int, sentences: int, one_at_a_time: bool) -> profile:
    """The profile of decoding the run's first ``sentences`` test sources, after a warm-up batch: in batches as
    ``seqlab eval`` makes them, or ``one_at_a_time`` (as the page and chat decode)."""
    translator = load(run_dir)
    pairs = load_splits(translator.config.data, resolve_data_dir(data_dir))["test"][:sentences]
    src = EncodedSplit.build(translator, pairs, "test").src
    options = DecodeOptions(beam=beam)
    translator.search_ids(src[: translator.config.eval.batch_size], options)  # warm-up
    start = time.perf_counter()
    batches = [[ids] for ids in src] if one_at_a_time else [src]
    with profile() as prof:
        for batch in batches:
            translator.search_ids(batch, options)
    print(f"{len(src)} sentences in {time.perf_counter() - start:.2f} s (profiled)")
    return prof


def profile_vectors(config: str, overrides: list[str]) -> profile:
    """The profile of one word2vec epoch of the config, after the same epoch timed unprofiled."""
    from seqlab.vectors.config import VectorsConfig
    from seqlab.vectors.pairs import Vocabulary
    from seqlab.vectors.run import read_words
    from seqlab.vectors.train import train_word2vec

    cfg = load_config(config, [*overrides, "train.epochs=1"], VectorsConfig)
    words = read_words(cfg)
    vocabulary = Vocabulary.build(words, cfg.train.min_count)
    ids = vocabulary.encode(words)
    start = time.perf_counter()
    train_word2vec(ids, vocabulary.counts, cfg.train, progress=False)
    seconds = time.perf_counter() - start
    print(f"{cfg.train.method}: one epoch of {sum(map(len, ids)):,} words in {seconds:.2f} s (unprofiled), "
          f"{torch.get_num_threads()} threads")
    with profile() as prof:
        train_word2vec(ids, vocabulary.counts, cfg.train, progress=False)
    return prof


def main(argv: list[str] | None = None) -> None:
    """Profile what the subcommand names and print its ops by self CPU time."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    train = sub.add_parser("train")
    train.add_argument("config")
    train.add_argument("--set", dest="overrides", action="append", default=[])
    train.add_argument("--steps", type=int, default=6)
    train.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="bf16: under bf16 autocast")
    decode = sub.add_parser("decode")
    decode.add_argument("run_dir")
    decode.add_argument("--data-dir")
    decode.add_argument("--beam", type=int, default=1)
    decode.add_argument("--sentences", type=int, default=512)
    decode.add_argument("--one-at-a-time", action="store_true", help="each sentence on its own, as the page decodes")
    vectors = sub.add_parser("vectors")
    vectors.add_argument("config")
    vectors.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--rows", type=int, default=20, help="ops to list")
    args = parser.parse_args(argv)

    if args.what == "train":
        prof = profile_training(args.config, args.overrides, args.steps, args.precision)
    elif args.what == "vectors":
        prof = profile_vectors(args.config, args.overrides)
    else:
        prof = profile_decoding(args.run_dir, args.data_dir, args.beam, args.sentences, args.one_at_a_time)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
