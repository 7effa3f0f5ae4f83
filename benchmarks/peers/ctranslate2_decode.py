"""CTranslate2 decodes an exported seqlab Transformer (run in the peers' venv by benchmarks/peer_decoding.py).

    python ctranslate2_decode.py EXPORT_DIR --beams 1 5 --max-length 100 --batch-size 256 --compute-types float32 int8

Converts the export into a CTranslate2 ``TransformerSpec`` weight for weight (no training, no
tokenizer: tokens are the ids' names), then times ``Translator.translate_batch`` on every source, once
per compute type and beam size, after one warm-up batch. Prints one JSON line per run (see export.py).
"""

from __future__ import annotations

import tempfile

import ctranslate2
import numpy as np
from ctranslate2.specs import common_spec, transformer_spec
from export import EOS, best_of, load_export, result, token, token_id, worker_arguments

NAMES = {0: "<blank>", 1: "<s>", EOS: "</s>", 3: "<unk>"}  # CTranslate2's special tokens, at seqlab's ids
# seqlab's search rules: <pad> and <sos> are never output; an empty output (<eos> first) is allowed
AS_SEQLAB = {"suppress_sequences": [["<blank>"], ["<s>"]], "min_decoding_length": 0}


class SeqlabConverter(ctranslate2.converters.Converter):
    """seqlab's state-dict names -> CTranslate2's Transformer spec (post- or pre-LN, LayerNorm eps 1e-6)."""

    def __init__(self, sizes: dict, weights: dict[str, np.ndarray]) -> None:
        self.sizes, self.w = sizes, weights

    def _load(self) -> transformer_spec.TransformerSpec:
        s = self.sizes
        spec = transformer_spec.TransformerSpec.from_config(
            s["num_layers"], s["num_heads"], pre_norm=s["norm"] == "pre", activation=common_spec.Activation.RELU
        )
        spec.config.layer_norm_epsilon = 1e-6
        self._input(spec.encoder, "encoder", s["norm"])
        self._input(spec.decoder, "decoder", s["norm"])
        for i, layer in enumerate(spec.encoder.layer):
            p = f"encoder.layers.{i}"
            self._attention(layer.self_attention, f"{p}.self_attn", fused_qkv=True)
            self._norm(layer.self_attention.layer_norm, f"{p}.attn_block.norm")
            self._ffn(layer.ffn, p)
        for i, layer in enumerate(spec.decoder.layer):
            p = f"decoder.layers.{i}"
            self._attention(layer.self_attention, f"{p}.self_attn", fused_qkv=True)
            self._norm(layer.self_attention.layer_norm, f"{p}.self_block.norm")
            self._attention(layer.attention, f"{p}.cross_attn", fused_qkv=False)
            self._norm(layer.attention.layer_norm, f"{p}.cross_block.norm")
            self._ffn(layer.ffn, p)
        self._linear(spec.decoder.projection, "generator")
        spec.register_source_vocabulary([NAMES.get(i, token(i)) for i in range(s["source_vocab"])])
        spec.register_target_vocabulary([NAMES.get(i, token(i)) for i in range(s["target_vocab"])])
        return spec

    def _input(self, spec, scope: str, norm: str) -> None:
        embeddings = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings  # encoder: a list
        embeddings.weight = self.w[f"{scope}.embed.embedding.weight"]
        spec.scale_embeddings = True  # × √d_model, as seqlab does
        spec.position_encodings.encodings = self.w["positional_table"]
        if norm == "pre":
            self._norm(spec.layer_norm, f"{scope}.final_norm")

    def _attention(self, spec, scope: str, fused_qkv: bool) -> None:
        w, b = (lambda n: self.w[f"{scope}.{n}.weight"]), (lambda n: self.w[f"{scope}.{n}.bias"])
        if fused_qkv:
            spec.linear[0].weight = np.concatenate([w("w_q"), w("w_k"), w("w_v")])
            spec.linear[0].bias = np.concatenate([b("w_q"), b("w_k"), b("w_v")])
        else:
            self._linear(spec.linear[0], f"{scope}.w_q")
            spec.linear[1].weight = np.concatenate([w("w_k"), w("w_v")])
            spec.linear[1].bias = np.concatenate([b("w_k"), b("w_v")])
        self._linear(spec.linear[-1], f"{scope}.w_o")

    def _ffn(self, spec, layer: str) -> None:
        self._linear(spec.linear_0, f"{layer}.ffn.w_1")
        self._linear(spec.linear_1, f"{layer}.ffn.w_2")
        self._norm(spec.layer_norm, f"{layer}.ffn_block.norm")

    def _linear(self, spec, scope: str) -> None:
        spec.weight, spec.bias = self.w[f"{scope}.weight"], self.w[f"{scope}.bias"]

    def _norm(self, spec, scope: str) -> None:
        spec.gamma, spec.beta = self.w[f"{scope}.weight"], self.w[f"{scope}.bias"]


def main() -> None:
    parser = worker_arguments(__doc__)
    parser.add_argument("--compute-types", nargs="+", default=["float32", "int8"])
    args = parser.parse_args()

    sizes, weights, sources = load_export(args.export)
    ids = {name: i for i, name in NAMES.items()}
    tokens = [[NAMES.get(i, token(i)) for i in sentence] for sentence in sources]  # <eos> included, as seqlab feeds it
    with tempfile.TemporaryDirectory() as model_dir:
        SeqlabConverter(sizes, weights).convert(model_dir, force=True)
        for compute_type in args.compute_types:
            translator = ctranslate2.Translator(model_dir, device="cpu", compute_type=compute_type,
                                                inter_threads=1, intra_threads=args.threads)
            for beam in args.beams:
                def run() -> list[list[int]]:
                    results = translator.translate_batch(
                        tokens, beam_size=beam, max_batch_size=args.batch_size, batch_type="examples",
                        max_decoding_length=args.max_length, length_penalty=0.0, **AS_SEQLAB,
                    )
                    return [[ids[t] if t in ids else token_id(t) for t in r.hypotheses[0]] for r in results]

                translator.translate_batch(tokens[: args.batch_size], beam_size=beam,
                                           max_decoding_length=args.max_length, **AS_SEQLAB)  # warm-up
                seconds, outputs = best_of(args.repeats, run)
                engine = f"CTranslate2 {ctranslate2.__version__}"
                print(result(engine, compute_type, beam, seconds, outputs), flush=True)


if __name__ == "__main__":
    main()
