"""``seqlab serve`` on a span-extraction run (``model.type: span``): answers cut out of a context, through the
JSON API and in a real browser."""

import httpx
import pytest
from test_server import ARTIFACTS, CHROMIUM, Served, browser_page

from seqlab.predictors.answerer import Answerer, load
from seqlab.server import Limits

CONTEXT = "Cyra was born in 2001.\n\nThe capital of kelaland is sovuton.  Dagn likes figs."
QUESTIONS = ["When was Cyra born?", "What is the capital of kelaland?", "What does Dagn like?"]


@pytest.fixture(scope="module")
def served(tiny_reader):
    with Served(tiny_reader, Limits(max_inputs=4, max_input_chars=60, max_context_chars=200, chunk=2)) as s:
        yield s


@pytest.fixture(scope="module")
def answerer(tiny_reader) -> Answerer:
    return load(tiny_reader)


def post(served: Served, body: object, path: str = "/api/answer") -> httpx.Response:
    return httpx.post(f"{served.url}{path}", json=body, timeout=60)


def test_info_says_answer(served, answerer):
    response = httpx.get(f"{served.url}/api/info")
    info = response.json()
    assert info["kind"] == "answer" and info["model"]["type"] == "span"
    assert info["shape"].endswith(", span extraction") and info["shape"].startswith("Transformer encoder, ")
    assert info["parameters"] == sum(p.numel() for p in answerer.model.parameters())
    assert info["metrics"]["valid"]["exact_match"] >= 90 and info["max_tokens"] == 48
    assert info["limits"]["max_context_chars"] == 200 and ".json" not in response.text  # no local path


def test_answers_are_the_python_apis_and_point_into_the_context(served, answerer):
    response = post(served, {"inputs": QUESTIONS, "context": CONTEXT})  # in chunks of 2
    assert response.status_code == 200, response.text
    outputs = response.json()["outputs"]
    expected = answerer.answer(QUESTIONS, [CONTEXT] * 3)
    assert [o["answer"] for o in outputs] == [a.text for a in expected] == ["2001", "sovuton", "figs"]
    for o, a in zip(outputs, expected):
        assert CONTEXT[o["start"]:o["end"]] == o["answer"] and o["probability"] == pytest.approx(a.probability)
        assert o["tokens"] == a.tokens and len(o["start_probabilities"]) == len(o["tokens"])
        context = o["tokens"].index("<eos>") + 1
        assert sum(o["start_probabilities"][:context]) == 0 and sum(o["end_probabilities"]) == pytest.approx(1, abs=1e-3)


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"inputs": QUESTIONS, "context": "x" * 201}, 413, "the context has 201 characters; at most 200"),
    ({"inputs": QUESTIONS * 2, "context": CONTEXT}, 413, "6 inputs; at most 4"),
    ({"inputs": QUESTIONS}, 422, "context: Field required"),
    ({"inputs": [], "context": CONTEXT}, 422, "inputs: List should have at least 1 item"),
])
def test_bad_requests_get_a_clear_json_error(served, body, status, message):
    response = post(served, body)
    assert response.status_code == status and message in response.json()["error"]


def test_a_reader_run_has_only_its_own_routes(served):
    assert post(served, {"inputs": ["x"]}, "/api/classify").status_code == 404
    assert post(served, {"inputs": ["x"]}, "/api/translate").status_code == 404


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium: the browser test is skipped (apt-get install chromium)")
def test_the_answer_page_in_a_real_browser(served, answerer):
    """Paste a context, ask a question, see the answer marked in the context and the context's tokens shaded by
    the probability that the answer starts there; a screenshot is kept."""
    from playwright.sync_api import expect

    with browser_page(served.url) as (page, outside):
        expect(page.locator("body[data-ready=true][data-kind=answer]")).to_have_count(1)
        for hidden in ("#transcript", "#options", "#inspect", "#lm", "#vectors", "#classify"):
            expect(page.locator(hidden)).to_be_hidden()
        expect(page.locator("#model")).to_contain_text("Transformer encoder, 2 × 32, span extraction, valid F1")
        expect(page.locator("#send")).to_have_text("Answer")
        [expected] = answerer.answer(QUESTIONS[1:2], [CONTEXT])
        page.fill("#context", CONTEXT)
        page.fill("#text", QUESTIONS[1])
        page.press("#text", "Enter")
        expect(page.locator("#answer")).to_have_text("sovuton")
        expect(page.locator("#marked mark")).to_have_text("sovuton")
        expect(page.locator("#marked")).to_have_text(CONTEXT)
        chips = page.locator("#starts .token")
        first = expected.tokens.index("<eos>") + 1
        expect(chips.locator(".piece")).to_have_count(len(expected.tokens) - first - 1)
        starts = chips.evaluate_all("chips => chips.map(c => Number(c.dataset.start))")
        assert starts == pytest.approx(expected.start_probabilities[first:-1], abs=1e-4)
        assert max(range(len(starts)), key=starts.__getitem__) == expected.tokens[first:-1].index("▁sovuton")
        page.screenshot(path=str(ARTIFACTS / "serve-answer.png"), full_page=True)
        page.fill("#context", "")
        page.press("#text", "Enter")
        expect(page.locator("#error")).to_have_text("give a context and a question about it")
        assert outside == []
