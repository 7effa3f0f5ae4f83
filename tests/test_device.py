"""train.device: where a model trains and decodes, and its precision there (CUDA's bf16, or fp16 with a scaler)."""

import pytest
import torch
from conftest import resumes_exactly, small_date_config
from safetensors.torch import load_file

import seqlab
from seqlab import precision
from seqlab.config import ConfigError, parse_config
from seqlab.rundir import CHECKPOINT, MODEL, RunDir
from seqlab.train.trainer import Trainer

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device: the GPU tests run where PyTorch sees one")


def test_auto_is_the_gpu_where_there_is_one(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert precision.device("auto") == precision.device("cpu") == torch.device("cpu")
    with pytest.raises(ConfigError, match="train.device cuda: PyTorch sees no CUDA device"):
        precision.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("LOCAL_RANK", "1")  # torchrun's second process on this node
    assert precision.device("auto") == precision.device("cuda") == torch.device("cuda", 1)
    assert precision.device("cpu") == torch.device("cpu")


@pytest.mark.parametrize(("has_bf16", "expected"), [(True, "bf16"), (False, "fp16")])
def test_a_gpu_trains_in_bf16_or_else_fp16(monkeypatch, has_bf16, expected):
    monkeypatch.delenv(precision.ENV, raising=False)
    monkeypatch.setattr(precision, "cuda_bf16", lambda: has_bf16)
    assert precision.resolve("auto", "cuda") == precision.resolve("bf16", "cuda") == expected
    assert precision.resolve("fp32", "cuda") == "fp32"


def test_a_gpu_that_emulates_bf16_trains_in_fp16(monkeypatch):
    """PyTorch's is_bf16_supported() counts emulated bf16 by default (pre-Ampere GPUs); only native bf16 counts."""
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation)
    assert precision.cuda_bf16.__wrapped__() is False


def test_a_missing_gpu_stops_the_run_before_its_directory_exists(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    config = parse_config(small_date_config(device="cuda"))
    with pytest.raises(ConfigError, match="no CUDA device"):
        Trainer(config, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_a_run_trained_on_a_gpu_decodes_on_a_machine_without_one(tmp_path, monkeypatch):
    Trainer(parse_config(small_date_config()), tmp_path / "run", progress=False).fit()
    run = RunDir(tmp_path / "run")
    run.save_config(parse_config(small_date_config(device="cuda")))  # as a GPU run's config.yaml says
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    translator = seqlab.load(run.path)
    assert translator.device == torch.device("cpu")
    assert len(translator.translate(["september 27, 1994"])) == 1


def test_the_numpy_engine_computes_on_the_cpu():
    raw = small_date_config(engine="numpy", device="cuda")
    raw["model"] = {"type": "rnn", "cell": "lstm", "embedding_size": 8, "hidden_size": 16}
    with pytest.raises(ValueError, match="train.device auto or cpu"):
        parse_config(raw)


@pytest.fixture
def fp16(monkeypatch):
    """What a GPU without bf16 runs, here on the CPU (PyTorch autocasts to float16 and scales gradients there
    too): every precision but fp32 resolves to fp16, and ``auto`` is not measured (as on a GPU)."""
    monkeypatch.setattr(precision, "resolve", lambda p, device_type="cpu": "fp32" if p == "fp32" else "fp16")
    monkeypatch.setattr(precision, "probed", lambda p, device_type="cpu": False)


def test_fp16_trains_with_a_scaler_that_the_checkpoint_keeps(tmp_path, fp16, killed_at):
    config = parse_config(small_date_config(epochs=3, precision="auto"))
    trainer = Trainer(config, tmp_path / "run", progress=False)
    assert trainer.scaler.is_enabled()
    trainer.fit()
    log = RunDir(tmp_path / "run").log()
    # it learns in fp16: the training and the held-out loss fall (3 epochs of this tiny model get no date right yet)
    assert log[-1]["train_loss"] < log[0]["train_loss"] and log[-1]["valid"]["loss"] < log[0]["valid"]["loss"]
    resumed = Trainer(config, tmp_path / "run", resume=True, progress=False)
    assert resumed.scaler.state_dict() == trainer.scaler.state_dict()  # the scale and its growth count
    resumes_exactly(config, tmp_path / "again", killed_at, 45)  # inside epoch 2 (37 steps an epoch)


@needs_cuda
def test_a_gpu_training_equals_the_cpu_one_in_fp32(tmp_path):
    runs = {}
    for device in ("cpu", "cuda"):
        runs[device] = tmp_path / device
        Trainer(parse_config(small_date_config(epochs=2, device=device)), runs[device], progress=False).fit()
    cpu, gpu = RunDir(runs["cpu"]).log(), RunDir(runs["cuda"]).log()
    assert [r["train_loss"] for r in gpu] == pytest.approx([r["train_loss"] for r in cpu], rel=1e-3)
    weights = [load_file(runs[device] / MODEL) for device in ("cpu", "cuda")]
    for name, tensor in weights[0].items():
        torch.testing.assert_close(weights[1][name], tensor, atol=2e-3, rtol=0)
    translator = seqlab.load(runs["cuda"])
    assert translator.device.type == "cuda"  # decoding on the device it trained on
    dates = ["september 27, 1994", "10/15/94", "TUESDAY, SEPTEMBER 25, 1984"]
    assert translator.translate(dates, beam=3) == seqlab.load(runs["cpu"]).translate(dates, beam=3)


@needs_cuda
def test_bf16_trains_on_a_gpu_and_resumes(tmp_path, killed_at):
    config = parse_config(small_date_config(epochs=3, device="cuda", precision="auto"))
    Trainer(config, tmp_path / "run", progress=False).fit()
    log = RunDir(tmp_path / "run").log()
    assert log[-1]["train_loss"] < 0.5 * log[0]["train_loss"]
    assert "cuda_rng.0" in load_file(tmp_path / "run" / CHECKPOINT)
    resumes_exactly(config, tmp_path / "again", killed_at, 45)  # inside epoch 2 (37 steps an epoch)


def test_large_linear_layers_are_prepacked_for_cpu_inference_and_compute_the_same():
    """``Runtime.place`` (fp32, CPU) turns each linear layer of at least ``PACK_FROM`` weights into a
    ``PackedLinear``, and the smaller ones too where oneDNN's products pay on this CPU: the same outputs, the same
    parameters (a tied weight stays tied, the state dict keeps its keys), the plain product in training mode, and a
    new packed copy after the weight changes."""
    from torch import nn

    from seqlab import precision
    from seqlab.runtime import PACK_FROM, Int8Linear, PackedLinear, Runtime, quantize_int8

    model = nn.Sequential(nn.Embedding(PACK_FROM // 64, 64), nn.Linear(64, 64), nn.Linear(64, PACK_FROM // 64))
    model[2].weight = model[0].weight  # tied, as a Transformer's output projection may be
    keys, x = set(model.state_dict()), torch.randn(5, 64)
    rows = torch.randn(-(-precision.PACKED_WORK // 64**2), 64)  # the small layer: its few rows (x), its many (rows)
    with torch.no_grad():
        expected, small = model[2](x), [model[1](inputs) for inputs in (x, rows)]
    placed = Runtime().place(model)
    assert isinstance(placed[2], PackedLinear)
    assert isinstance(placed[1], PackedLinear) == precision.onednn_fp32_pays()  # a small layer only where it pays
    assert placed[2].weight is placed[0].weight and set(placed.state_dict()) == keys and not placed[2].training
    with torch.no_grad():
        for inputs, before in zip((x, rows), small):
            torch.testing.assert_close(placed[1](inputs), before, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(placed[2](x), expected, atol=1e-4, rtol=1e-4)
        placed[0].weight.mul_(2.0)  # in place: a new version of the weight
        torch.testing.assert_close(placed[2](x), 2 * expected - placed[2].bias, atol=1e-4, rtol=1e-4)
    placed.train()
    placed[2](x).sum().backward()  # the plain product in training: gradients flow to the tied weight
    assert placed[0].weight.grad is not None
    placed.eval()
    int8 = quantize_int8(placed)  # a placed model quantised: the packed layer too, the placed model untouched
    assert isinstance(int8[2], Int8Linear) and isinstance(placed[2], PackedLinear)
    with torch.no_grad():
        error = (int8[2](x) - placed[2](x)).norm() / placed[2](x).norm()
    assert error < 0.03  # int8's rounding, not another layer
    bf16 = Runtime(precision="bf16").place(nn.Sequential(nn.Linear(64, PACK_FROM // 64)))
    assert type(bf16[0]) is nn.Linear  # autocast computes it in bf16: nothing to pack
    chosen = Runtime(precision="bf16", auto=True)  # auto's bf16: its small searches compute in fp32
    auto = chosen.place(nn.Sequential(nn.Linear(64, PACK_FROM // 64)))
    assert isinstance(auto[0], PackedLinear)
    with torch.no_grad(), chosen.autocast():  # a large search: autocast's bf16 product, not the packed one
        assert auto[0](x).dtype == torch.bfloat16
