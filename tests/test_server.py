"""``seqlab serve``: the JSON API (schema, limits, errors, 50 concurrent clients) and the page in a real browser."""

import asyncio
import contextlib
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from conftest import KOREAN_PAIRS, give_search

import seqlab
from seqlab.decoding import DecodeOptions
from seqlab.server import Limits, create_app

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Served:
    """A real uvicorn server on 127.0.0.1 in a thread, for as long as the ``with`` block lasts."""

    def __init__(self, run_dir: Path, limits: Limits | None = None) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        config = uvicorn.Config(create_app(run_dir, limits or Limits()), log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)

    def __enter__(self) -> "Served":
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.socket.close()


@contextlib.contextmanager
def browser_page(url: str) -> Iterator[tuple[Any, list[str]]]:
    """A page of Debian's chromium (headless, driven by playwright, asking nothing of the network) opened at
    ``url``, and the list of the addresses it fetched from outside ``url``."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--no-first-run"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 800})
            outside: list[str] = []
            page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(url) else None)
            page.goto(url)
            yield page, outside
        finally:
            browser.close()


@pytest.fixture(scope="module")
def served(korean_chatbot):
    with Served(korean_chatbot, Limits(max_inputs=8, max_input_chars=50, max_beam=6, chunk=2)) as s:
        yield s


def post(served: Served, body: object) -> httpx.Response:
    return httpx.post(f"{served.url}/api/translate", json=body, timeout=30)


def test_health_and_info(served, korean_chatbot):
    assert httpx.get(f"{served.url}/healthz").json() == {"status": "ok"}
    info = httpx.get(f"{served.url}/api/info").json()
    assert info["kind"] == "translate"  # trained from a TSV of pairs, not a CSV of questions and answers
    assert info["attention"] == {"layers": 1, "heads": 4}
    assert info["config"]["model"]["d_model"] == 64
    assert info["shape"] == "Transformer 1+1 layers, d_model 64"
    assert info["metrics"]["valid"]["exact_match"] == 100.0
    assert info["limits"]["max_inputs"] == 8
    assert info["search"] == {"beam": 1, "length_penalty": 0.0}  # the config says none: greedy


def test_translate_answers_as_the_python_api_does(served, korean_chatbot):
    questions = [q for q, _ in KOREAN_PAIRS]
    response = post(served, {"inputs": questions})  # 5 inputs, decoded in chunks of 2
    assert response.status_code == 200, response.text
    outputs = response.json()["outputs"]
    assert [o["input"] for o in outputs] == questions
    assert [o["hypotheses"][0]["text"] for o in outputs] == [a for _, a in KOREAN_PAIRS]
    beam = post(served, {"inputs": ["배고파"], "beam": 4, "nbest": 3, "length_penalty": 0.6}).json()
    expected = seqlab.load(korean_chatbot).generate(["배고파"], beam=4, nbest=3, length_penalty=0.6)[0]
    hypotheses = beam["outputs"][0]["hypotheses"]
    assert [h["text"] for h in hypotheses] == [t.text for t in expected]
    assert [h["score"] for h in hypotheses] == pytest.approx([t.score for t in expected], abs=1e-5)
    assert hypotheses[0]["score"] >= hypotheses[1]["score"] >= hypotheses[2]["score"]


def test_a_runs_own_search_is_the_requests_and_the_pages_unless_they_say(korean_chatbot, tmp_path):
    """A run whose config says ``eval.beam: 3`` and ``eval.length_penalty: 0.6`` (its search chosen on valid)
    answers a request that gives no search with that search, one that asks ``beam: 1`` greedily; ``/api/info``
    says it, and the page opens on it."""
    run = Path(shutil.copytree(korean_chatbot, tmp_path / "run"))
    give_search(run, 3, 0.6)
    model = seqlab.load(korean_chatbot)
    with Served(run) as own:
        assert httpx.get(f"{own.url}/api/info").json()["search"] == {"beam": 3, "length_penalty": 0.6}
        asked: list[tuple[dict[str, int], dict[str, Any]]] = [
            ({}, {"beam": 3, "length_penalty": 0.6}), ({"beam": 1}, {"beam": 1}),
            ({"beam": 2}, {"beam": 2, "length_penalty": 0.6})]
        for body, expected in asked:
            answer = post(own, {"inputs": ["배고파"], **body}).json()["outputs"][0]["hypotheses"][0]
            assert answer["score"] == pytest.approx(model.generate(["배고파"], **expected)[0][0].score, abs=1e-5), body
        if CHROMIUM:
            from playwright.sync_api import expect

            with browser_page(own.url) as (page, _):
                expect(page.locator("body[data-ready=true]")).to_have_count(1)
                expect(page.locator("input[name=mode][value=beam]")).to_be_checked()
                expect(page.locator("#beam")).to_have_value("3")
                page.fill("#text", "배고파")
                page.press("#text", "Enter")
                expect(page.locator("#nbest li")).to_have_count(3)
                page.check("input[name=mode][value=greedy]")
                page.fill("#text", "배고파")
                page.press("#text", "Enter")
                expect(page.locator("#transcript li.output")).to_have_count(2)
                expect(page.locator("#nbest li")).to_have_count(1)


def test_attention_on_request(served):
    plain = post(served, {"inputs": ["고마워"]}).json()["outputs"][0]["hypotheses"][0]
    assert "attention" not in plain
    h = post(served, {"inputs": ["고마워"], "attention": True}).json()["outputs"][0]["hypotheses"][0]
    weights = h["attention"]  # (layers, heads, output tokens + <eos>, source tokens)
    assert (len(weights), len(weights[0])) == (1, 4)
    assert len(weights[0][0]) == len(h["tokens"]) + 1 and len(weights[0][0][0]) == len(h["source_tokens"])
    assert h["source_tokens"] == ["고", "마", "워", "<eos>"]
    for head in weights[0]:
        assert all(abs(sum(row) - 1) < 1e-3 for row in head)


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"inputs": []}, 422, "inputs: List should have at least 1 item"),
    ({"inputs": ["a"] * 9}, 413, "9 inputs; at most 8 per request"),
    ({"inputs": ["ok", "가" * 51]}, 413, "inputs[1] has 51 characters; at most 50"),
    ({"inputs": ["a"], "beam": 7}, 422, "beam 7; at most 6"),
    ({"inputs": ["a"], "sample": True, "num_samples": 7}, 422, "num_samples 7; at most 6"),
    ({"inputs": ["a"], "beam": 0}, 422, "beam: Input should be greater than or equal to 1"),
    ({"inputs": ["a"], "beam": 3, "sample": True}, 422, "choose beam search (beam > 1) or sampling, not both"),
    ({"inputs": ["a"], "nbest": 2}, 422, "nbest (2) cannot exceed the beam size (1)"),
    ({"inputs": ["a"], "beams": 3}, 422, "beams: Extra inputs are not permitted"),
    ({"inputs": "배고파"}, 422, "inputs: Input should be a valid list"),
    ({"text": ["a"]}, 422, "inputs: Field required"),
])
def test_bad_requests_get_a_clear_json_error(served, body, status, message):
    response = post(served, body)
    assert response.status_code == status
    assert message in response.json()["error"]


def test_malformed_json_and_unknown_paths(served):
    response = httpx.post(f"{served.url}/api/translate", content=b'{"inputs": [', headers={"content-type": "application/json"})
    assert response.status_code == 422 and "JSON decode error" in response.json()["error"]
    assert httpx.get(f"{served.url}/static/../../etc/passwd").status_code == 404
    assert httpx.get(f"{served.url}/static/secret.py").json() == {"error": "no such file: secret.py"}
    # the routes of a word-vector run are not there, and a missing route answers in JSON too
    response = httpx.post(f"{served.url}/api/similar", json={"word": "배고파"})
    assert response.status_code == 404 and response.json() == {"error": "Not Found: POST /api/similar"}


def test_openapi_schema_describes_the_api(served):
    schema = httpx.get(f"{served.url}/openapi.json").json()
    assert {"/api/translate", "/api/info", "/healthz"} <= set(schema["paths"])
    assert not {"/api/similar", "/api/analogy"} & set(schema["paths"])
    request = schema["components"]["schemas"]["TranslateRequest"]
    assert {"inputs", "attention", "beam", "nbest", "sample", "temperature", "top_k", "top_p"} <= set(request["properties"])
    assert request["required"] == ["inputs"]
    for name in ("beam", "length_penalty"):  # the run's own search where a request leaves them out, as --help says
        assert "default" not in request["properties"][name]
        default = DecodeOptions.model_fields[name].default
        assert request["properties"][name]["description"].endswith(
            f"left out: the run's eval.{name} ({default} unless its config says)")
    assert request["properties"]["nbest"]["default"] == 1


def test_fifty_concurrent_clients_are_all_answered_correctly(served, korean_chatbot):
    translator = seqlab.load(korean_chatbot)
    questions = [q for q, _ in KOREAN_PAIRS]
    expected = {beam: dict(zip(questions, translator.translate(questions, beam=beam))) for beam in (1, 2, 3)}

    async def one(client: httpx.AsyncClient, i: int) -> list[bool]:
        inputs = [questions[(i + k) % len(questions)] for k in range(1 + i % 3)]  # 1-3 inputs, beam 1-3
        response = await client.post(f"{served.url}/api/translate", json={"inputs": inputs, "beam": 1 + i % 3})
        assert response.status_code == 200, response.text
        outputs = response.json()["outputs"]
        assert [o["input"] for o in outputs] == inputs
        return [o["hypotheses"][0]["text"] == expected[1 + i % 3][o["input"]] for o in outputs]

    async def everyone() -> list[list[bool]]:
        async with httpx.AsyncClient(timeout=60) as client:
            return await asyncio.gather(*(one(client, i) for i in range(50)))

    results = asyncio.run(everyone())
    assert len(results) == 50 and sum(map(len, results)) == sum(1 + i % 3 for i in range(50))
    assert all(all(ok) for ok in results)


def test_a_request_over_its_time_gets_503(korean_chatbot):
    with Served(korean_chatbot, Limits(timeout_s=1e-4)) as slow:
        response = post(slow, {"inputs": ["배고파"] * 8, "beam": 5})
        assert response.status_code == 503
        assert "took longer than 0.0001 s" in response.json()["error"]
        assert httpx.get(f"{slow.url}/healthz").status_code == 200  # and the server carries on


def test_serve_binds_to_localhost_by_default():
    from typer.core import TyperGroup
    from typer.main import get_command

    from seqlab.cli import app

    command = get_command(app)
    assert isinstance(command, TyperGroup)
    params = {p.name: p.default for p in command.commands["serve"].params}
    assert params["host"] == "127.0.0.1"


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium: the browser test is skipped (apt-get install chromium)")
def test_the_page_in_a_real_browser(served):
    """Type a question, get the model's answer, see the heatmap, switch head; a screenshot is kept."""
    from playwright.sync_api import expect

    with browser_page(served.url) as (page, outside):
        expect(page.locator("body[data-ready=true]")).to_have_count(1)
        page.fill("#text", "배고파")
        page.press("#text", "Enter")
        expect(page.locator("#transcript li.output")).to_have_text(["뭐 좀 드세요."])
        expect(page.locator("#nbest li")).to_have_count(1)
        table = page.locator("#heatmap table")
        expect(table).to_have_attribute("data-head", "0")
        output_rows = len("뭐 좀 드세요.") + 1  # char tokens + <eos>
        expect(table.locator("tbody tr")).to_have_count(output_rows)
        expect(table.locator("thead th")).to_have_count(1 + len("배고파") + 1)
        head0 = table.locator("td").evaluate_all("cells => cells.map(c => c.dataset.weight)")
        page.select_option("#head", "2")
        expect(table).to_have_attribute("data-head", "2")
        head2 = page.locator("#heatmap td").evaluate_all("cells => cells.map(c => c.dataset.weight)")
        assert len(head2) == len(head0) and head2 != head0
        # Hangul is drawn with the page's own font, not boxes
        assert page.evaluate("async () => { await document.fonts.ready; "
                             "return document.fonts.check('16px NanumGothic', '배고파'); }")
        page.screenshot(path=str(ARTIFACTS / "serve-page.png"), full_page=True)
        # beam search from the options: the n-best list grows
        page.check("input[name=mode][value=beam]")
        page.fill("#beam", "3")
        page.fill("#text", "심심해")
        page.click("#send")
        expect(page.locator("#transcript li.output").last).to_have_text("같이 놀아요!")
        expect(page.locator("#nbest li")).to_have_count(3)
        # a minimum length from the options: the answer runs on past its <eos>
        page.fill("#min-length", "15")
        page.fill("#text", "배고파")
        page.click("#send")
        expect(page.locator("#transcript li.output")).to_have_count(3)
        assert len(page.locator("#transcript li.output").last.inner_text()) >= 15
        assert outside == [], f"the page fetched from outside the app: {outside}"
    assert (ARTIFACTS / "serve-page.png").stat().st_size > 10_000
