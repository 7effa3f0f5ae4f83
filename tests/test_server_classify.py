"""``seqlab serve`` on a classifier run (``model.type: encoder``): labels, probabilities and the pooled
position's attention through the JSON API and in a real browser."""

import asyncio

import httpx
import pytest
import torch
from test_server import ARTIFACTS, CHROMIUM, Served, browser_page

from seqlab.predictors.classifier import Classifier, load
from seqlab.server import Limits, create_app

TEXTS = ["요즘 사랑 생각나", "정말 이별 힘들어", "주말 날씨 어때?", "너무 고백 좋다", "커피 오늘 힘들어"]
LABELS = ["2", "1", "0", "2", "0"]


@pytest.fixture(scope="module")
def served(tiny_classifier):
    with Served(tiny_classifier, Limits(max_inputs=8, max_input_chars=50, chunk=2)) as s:
        yield s


@pytest.fixture(scope="module")
def classifier(tiny_classifier) -> Classifier:
    return load(tiny_classifier)


def post(served: Served, body: object, path: str = "/api/classify") -> httpx.Response:
    return httpx.post(f"{served.url}{path}", json=body, timeout=60)


def test_info_says_classify(served, tiny_classifier, classifier):
    response = httpx.get(f"{served.url}/api/info")
    info = response.json()
    assert info["kind"] == "classify" and info["run"] == "run"
    assert info["model"] == classifier.config.model.model_dump(mode="json", exclude={"init_from"})  # no paths
    assert info["model"]["type"] == "encoder" and info["model"]["pooling"] == "cls"
    model = classifier.config.model
    assert info["shape"] == f"Transformer encoder, {model.num_layers} × {model.d_model}, pooling cls"
    assert info["parameters"] == sum(p.numel() for p in classifier.model.parameters())
    assert info["labels"] == ["0", "1", "2"]
    assert info["tokens"] == {"level": "word", "vocab_size": classifier.tokenizer.vocab_size, "lowercase": False}
    assert info["metrics"]["valid"]["macro_f1"] == 100.0
    assert info["attention"] == {"layers": 2, "heads": 2} and info["max_tokens"] == 14
    assert info["limits"]["max_inputs"] == 8 and info["limits"]["max_input_chars"] == 50
    assert str(tiny_classifier.parent) not in response.text and ".csv" not in response.text  # no local path
    assert httpx.get(f"{served.url}/healthz").json() == {"status": "ok"}


def test_classify_answers_as_the_python_api_does(served, classifier):
    response = post(served, {"inputs": TEXTS})  # 5 inputs, classified in chunks of 2
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["seconds"] >= 0
    outputs = body["outputs"]
    expected = classifier.classify(TEXTS)
    assert [o["input"] for o in outputs] == TEXTS
    assert [o["label"] for o in outputs] == [p.label for p in expected] == LABELS
    for o, p in zip(outputs, expected):
        assert list(o["probabilities"]) == ["0", "1", "2"]  # every class, in the order of the labels
        assert sum(o["probabilities"].values()) == pytest.approx(1.0)
        # the server classifies in chunks of 2, the API all 5 at once: other padding, float32 rounding
        assert o["probabilities"] == pytest.approx(p.probabilities, rel=1e-5, abs=1e-7)
        assert max(o["probabilities"], key=o["probabilities"].get) == o["label"]
        assert o["tokens"] == p.tokens and o["tokens"][0] == "<sos>" and o["tokens"][-1] == "<eos>"
        assert "attention" not in o


def test_attention_on_request_is_the_pooled_rows(served, classifier):
    outputs = post(served, {"inputs": TEXTS[:3], "attention": True}).json()["outputs"]
    for o, p in zip(outputs, classifier.classify(TEXTS[:3], need_weights=True)):
        weights = o["attention"]  # (layers, heads, tokens): what <sos> (pooling cls) reads at each layer
        assert (len(weights), len(weights[0]), len(weights[0][0])) == (2, 2, len(o["tokens"]))
        assert all(abs(sum(row) - 1) < 1e-3 for layer in weights for row in layer)
        torch.testing.assert_close(torch.tensor(weights), p.attention[:, :, 0], atol=1e-4, rtol=0)


def test_the_pooled_rows_of_mean_pooling_are_the_mean_of_the_rows():
    from seqlab.server.classify import _pooled_attention

    attention = torch.softmax(torch.randn(3, 2, 5, 5), -1)  # (layers, heads, tokens, tokens)
    torch.testing.assert_close(_pooled_attention(attention, "cls"), attention[:, :, 0])
    mean = _pooled_attention(attention, "mean")
    torch.testing.assert_close(mean, attention.mean(2))
    torch.testing.assert_close(mean.sum(-1), torch.ones(3, 2))


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"inputs": []}, 422, "inputs: List should have at least 1 item"),
    ({"inputs": ["a"] * 9}, 413, "9 inputs; at most 8 per request"),
    ({"inputs": ["ok", "가" * 51]}, 413, "inputs[1] has 51 characters; at most 50"),
    ({"inputs": "요즘 사랑 생각나"}, 422, "inputs: Input should be a valid list"),
    ({"text": ["a"]}, 422, "inputs: Field required"),
    ({"inputs": ["a"], "attention": "maybe"}, 422, "attention: Input should be a valid boolean"),
    ({"inputs": ["a"], "beam": 3}, 422, "beam: Extra inputs are not permitted"),
])
def test_bad_requests_get_a_clear_json_error(served, body, status, message):
    response = post(served, body)
    assert response.status_code == status
    assert message in response.json()["error"]


def test_malformed_json_gets_a_json_error(served):
    response = httpx.post(f"{served.url}/api/classify", content=b'{"inputs": [', headers={"content-type": "application/json"})
    assert response.status_code == 422 and "JSON decode error" in response.json()["error"]


def test_a_classifier_run_has_only_its_own_routes(served):
    for path, body in [("/api/translate", {"inputs": ["사랑"]}), ("/api/generate", {"start": "사랑"}),
                       ("/api/similar", {"word": "사랑"}), ("/api/analogy", {"a": "밥", "b": "사랑", "c": "이별"})]:
        response = post(served, body, path)
        assert response.status_code == 404 and response.json() == {"error": f"Not Found: POST {path}"}
    schema = httpx.get(f"{served.url}/openapi.json").json()
    assert {"/api/classify", "/api/info", "/healthz"} <= set(schema["paths"])
    assert not {"/api/translate", "/api/generate", "/api/similar", "/api/analogy"} & set(schema["paths"])
    request = schema["components"]["schemas"]["ClassifyRequest"]
    assert set(request["properties"]) == {"inputs", "attention"} and request["required"] == ["inputs"]


def test_the_other_kinds_have_no_classify_route(korean_chatbot):
    from fastapi.testclient import TestClient

    with TestClient(create_app(korean_chatbot)) as client:
        response = client.post("/api/classify", json={"inputs": ["배고파"]})
        assert response.status_code == 404 and response.json() == {"error": "Not Found: POST /api/classify"}
        assert client.get("/api/info").json()["kind"] == "translate"


def test_a_classifier_run_loads_no_translator(tiny_classifier, monkeypatch):
    import seqlab.export

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a classifier run loaded a translator")

    monkeypatch.setattr(seqlab.export, "load_translator", refuse)
    assert any(getattr(r, "path", None) == "/api/classify" for r in create_app(tiny_classifier).routes)


def test_concurrent_clients_are_all_answered_correctly(served):
    async def one(client: httpx.AsyncClient, i: int) -> bool:
        inputs = [TEXTS[(i + k) % len(TEXTS)] for k in range(1 + i % 4)]
        response = await client.post(f"{served.url}/api/classify", json={"inputs": inputs, "attention": i % 2 == 0})
        assert response.status_code == 200, response.text
        outputs = response.json()["outputs"]
        assert [o["input"] for o in outputs] == inputs
        return [o["label"] for o in outputs] == [LABELS[TEXTS.index(text)] for text in inputs]

    async def everyone() -> list[bool]:
        async with httpx.AsyncClient(timeout=60) as client:
            return await asyncio.gather(*(one(client, i) for i in range(20)))

    assert all(asyncio.run(everyone()))


def test_a_request_over_its_time_gets_503(tiny_classifier):
    with Served(tiny_classifier, Limits(timeout_s=1e-4)) as slow:
        response = post(slow, {"inputs": TEXTS * 4, "attention": True})
        assert response.status_code == 503
        assert "took longer than 0.0001 s" in response.json()["error"]
        assert httpx.get(f"{slow.url}/healthz").status_code == 200  # and the server carries on


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium: the browser test is skipped (apt-get install chromium)")
def test_the_classify_page_in_a_real_browser(served, classifier):
    """Type a sentence, see its label, every class's probability and its tokens shaded by the pooled attention;
    switch head and layer; a screenshot is kept."""
    from playwright.sync_api import expect

    with browser_page(served.url) as (page, outside):
        expect(page.locator("body[data-ready=true][data-kind=classify]")).to_have_count(1)
        for hidden in ("#transcript", "#options", "#inspect", "#lm", "#vectors"):
            expect(page.locator(hidden)).to_be_hidden()
        expect(page.locator("#model")).to_contain_text("Transformer encoder, 2 × 32, pooling cls, 3 classes")
        expect(page.locator("#send")).to_have_text("Classify")
        [expected] = classifier.classify(["요즘 사랑 생각나"], need_weights=True)
        page.fill("#text", "요즘 사랑 생각나")  # classified as it is typed, without Enter
        expect(page.locator("#label")).to_have_text(expected.label)
        rows = page.locator("#probabilities tbody tr")
        ranked = sorted(expected.probabilities, key=expected.probabilities.get, reverse=True)
        expect(rows.locator("td.label")).to_have_text(ranked)
        expect(rows.first).to_have_class("chosen")
        shown = rows.locator("td.probability").evaluate_all("cells => cells.map(c => Number(c.dataset.probability))")
        assert shown == pytest.approx([expected.probabilities[label] for label in ranked], abs=1e-6)
        # the tokens, shaded by the last layer's <sos> row, averaged over the heads
        pooled = page.locator("#pooled")
        expect(pooled.locator(".token .piece")).to_have_text(["<sos>", "요즘", "사랑", "생각나", "<eos>"])
        expect(pooled).to_have_attribute("data-layer", "1")
        expect(pooled).to_have_attribute("data-head", "mean")
        chips = pooled.locator(".token")

        def weights() -> list[float]:
            return chips.evaluate_all("chips => chips.map(c => Number(c.dataset.weight))")

        rows_of = expected.attention[:, :, 0]  # (layers, heads, tokens)
        assert weights() == pytest.approx(rows_of[1].mean(0).tolist(), abs=2e-4)
        alphas = chips.evaluate_all("chips => chips.map(c => parseFloat(getComputedStyle(c).backgroundColor.split(',')[3]))")
        assert max(alphas) == alphas[max(range(5), key=lambda j: weights()[j])]  # the most attended is the darkest
        page.screenshot(path=str(ARTIFACTS / "serve-classify.png"), full_page=True)
        page.select_option("#pool-head", "1")
        expect(pooled).to_have_attribute("data-head", "1")
        assert weights() == pytest.approx(rows_of[1, 1].tolist(), abs=2e-4)
        page.select_option("#pool-layer", "0")
        expect(pooled).to_have_attribute("data-layer", "0")
        assert weights() == pytest.approx(rows_of[0, 1].tolist(), abs=2e-4)
        fonts = "async () => { await document.fonts.ready; return document.fonts.check('16px NanumGothic', '사랑'); }"
        assert page.evaluate(fonts)  # Hangul is drawn with the page's own font, not boxes
        # Enter classifies at once
        page.fill("#text", "정말 이별 힘들어")
        page.press("#text", "Enter")
        expect(page.locator("#label")).to_have_text("1")
        # a text over the limit: the error, and no stale label
        page.evaluate("document.getElementById('text').removeAttribute('maxlength')")  # what the page would not let through
        page.fill("#text", "가" * 51)
        expect(page.locator("#error")).to_have_text("inputs[0] has 51 characters; at most 50")
        expect(page.locator("#label")).to_have_text("")
        expect(rows).to_have_count(0)
        assert outside == [], f"the page fetched from outside the app: {outside}"
    assert (ARTIFACTS / "serve-classify.png").stat().st_size > 10_000
