"""JoeyNMT decodes an exported seqlab Transformer (run in the peers' venv by benchmarks/peer_decoding.py).

    python joeynmt_decode.py EXPORT_DIR --beams 1 5 --max-length 100 --batch-size 256

Writes a JoeyNMT model directory (vocabularies, config, ``best.ckpt``) holding the export's weights,
loads it with JoeyNMT's own ``prepare`` (as ``python -m joeynmt test`` does) and times JoeyNMT's
``predict`` over every source, once per beam size, after a warm-up on the first batch. Tokens are
the ids' names at JoeyNMT's word level, so no tokenizer stands between the engines. Prints one JSON
line per run (see export.py), outputs in the export's order.

Three adaptations, all outside the timed work:

* JoeyNMT batches test sentences in file order, where seqlab and CTranslate2 sort them by length
  first; it is given the sources sorted by length (a sort of microseconds), and its outputs are put
  back in the export's order, so every engine decodes batches of similar length.
* JoeyNMT numbers its specials ``<unk> <pad> <s> </s>``; embedding and output rows are permuted
  to match.
* JoeyNMT's output layer has no bias and seqlab's has one, so the output layer of the model
  JoeyNMT builds is replaced by the same ``nn.Linear`` with a bias (one addition per step).
"""

from __future__ import annotations

import argparse
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import joeynmt
import joeynmt.prediction as jp
import numpy as np
import torch
from export import (
    EOS,
    PAD,
    SOS,
    UNK,
    load_export,
    repeated,
    result,
    token,
    token_id,
    worker_arguments,
)
from joeynmt.config import parse_global_args
from joeynmt.transformer_layers import PositionalEncoding

JOEY_SPECIALS = [UNK, PAD, SOS, EOS]  # the seqlab ids of JoeyNMT's ids 0..3


def joey_state(sizes: dict[str, Any], w: dict[str, np.ndarray], joey_pe: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """seqlab's state dict under JoeyNMT's names, vocabulary rows in JoeyNMT's order."""
    src_order = JOEY_SPECIALS + list(range(4, sizes["source_vocab"]))
    trg_order = JOEY_SPECIALS + list(range(4, sizes["target_vocab"]))
    state = {
        "src_embed.lut.weight": w["encoder.embed.embedding.weight"][src_order],
        "trg_embed.lut.weight": w["decoder.embed.embedding.weight"][trg_order],
        "decoder.output_layer.weight": w["generator.weight"][trg_order],
        "decoder.output_layer.bias": w["generator.bias"][trg_order],
    }

    def copy(joey: str, seqlab: str) -> None:
        state[f"{joey}.weight"], state[f"{joey}.bias"] = w[f"{seqlab}.weight"], w[f"{seqlab}.bias"]

    def attention(joey: str, seqlab: str) -> None:
        for j, s in (("q_layer", "w_q"), ("k_layer", "w_k"), ("v_layer", "w_v"), ("output_layer", "w_o")):
            copy(f"{joey}.{j}", f"{seqlab}.{s}")

    def ffn(joey: str, seqlab: str) -> None:
        copy(f"{joey}.feed_forward.layer_norm", f"{seqlab}.ffn_block.norm")
        copy(f"{joey}.feed_forward.pwff_layer.0", f"{seqlab}.ffn.w_1")
        copy(f"{joey}.feed_forward.pwff_layer.3", f"{seqlab}.ffn.w_2")

    for i in range(sizes["num_layers"]):
        j, s = f"encoder.layers.{i}", f"encoder.layers.{i}"
        attention(f"{j}.src_src_att", f"{s}.self_attn")
        copy(f"{j}.layer_norm", f"{s}.attn_block.norm")
        ffn(j, s)
        j, s = f"decoder.layers.{i}", f"decoder.layers.{i}"
        attention(f"{j}.trg_trg_att", f"{s}.self_attn")
        attention(f"{j}.src_trg_att", f"{s}.cross_attn")
        copy(f"{j}.x_layer_norm", f"{s}.self_block.norm")
        copy(f"{j}.dec_layer_norm", f"{s}.cross_block.norm")
        ffn(j, s)
    if sizes["norm"] == "pre":
        copy("encoder.layer_norm", "encoder.final_norm")
        copy("decoder.layer_norm", "decoder.final_norm")
    tensors = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()}
    tensors.update(joey_pe)  # JoeyNMT's own sinusoidal tables (the same formula; checked in main)
    return tensors


def joey_config(sizes: dict[str, Any], model_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    def side(lang: str) -> dict[str, Any]:
        return {"lang": lang, "level": "word", "lowercase": False, "max_length": 100_000,
                "voc_file": str(model_dir / f"{lang}_vocab.txt")}

    stack = {"type": "transformer", "num_layers": sizes["num_layers"], "num_heads": sizes["num_heads"],
             "embeddings": {"embedding_dim": sizes["d_model"], "scale": True, "dropout": 0.0},
             "hidden_size": sizes["d_model"], "ff_size": sizes["d_ff"], "dropout": 0.0, "layer_norm": sizes["norm"]}
    return {
        "name": "seqlab-export",
        "joeynmt_version": joeynmt.__version__,
        "model_dir": str(model_dir),
        "data": {"dev": str(model_dir / "warmup"), "test": str(model_dir / "test"), "dataset_type": "plain",
                 "src": side("src"), "trg": side("trg")},
        "testing": {"load_model": str(model_dir / "best.ckpt"), "n_best": 1, "beam_size": 1, "beam_alpha": 0.0,
                    "batch_size": args.batch_size, "batch_type": "sentence",
                    "max_output_length": args.max_length, "eval_metrics": []},
        "training": {"use_cuda": False, "fp16": False, "normalization": "tokens", "batch_size": args.batch_size},
        "model": {"initializer": "xavier_uniform", "bias_initializer": "zeros", "tied_embeddings": False,
                  "tied_softmax": False, "encoder": stack, "decoder": stack},
    }


def build_with_output_bias(*args: Any, **kwargs: Any) -> Any:
    """JoeyNMT's build_model, with a bias on the output layer (seqlab's generator has one)."""
    model = _build_model(*args, **kwargs)
    out = model.decoder.output_layer
    model.decoder.output_layer = torch.nn.Linear(out.in_features, out.out_features, bias=True)
    return model


_build_model = jp.build_model


def predict(model: Any, data: Any, global_args: Any, test_args: Any) -> list[list[int]]:
    """JoeyNMT's ``predict`` over ``data`` with the test settings ``test_args``: the output ids of each sentence."""
    data.reset_indices()
    _, _, hypotheses, *_ = jp.predict(
        model=model, data=data, compute_loss=False, device=global_args.device, rank=0,
        n_gpu=global_args.n_gpu, num_workers=0, normalization="tokens", args=test_args,
        autocast=global_args.autocast,
    )
    return [[UNK if t == "<unk>" else token_id(t) for t in h.split()] for h in hypotheses]


def main(argv: list[str] | None = None) -> None:
    parser = worker_arguments(__doc__)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    sizes, weights, sources = load_export(args.export)
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))  # as seqlab and CTranslate2 batch them
    lines = [" ".join(token(i) for i in sources[k][:-1]) for k in order]  # JoeyNMT appends </s> itself
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp)
        for lang, vocab in (("src", sizes["source_vocab"]), ("trg", sizes["target_vocab"])):
            (model_dir / f"{lang}_vocab.txt").write_text("".join(token(i) + "\n" for i in range(4, vocab)))
        (model_dir / "test.src").write_text("".join(line + "\n" for line in lines))
        (model_dir / "warmup.src").write_text("".join(line + "\n" for line in lines[: args.batch_size]))

        jp.build_model = build_with_output_bias
        cfg = joey_config(sizes, model_dir, args)
        table = PositionalEncoding(sizes["d_model"]).pe  # JoeyNMT's sinusoidal table, (1, 5000, d_model)
        ours = torch.from_numpy(weights["positional_table"])
        gap = float((table[0, : len(ours)] - ours).abs().max())
        if gap > 1e-4:
            raise SystemExit(f"JoeyNMT's positional encoding differs from seqlab's by {gap}")
        pe = {"encoder.pe.pe": table, "decoder.pe.pe": table}
        torch.save({"model_state": joey_state(sizes, weights, pe)}, model_dir / "best.ckpt")

        global_args = parse_global_args(cfg, rank=0, mode="test")
        model, _, warmup, test = jp.prepare(global_args, rank=0, mode="test")
        model.eval()
        for beam in args.beams:
            test_args = global_args.test._replace(beam_size=beam)
            predict(model, warmup, global_args, test_args)
            seconds, in_length_order = repeated(args.repeats, partial(predict, model, test, global_args, test_args))
            outputs: list[list[int]] = [[] for _ in sources]
            for k, output in zip(order, in_length_order):
                outputs[k] = output
            print(result(f"JoeyNMT {joeynmt.__version__}", "float32", beam, seconds, outputs), flush=True)


if __name__ == "__main__":
    main()
