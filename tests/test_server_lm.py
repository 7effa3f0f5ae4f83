"""``seqlab serve`` on a language-model run: continuations with per-token probabilities through the JSON API and
in a real browser."""

import math

import httpx
import numpy as np
import pytest
import torch
from test_server import ARTIFACTS, CHROMIUM, Served, browser_page

from seqlab.predictors.language_model import LanguageModel, load
from seqlab.server import Limits, create_app
from seqlab.specials import EOS

NUMBERS = "하나 둘 셋 넷 다섯 여섯 일곱 여덟 아홉 열".split()  # Korean counting: each word predicts the next


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    """A tiny LSTM language model (2 × 16, word tokens) of counting sentences ("셋 넷 다섯 ..."), as
    tests/test_lm.py trains one."""
    from seqlab.config import parse_config
    from seqlab.train.trainer import Trainer

    data = tmp_path_factory.mktemp("lm-data")
    rng = np.random.default_rng(0)
    lines = [" ".join(NUMBERS[s : s + int(rng.integers(3, 7))]) for s in rng.integers(0, 5, size=400)]
    for name, part in [("train", lines[:300]), ("valid", lines[300:350]), ("test", lines[350:])]:
        (data / f"{name}.txt").write_text("\n".join(part) + "\n", encoding="utf-8")
    config = parse_config({
        "seed": 3,
        "data": {name: {"format": "lines", "path": str(data / f"{name}.txt")} for name in ("train", "valid", "test")},
        "tokens": {"source": {"level": "word", "vocab_size": 50}},
        "model": {"type": "lm", "embedding_size": 16, "hidden_size": 16, "num_layers": 2, "dropout": 0.1},
        "train": {"epochs": 4, "streams": 4, "time_size": 8, "schedule": "constant", "lr": 0.01, "precision": "fp32"},
    })
    run = tmp_path_factory.mktemp("lm") / "run"
    Trainer(config, run, progress=False).fit()
    return run


@pytest.fixture(scope="module")
def served(lm_run):
    with Served(lm_run, Limits(max_input_chars=20, max_beam=6, max_output_length=40)) as s:
        yield s


@pytest.fixture(scope="module")
def lm(lm_run) -> LanguageModel:
    return load(lm_run)


def post(served: Served, body: object, path: str = "/api/generate") -> httpx.Response:
    return httpx.post(f"{served.url}{path}", json=body, timeout=60)


def test_info_says_lm(served, lm_run, lm):
    response = httpx.get(f"{served.url}/api/info")
    info = response.json()
    assert info["kind"] == "lm" and info["run"] == "run"
    assert info["model"] == {"type": "lm", "cell": "lstm", "embedding_size": 16, "hidden_size": 16, "num_layers": 2,
                             "dropout": 0.1, "variational": False, "weight_drop": 0.0, "embedding_dropout": 0.0,
                             "tie_weights": True, "init": "torch", "ngrams": None}
    assert info["shape"] == "LSTM language model, 2 × 16"  # the page's heading
    assert info["parameters"] == sum(p.numel() for p in lm.model.parameters())
    assert info["tokens"] == {"level": "word", "vocab_size": lm.tokenizer.vocab_size, "lowercase": False}
    assert info["metrics"]["valid"]["perplexity"] < 3 and info["max_output_length"] == 128
    assert info["limits"]["max_beam"] == 6 and info["limits"]["max_output_length"] == 40
    assert str(lm_run.parent) not in response.text and "train.txt" not in response.text  # no local path
    assert httpx.get(f"{served.url}/healthz").json() == {"status": "ok"}


@pytest.mark.parametrize("options", [
    {},
    {"beam": 4, "nbest": 3},
    {"beam": 3, "nbest": 2, "length_penalty": 0.6},
    {"sample": True, "num_samples": 4, "seed": 5, "temperature": 1.5},
    {"sample": True, "num_samples": 2, "seed": 1, "top_k": 3, "top_p": 0.9},
    {"max_length": 2},
])
@pytest.mark.parametrize("start", ["셋", "하나 둘", ""])
def test_generate_answers_as_the_python_api_does(served, lm, start, options):
    response = post(served, {"start": start, **options})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["start"] == start
    expected = lm.generate([start], **options)[0]
    outputs = body["outputs"]
    assert [o["text"] for o in outputs] == [g.text for g in expected]
    assert [o["continuation"] for o in outputs] == [g.continuation for g in expected]
    assert [o["log_prob"] for o in outputs] == pytest.approx([g.log_prob for g in expected], abs=1e-6)
    assert [o["ended"] for o in outputs] == [g.ended for g in expected]
    for o, g in zip(outputs, expected):
        assert [t["token"] for t in o["tokens"]] == g.tokens + (["<eos>"] if g.ended else [])
        assert [t["probability"] for t in o["tokens"]] == pytest.approx([math.exp(x) for x in g.token_log_probs])
    if "max_length" in options:
        assert all(len(o["tokens"]) == 2 and not o["ended"] for o in outputs)  # counting goes on past 2 words


def _probabilities_read_one_token_at_a_time(lm: LanguageModel, start: str, text: str, ended: bool) -> list[float]:
    """The same probabilities by another road: the model fed one token per call with its state carried, and a
    plain softmax of each step's logits (word tokens: the text's ids are the start's, then the continuation's)."""
    start_ids, text_ids = lm.tokenizer.encode([start, text])
    ids = [EOS, *start_ids]
    targets = text_ids[len(start_ids) :] + ([EOS] if ended else [])
    state, out = None, []
    with torch.no_grad():
        for i, target in enumerate(targets):
            feed = ids if i == 0 else [targets[i - 1]]
            logits, state = lm.model(torch.tensor([feed]), state)
            out.append(float(torch.softmax(logits[0, -1].double(), dim=-1)[target]))
    return out


@pytest.mark.parametrize("start", ["셋", "하나 둘", ""])
def test_the_probabilities_are_the_models(served, lm, start):
    outputs = post(served, {"start": start, "sample": True, "num_samples": 6, "seed": 2, "temperature": 1.3}).json()["outputs"]
    outputs += post(served, {"start": start, "beam": 5, "nbest": 3}).json()["outputs"]
    assert any(o["ended"] for o in outputs)
    for o in outputs:
        probabilities = [t["probability"] for t in o["tokens"]]
        assert all(0 < p <= 1 for p in probabilities)
        # their logs sum to the log-probability decoding added up step by step
        assert sum(math.log(p) for p in probabilities) == pytest.approx(o["log_prob"], abs=1e-4)
        by_hand = _probabilities_read_one_token_at_a_time(lm, start, o["text"], o["ended"])
        assert by_hand == pytest.approx(probabilities, abs=1e-5)


def test_from_an_empty_start_the_product_is_the_probability_of_the_whole_text(served, lm):
    """With nothing given, a continuation that ended is a whole line: P(line, <eos>) is LanguageModel.score's."""
    outputs = post(served, {"start": "", "beam": 4, "nbest": 4}).json()["outputs"]
    ended = [o for o in outputs if o["ended"]]
    assert ended
    scores = lm.score([o["text"] for o in ended])
    for o, score in zip(ended, scores):
        assert math.prod(t["probability"] for t in o["tokens"]) == pytest.approx(math.exp(score["log_prob"]), rel=1e-4)
        assert len(o["tokens"]) == score["tokens"]  # the line's words and its <eos>


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"start": "가" * 21}, 413, "start has 21 characters; at most 20"),
    ({"start": "셋", "beam": 7}, 422, "beam 7; at most 6"),
    ({"start": "셋", "sample": True, "num_samples": 7}, 422, "num_samples 7; at most 6"),
    ({"start": "셋", "max_length": 41}, 422, "max_length 41; at most 40"),
    ({"start": "셋", "max_length": 0}, 422, "max_length: Input should be greater than 0"),
    ({"start": "셋", "beam": 0}, 422, "beam: Input should be greater than or equal to 1"),
    ({"start": "셋", "beam": 3, "sample": True}, 422, "choose beam search (beam > 1) or sampling, not both"),
    ({"start": "셋", "nbest": 2}, 422, "nbest (2) cannot exceed the beam size (1)"),
    ({"start": "셋", "top_p": 0}, 422, "top_p: Input should be greater than 0"),
    ({"start": "셋", "attention": True}, 422, "attention: Extra inputs are not permitted"),
    ({"inputs": ["셋"]}, 422, "start: Field required"),
    ({"start": ["셋"]}, 422, "start: Input should be a valid string"),
])
def test_bad_requests_get_a_clear_json_error(served, body, status, message):
    response = post(served, body)
    assert response.status_code == status
    assert message in response.json()["error"]


def test_malformed_json_gets_a_json_error(served):
    response = httpx.post(f"{served.url}/api/generate", content=b'{"start": ', headers={"content-type": "application/json"})
    assert response.status_code == 422 and "JSON decode error" in response.json()["error"]


def test_an_lm_run_has_only_its_own_routes(served):
    for path, body in [("/api/translate", {"inputs": ["셋"]}), ("/api/similar", {"word": "셋"}),
                       ("/api/analogy", {"a": "하나", "b": "둘", "c": "셋"})]:
        response = post(served, body, path)
        assert response.status_code == 404 and response.json() == {"error": f"Not Found: POST {path}"}
    schema = httpx.get(f"{served.url}/openapi.json").json()
    assert {"/api/generate", "/api/info", "/healthz"} <= set(schema["paths"])
    assert not {"/api/translate", "/api/similar", "/api/analogy"} & set(schema["paths"])
    request = schema["components"]["schemas"]["GenerateRequest"]
    assert {"start", "max_length", "beam", "nbest", "sample", "temperature", "top_k", "top_p", "num_samples",
            "seed"} <= set(request["properties"])
    assert request["required"] == ["start"]


def test_an_lm_run_loads_no_translator(lm_run, monkeypatch):
    import seqlab.export

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a language-model run loaded a translator")

    monkeypatch.setattr(seqlab.export, "load_translator", refuse)
    assert any(getattr(r, "path", None) == "/api/generate" for r in create_app(lm_run).routes)


def test_a_request_over_its_time_gets_503(lm_run):
    with Served(lm_run, Limits(timeout_s=1e-4)) as slow:
        response = post(slow, {"start": "하나", "beam": 8, "nbest": 8, "max_length": 100})
        assert response.status_code == 503
        assert "took longer than 0.0001 s" in response.json()["error"]
        assert httpx.get(f"{slow.url}/healthz").status_code == 200  # and the server carries on


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium: the browser test is skipped (apt-get install chromium)")
def test_the_continuation_page_in_a_real_browser(served, lm):
    """Type a start, see its continuation token by token with probabilities; beam search gives several; a
    screenshot is kept."""
    from playwright.sync_api import expect

    with browser_page(served.url) as (page, outside):
        expect(page.locator("body[data-ready=true][data-kind=lm]")).to_have_count(1)
        expect(page.locator("#transcript")).to_be_hidden()
        expect(page.locator("#inspect")).to_be_hidden()
        expect(page.locator("#vectors")).to_be_hidden()
        expect(page.locator("#model")).to_contain_text("LSTM language model, 2 × 16")
        expect(page.locator("#send")).to_have_text("Continue")
        page.fill("#text", "셋")
        page.press("#text", "Enter")
        items = page.locator("#continuations li")
        expect(items).to_have_count(1)
        greedy = lm.generate(["셋"], max_length=30)[0][0]
        shown = [t.removeprefix("▁") for t in greedy.tokens] + (["<eos>"] if greedy.ended else [])
        expect(items.locator(".start")).to_have_text("셋")
        expect(items.locator(".token .piece")).to_have_text(shown)
        chips = items.locator(".token")
        probabilities = chips.evaluate_all("chips => chips.map(c => Number(c.dataset.probability))")
        assert probabilities == pytest.approx([math.exp(x) for x in greedy.token_log_probs])
        expect(chips.first).to_have_attribute("title", f"P({shown[0]} | before) = {probabilities[0]:.4f}")
        expect(chips.first.locator(".p")).to_have_text(f"{probabilities[0]:.2f}")
        # a likelier token is shaded deeper
        alphas = chips.evaluate_all("chips => chips.map(c => parseFloat(getComputedStyle(c).backgroundColor.split(',')[3]))")
        order = np.argsort(probabilities)
        assert alphas[order[0]] < alphas[order[-1]]
        fonts = "async () => { await document.fonts.ready; return document.fonts.check('16px NanumGothic', '셋 넷'); }"
        assert page.evaluate(fonts)  # Hangul is drawn with the page's own font, not boxes
        # beam search from the options: three continuations, best first, as the Python API ranks them
        page.check("input[name=mode][value=beam]")
        page.fill("#beam", "3")
        page.fill("#length", "8")
        page.fill("#text", "하나 둘")
        page.click("#send")
        expected = lm.generate(["하나 둘"], beam=3, nbest=3, max_length=8)[0]
        expect(items).to_have_count(3)
        expect(items.locator(".score")).to_have_text([f"log P {g.log_prob:.3f}" for g in expected])
        texts = items.evaluate_all("items => items.map(i => i.dataset.text)")
        assert texts == [g.text for g in expected]
        page.screenshot(path=str(ARTIFACTS / "serve-lm.png"), full_page=True)
        # a start over the limit: the error, and no stale continuations
        page.evaluate("document.getElementById('text').removeAttribute('maxlength')")  # what the page would not let through
        page.fill("#text", "가" * 21)
        page.click("#send")
        expect(page.locator("#error")).to_have_text("start has 21 characters; at most 20")
        expect(items).to_have_count(0)
        assert outside == [], f"the page fetched from outside the app: {outside}"
    assert (ARTIFACTS / "serve-lm.png").stat().st_size > 10_000
