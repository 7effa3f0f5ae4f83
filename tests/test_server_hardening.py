"""``seqlab serve`` under abuse: limits checked before any work (the body's size at the ASGI layer first), a
bounded queue (503 + Retry-After), a deadline that stops decoding between steps, no local paths, no CDN, empty
inputs and cut inputs said so. The figures under load are benchmarks/load.py's (docs/reliability.md)."""

import asyncio
import time

import httpx
import pytest
from test_server import Served, post
from typer.testing import CliRunner

import seqlab
import seqlab.export
from seqlab.cli import app
from seqlab.decoding import Cancelled, DecodeOptions
from seqlab.server import Limits, RequestError
from seqlab.server.app import Worker


@pytest.fixture(scope="module")
def served(korean_chatbot):
    with Served(korean_chatbot, Limits(max_body_bytes=4096, max_input_chars=50)) as s:
        yield s


@pytest.mark.parametrize(("body", "message"), [
    ({"inputs": ["a"], "sample": True, "seed": 2**70}, "seed: Input should be less than or equal to 4294967295"),
    ({"inputs": ["a"], "sample": True, "seed": -1}, "seed: Input should be greater than or equal to 0"),
    ({"inputs": ["a"], "sample": True, "temperature": 1e-300}, "temperature 1e-300: 0 (greedy) or at least 0.01"),
    ({"inputs": ["a"], "top_p": 0}, "top_p: Input should be greater than 0"),
    ({"inputs": ["a"], "beam": 2**70}, "beam 1180591620717411303424; at most 16"),
    ({"inputs": ["a"], "max_length": 2**70}, "max_length 1180591620717411303424; at most 256"),
    ({"inputs": [1]}, "inputs.0: Input should be a valid string"),
    ({"inputs": ["a"], "attention": "yes please"}, "attention: Input should be a valid boolean"),
    ({"inputs": ["a"], "a\nb": 1}, "'a\\nb': Extra inputs are not permitted"),  # found by benchmarks/fuzz.py
])
def test_every_bad_value_is_a_422_naming_its_field(served, body, message):
    response = post(served, body)
    assert response.status_code == 422, response.text
    assert message in response.json()["error"] and "\n" not in response.json()["error"]


def test_nan_and_infinity_in_the_json_are_refused(served):
    for literal in ("NaN", "Infinity", "-Infinity"):  # Python's json reads them; they are not JSON
        response = httpx.post(f"{served.url}/api/translate", headers={"content-type": "application/json"},
                              content=f'{{"inputs": ["a"], "sample": true, "temperature": {literal}}}')
        assert response.status_code == 422 and "temperature" in response.json()["error"], literal


def test_huge_but_valid_numbers_do_not_reach_the_model_as_overflows(served):
    body = {"inputs": ["배고파"], "length_ratio": 1e300, "length_extra": 2**62, "sample": True, "top_k": 2**62,
            "seed": 2**32 - 1}
    response = post(served, body)
    assert response.status_code == 200, response.text


def test_a_body_over_the_limit_is_refused_before_it_is_read(served):
    response = post(served, {"inputs": ["가" * 40] * 200})  # refused by its size before its inputs are counted
    assert response.status_code == 413
    assert response.json() == {"error": f"the request body has {len(response.request.content)} bytes; at most 4096"}

    def chunks():  # no Content-Length: the body streams in until it passes the limit
        for _ in range(100):
            yield b" " * 100

    streamed = httpx.post(f"{served.url}/api/translate", content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413 and streamed.json()["error"] == "the request body has over 4096 bytes; at most 4096"
    parts = [b'{"inputs": ', '["배고파"]}'.encode()]  # streamed, within the limit: answered
    small = httpx.post(f"{served.url}/api/translate", content=iter(parts), headers={"content-type": "application/json"})
    assert small.status_code == 200, small.text


def test_empty_and_blank_inputs_give_empty_outputs_in_place(served, korean_chatbot):
    response = post(served, {"inputs": ["", "배고파", "  \t", "고마워"], "beam": 3, "nbest": 2})
    assert response.status_code == 200, response.text
    outputs = response.json()["outputs"]
    expected = seqlab.load(korean_chatbot).translate(["배고파", "고마워"], beam=3)
    assert [o["hypotheses"][0]["text"] for o in outputs] == ["", expected[0], "", expected[1]]
    assert outputs[0]["hypotheses"] == [{"text": "", "score": 0.0, "log_prob": 0.0, "tokens": [], "source_tokens": []}]
    assert seqlab.load(korean_chatbot).translate(["", " ", "배고파"]) == ["", "", expected[0]]


def test_the_command_line_keeps_blank_lines_in_place(korean_chatbot, tmp_path):
    lines = tmp_path / "in.txt"
    lines.write_text("배고파\n\n   \n고마워\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["translate", str(korean_chatbot), "-i", str(lines)])
    assert result.exit_code == 0, result.output
    out = result.stdout.split("\n")
    assert len(out) == 5 and out[1:3] == ["", ""] and out[0] and out[3] and out[4] == ""
    empty = CliRunner().invoke(app, ["translate", str(korean_chatbot), ""])
    assert empty.exit_code == 0 and empty.stdout == "\n"


def test_a_cut_input_is_marked_and_warned_of(served, korean_chatbot, tmp_path):
    long = "배고파 " * 10  # 39 characters; the chatbot reads 15
    outputs = post(served, {"inputs": [long, "배고파"]}).json()["outputs"]
    assert [o["truncated"] for o in outputs] == [True, False]
    lines = tmp_path / "in.txt"
    lines.write_text(f"배고파\n{long}\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["translate", str(korean_chatbot), "-i", str(lines)])
    assert result.exit_code == 0
    assert f"warning: {lines}:2: longer than the 15 tokens the model reads; only the first 15 were read" in result.stderr
    assert f"{lines}:1" not in result.stderr


def test_info_shows_no_local_paths_and_there_is_no_cdn_page(served, korean_chatbot):
    info = httpx.get(f"{served.url}/api/info").text
    assert str(korean_chatbot.parent) not in info and "/tmp" not in info and "path" not in info
    assert httpx.get(f"{served.url}/docs").status_code == 404
    assert httpx.get(f"{served.url}/redoc").status_code == 404
    assert httpx.get(f"{served.url}/openapi.json").status_code == 200


def test_a_full_queue_answers_503_with_retry_after():
    async def scenario() -> None:
        worker = Worker(Limits(max_queue=2))
        release = asyncio.Event()
        held = [asyncio.create_task(worker.serve(lambda stop: release.wait(), "")) for _ in range(2)]
        await asyncio.sleep(0)
        with pytest.raises(RequestError) as refused:
            await worker.serve(lambda stop: asyncio.sleep(0), "")
        assert refused.value.status == 503 and refused.value.headers == {"Retry-After": "1"}
        assert "the server is busy (2 requests in work)" in str(refused.value)
        release.set()
        await asyncio.gather(*held)
        assert worker.in_work == 0
        await worker.serve(lambda stop: asyncio.sleep(0), "")  # room again

    asyncio.run(scenario())


def test_a_timed_out_request_stops_decoding_at_its_next_step(korean_chatbot, monkeypatch):
    translator = seqlab.load(korean_chatbot)
    step, started = translator.model.step, []

    def slow_step(*args, **kwargs):  # 50 ms a step: the request's 8 inputs at beam 16 take far over its 0.1 s
        started.append(time.monotonic())
        time.sleep(0.05)
        return step(*args, **kwargs)

    monkeypatch.setattr(translator.model, "step", slow_step)
    monkeypatch.setattr(seqlab.export, "load_translator", lambda *args, **kwargs: translator)
    with Served(korean_chatbot, Limits(timeout_s=0.1, chunk=8)) as s:
        response = post(s, {"inputs": ["배고파 고마워 잘자"] * 8, "beam": 16})
        answered = time.monotonic()
        assert response.status_code == 503 and "took longer than 0.1 s" in response.json()["error"]
        time.sleep(0.3)
        assert sum(t > answered for t in started) <= 1  # the step in flight at the deadline, at most
        started.clear()
        assert post(s, {"inputs": ["배고파"]}).status_code in (200, 503)  # the worker is free for the next one
        assert started  # and decodes it


def test_a_search_asks_stop_before_every_step(korean_chatbot):
    translator = seqlab.load(korean_chatbot)
    calls = []

    def stop() -> bool:
        calls.append(1)
        return len(calls) > 3

    with pytest.raises(Cancelled):
        translator.generate(["배고파"], DecodeOptions(beam=4), stop=stop)
    assert len(calls) == 4  # start, two steps, and the fourth ask stops it
    assert translator.generate(["배고파"], DecodeOptions(beam=4), stop=lambda: False)[0][0].text


def test_a_classifier_answers_blank_texts_with_nothing_and_marks_cut_ones(tiny_classifier, tmp_path):
    from seqlab.predictors.classifier import load as load_classifier

    classifier = load_classifier(tiny_classifier)
    long = " ".join(["word"] * 20)  # 20 words; the classifier reads 14
    predictions = classifier.classify(["", long, "  \t", "hello there"])
    assert [p.label for p in predictions][::2] == ["", ""] and predictions[1].label and predictions[3].label
    assert predictions[0].probabilities == {} and predictions[0].tokens == []
    assert [p.truncated for p in predictions] == [False, True, False, False]
    with Served(tiny_classifier) as s:
        outputs = httpx.post(f"{s.url}/api/classify", json={"inputs": [long, " "]}, timeout=30).json()["outputs"]
    assert [(o["truncated"], o["label"]) for o in outputs] == [(True, predictions[1].label), (False, "")]
    lines = tmp_path / "in.txt"
    lines.write_text(f"hello there\n\n{long}\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["classify", str(tiny_classifier), "-i", str(lines)])
    assert result.exit_code == 0, result.output
    assert result.stdout.split("\n")[1] == "" and len(result.stdout.split("\n")) == 4
    assert f"warning: {lines}:3: longer than the 14 tokens the model reads; only the first 14 were read" in result.stderr
