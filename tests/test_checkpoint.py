"""The run directory's files: safetensors round trips of weights and training state."""

import pytest
import torch

from seqlab.config import TransformerConfig
from seqlab.model import build_model
from seqlab.train import checkpoint
from seqlab.train.schedule import transformer_schedule

CFG = TransformerConfig(d_model=16, num_layers=1, num_heads=2, d_ff=32, max_length=16, tie_output=True)


def test_model_weights_round_trip_with_tied_embeddings(tmp_path):
    torch.manual_seed(0)
    model = build_model(CFG, 11, 13)
    checkpoint.save_model(tmp_path, model, {"epoch": 1, "step": 5})
    fresh = build_model(CFG, 11, 13)
    info = checkpoint.load_model_weights(tmp_path, fresh)
    assert info == {"epoch": 1, "step": 5}
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), name
    assert fresh.generator.weight is fresh.decoder.embed.embedding.weight


def test_training_state_round_trip(tmp_path):
    torch.manual_seed(0)
    model = build_model(CFG, 11, 13)
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = transformer_schedule(optimizer, 16, 10, 1.0)
    for _ in range(3):
        model(torch.randint(1, 11, (2, 5)), torch.randint(1, 13, (2, 4))).sum().backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    checkpoint.save_checkpoint(tmp_path, model, optimizer, scheduler, {"epoch": 2, "batch": 7})
    expected_random = torch.rand(3)

    torch.manual_seed(123)
    model2 = build_model(CFG, 11, 13)
    optimizer2 = torch.optim.Adam(model2.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler2 = transformer_schedule(optimizer2, 16, 10, 1.0)
    state = checkpoint.load_checkpoint(tmp_path, model2, optimizer2, scheduler2)
    assert state == {"epoch": 2, "batch": 7}
    assert torch.equal(torch.rand(3), expected_random)  # the RNG continues where it was saved
    assert scheduler2.get_last_lr() == scheduler.get_last_lr()
    for p1, p2 in zip(model.parameters(), model2.parameters()):
        assert torch.equal(p1, p2)
        assert torch.equal(optimizer.state[p1]["exp_avg_sq"], optimizer2.state[p2]["exp_avg_sq"])


def test_missing_files_are_explained(tmp_path):
    with pytest.raises(FileNotFoundError, match="no trained model"):
        checkpoint.load_model_weights(tmp_path, build_model(CFG, 11, 13))
    with pytest.raises(FileNotFoundError, match="not a seqlab run directory"):
        checkpoint.load_run_config(tmp_path)
