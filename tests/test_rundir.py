"""The run directory's files: safetensors round trips of weights and training state, tokenizers, the log."""

import json

import pytest
import torch
from safetensors.torch import save as save_safetensors

from seqlab.config import TokenizerConfig, TrainConfig, TransformerConfig
from seqlab.model import build_model
from seqlab.rundir import LOG, MODEL, RunDir
from seqlab.tokenizer import Tokenizer
from seqlab.train.optimizer import build_optimizer
from seqlab.train.schedule import transformer_schedule

CFG = TransformerConfig(d_model=16, num_layers=1, num_heads=2, d_ff=32, max_length=16, tie_output=True)


def test_model_weights_round_trip_with_tied_embeddings(tmp_path):
    torch.manual_seed(0)
    model = build_model(CFG, 11, 13)
    RunDir(tmp_path).save_model(model, {"epoch": 1, "step": 5})
    fresh = build_model(CFG, 11, 13)
    info = RunDir(tmp_path).load_model(fresh)
    assert info == {"epoch": 1, "step": 5}
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), name
    assert fresh.generator.weight is fresh.decoder.embed.embedding.weight


def test_weights_and_their_description_are_one_file(tmp_path):
    run = RunDir(tmp_path)
    run.save_model(build_model(CFG, 11, 13), {"epoch": 3, "step": 30, "valid": {"loss": 0.5}})
    assert sorted(p.name for p in tmp_path.iterdir()) == [MODEL]
    assert run.model_info() == {"epoch": 3, "step": 30, "valid": {"loss": 0.5}}


def test_a_run_written_before_the_header_held_the_description_still_reads(tmp_path):
    model = build_model(CFG, 11, 13)
    weights = {k: v.contiguous().clone() for k, v in model.state_dict().items()}
    (tmp_path / MODEL).write_bytes(save_safetensors(weights, metadata={"step": "5"}))
    (tmp_path / "model.json").write_text(json.dumps({"epoch": 1, "step": 5}))
    assert RunDir(tmp_path).load_model(build_model(CFG, 11, 13)) == {"epoch": 1, "step": 5}


def test_tokenizers_round_trip(tmp_path):
    source = Tokenizer.train(["ab ba", "abc"], TokenizerConfig(level="char"))
    target = Tokenizer.train(["xy", "yx z"], TokenizerConfig(level="char"))
    RunDir(tmp_path).save_tokenizers(source, target)
    read_source, read_target = RunDir(tmp_path).tokenizers()
    assert read_source.encode(["cab"]) == source.encode(["cab"])
    assert read_target.encode(["zyx"]) == target.encode(["zyx"])


def test_log_appends_whole_lines_and_skips_a_torn_last_line(tmp_path):
    run = RunDir(tmp_path)
    run.append_log({"epoch": 1, "step": 10})
    run.append_log({"epoch": 2, "step": 20})
    with open(tmp_path / LOG, "a", encoding="utf-8") as f:
        f.write('{"epoch": 3, "st')  # a write cut short by a kill
    assert run.log() == [{"epoch": 1, "step": 10}, {"epoch": 2, "step": 20}]
    run.truncate_log(10)
    assert (tmp_path / LOG).read_text(encoding="utf-8") == '{"epoch": 1, "step": 10}\n'


def test_a_damaged_log_line_is_named(tmp_path):
    (tmp_path / LOG).write_text('{"epoch": 1}\nnot json\n{"epoch": 3}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"log.jsonl:2: not a JSON record"):
        RunDir(tmp_path).log()


def test_training_state_round_trip(tmp_path):
    torch.manual_seed(0)
    model = build_model(CFG, 11, 13)
    optimizer = build_optimizer(model, TrainConfig())
    scheduler = transformer_schedule(optimizer, 16, 10, 1.0)
    for _ in range(3):
        model(torch.randint(1, 11, (2, 5)), torch.randint(1, 13, (2, 4))).sum().backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    RunDir(tmp_path).save_checkpoint(model, optimizer, scheduler, {"epoch": 2, "batch": 7})
    expected_random = torch.rand(3)

    torch.manual_seed(123)
    model2 = build_model(CFG, 11, 13)
    optimizer2 = build_optimizer(model2, TrainConfig())
    scheduler2 = transformer_schedule(optimizer2, 16, 10, 1.0)
    state, carried = RunDir(tmp_path).load_checkpoint(model2, optimizer2, scheduler2)
    assert carried == {}
    assert state == {"epoch": 2, "batch": 7}
    assert torch.equal(torch.rand(3), expected_random)  # the RNG continues where it was saved
    assert scheduler2.get_last_lr() == scheduler.get_last_lr()
    for p1, p2 in zip(model.parameters(), model2.parameters()):
        assert torch.equal(p1, p2)
        assert torch.equal(optimizer.state[p1]["exp_avg_sq"], optimizer2.state[p2]["exp_avg_sq"])


def test_missing_files_are_explained(tmp_path):
    run = RunDir(tmp_path)
    with pytest.raises(FileNotFoundError, match="no trained model"):
        run.load_model(build_model(CFG, 11, 13))
    with pytest.raises(FileNotFoundError, match="not a seqlab run directory"):
        run.config()
    with pytest.raises(FileNotFoundError, match="no log.jsonl"):
        run.log()
    with pytest.raises(FileNotFoundError, match="nothing to resume"):
        model = build_model(CFG, 11, 13)
        optimizer = build_optimizer(model, TrainConfig())
        run.load_checkpoint(model, optimizer, transformer_schedule(optimizer, 16, 10, 1.0))
