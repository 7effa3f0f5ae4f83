"""``seqlab serve`` on a word-vector run: neighbours and analogies through the JSON API and in a real browser."""

import httpx
import numpy as np
import pytest
from test_server import ARTIFACTS, CHROMIUM, Served, browser_page

from seqlab.config import parse_config
from seqlab.server import Limits, create_app
from seqlab.vectors import load
from seqlab.vectors.config import VectorsConfig
from seqlab.vectors.run import train_vectors

GROUPS = [["cat", "dog", "horse", "cow", "sheep", "goat"], ["red", "blue", "green", "yellow", "white", "black"],
          ["사과", "바나나", "포도", "딸기", "수박", "복숭아"]]  # sentences draw their words from one group each


@pytest.fixture(scope="module")
def vectors_run(tmp_path_factory):
    """A tiny skip-gram run (dim 8) on 400 sentences of 8 words, some capitalised (the run lowercases)."""
    rng = np.random.default_rng(0)
    lines = [" ".join(str(w).capitalize() if rng.random() < 0.2 else str(w) for w in rng.choice(GROUPS[i % 3], size=8))
             for i in range(400)]
    data = tmp_path_factory.mktemp("vectors-data")
    (data / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    raw = {"data": {"corpora": [{"format": "lines", "path": "corpus.txt"}]}, "words": {"lowercase": True},
           "train": {"method": "skipgram", "dim": 8, "window": 2, "min_count": 1, "epochs": 2, "batch_size": 64,
                     "sample": 0}}
    run = tmp_path_factory.mktemp("vectors") / "run"
    train_vectors(parse_config(raw, schema=VectorsConfig), run, data, progress=False)
    return run


@pytest.fixture(scope="module")
def served(vectors_run):
    with Served(vectors_run, Limits(max_top=12, max_input_chars=20)) as s:
        yield s


@pytest.fixture(scope="module")
def vectors(vectors_run):
    return load(vectors_run)


def post(served: Served, path: str, body: object) -> httpx.Response:
    return httpx.post(f"{served.url}{path}", json=body, timeout=30)


def test_info_says_vectors(served, vectors_run, vectors):
    response = httpx.get(f"{served.url}/api/info")
    info = response.json()
    assert info["kind"] == "vectors" and info["run"] == "run"
    assert len(vectors) == 18 and (info["method"], info["dim"], info["vocab_size"]) == ("skipgram", 8, 18)
    assert info["corpus_words"] == 400 * 8 and info["lowercase"] is True and info["train"]["window"] == 2
    assert info["limits"]["max_top"] == 12
    assert str(vectors_run.parent) not in response.text  # no local path
    assert httpx.get(f"{served.url}/healthz").json() == {"status": "ok"}


@pytest.mark.parametrize(("word", "key"), [("dog", "dog"), ("Dog", "dog"), ("  사과 ", "사과")])
def test_neighbours_are_those_of_the_python_api(served, vectors, word, key):
    response = post(served, "/api/similar", {"word": word, "top": 5})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["word"] == key
    assert [(n["word"], n["cosine"]) for n in body["neighbours"]] == vectors.most_similar(word, 5)
    default = post(served, "/api/similar", {"word": word}).json()["neighbours"]
    assert [(n["word"], n["cosine"]) for n in default] == vectors.most_similar(word, 10)
    everyone = post(served, "/api/similar", {"word": word, "top": 12}).json()["neighbours"]
    assert len(everyone) == 12 and key not in {n["word"] for n in everyone}


def test_analogy_is_that_of_the_python_api(served, vectors):
    response = post(served, "/api/analogy", {"a": "Cat", "b": "dog", "c": "사과", "top": 4})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["a"], body["b"], body["c"]) == ("cat", "dog", "사과")
    assert [(n["word"], n["cosine"]) for n in body["answers"]] == vectors.analogy("cat", "dog", "사과", 4)
    assert len(post(served, "/api/analogy", {"a": "cat", "b": "dog", "c": "cow"}).json()["answers"]) == 5


@pytest.mark.parametrize(("path", "body", "word"), [
    ("/api/similar", {"word": "unicorn"}, "'unicorn'"),
    ("/api/similar", {"word": "고양이"}, "'고양이'"),
    ("/api/analogy", {"a": "cat", "b": "dragon", "c": "red"}, "'dragon'"),
])
def test_a_word_not_in_the_vocabulary_is_a_404_naming_it(served, path, body, word):
    response = post(served, path, body)
    assert response.status_code == 404
    assert response.json() == {"error": f"{word} is not in the vocabulary (18 words)"}


@pytest.mark.parametrize(("path", "body", "status", "message"), [
    ("/api/similar", {"word": "dog", "top": 0}, 422, "top: Input should be greater than or equal to 1"),
    ("/api/similar", {"word": "dog", "top": 13}, 422, "top 13; at most 12"),
    ("/api/similar", {"word": "dog", "top": "many"}, 422, "top: Input should be a valid integer"),
    ("/api/analogy", {"a": "cat", "b": "dog", "c": "cow", "top": 13}, 422, "top 13; at most 12"),
    ("/api/similar", {"word": ""}, 422, "word: String should have at least 1 character"),
    ("/api/similar", {"top": 3}, 422, "word: Field required"),
    ("/api/similar", {"word": "dog", "topn": 3}, 422, "topn: Extra inputs are not permitted"),
    ("/api/analogy", {"a": "cat", "b": "dog"}, 422, "c: Field required"),
    ("/api/similar", {"word": "가" * 21}, 413, "a word of 21 characters; at most 20"),
])
def test_bad_requests_get_a_clear_json_error(served, path, body, status, message):
    response = post(served, path, body)
    assert response.status_code == status
    assert message in response.json()["error"]


def test_a_vectors_run_has_no_translate_route(served):
    response = post(served, "/api/translate", {"inputs": ["dog"]})
    assert response.status_code == 404 and response.json() == {"error": "Not Found: POST /api/translate"}
    paths = set(httpx.get(f"{served.url}/openapi.json").json()["paths"])
    assert {"/api/similar", "/api/analogy", "/api/info", "/healthz"} <= paths and "/api/translate" not in paths


def test_a_vectors_run_loads_no_translator(vectors_run, monkeypatch):
    import seqlab.export

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a vectors run loaded a translator")

    monkeypatch.setattr(seqlab.export, "load_translator", refuse)
    assert any(getattr(r, "path", None) == "/api/similar" for r in create_app(vectors_run).routes)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium: the browser test is skipped (apt-get install chromium)")
def test_the_neighbours_page_in_a_real_browser(served, vectors):
    """Type a word, see its neighbours; click one, see its; solve an analogy; a screenshot is kept."""
    from playwright.sync_api import expect

    with browser_page(served.url) as (page, outside):
        expect(page.locator("body[data-ready=true][data-kind=vectors]")).to_have_count(1)
        expect(page.locator("#conversation")).to_be_hidden()
        expect(page.locator("#model")).to_contain_text("skip-gram word vectors, dim 8, 18 words")
        page.fill("#word", "사과")
        page.fill("#top", "5")
        page.press("#word", "Enter")
        table = page.locator("#neighbours")
        expected = vectors.most_similar("사과", 5)
        expect(table.locator("td.word")).to_have_text([w for w, _ in expected])
        expect(table.locator("caption")).to_have_text("nearest to “사과”")
        cosines = table.locator("td.cosine").evaluate_all("cells => cells.map(c => Number(c.dataset.cosine))")
        assert cosines == pytest.approx([c for _, c in expected])
        fonts = "async () => { await document.fonts.ready; return document.fonts.check('16px NanumGothic', '사과'); }"
        assert page.evaluate(fonts)  # Hangul is drawn with the page's own font, not boxes
        # a neighbour is a link to its own neighbours
        first = expected[0][0]
        table.locator("td.word").first.click()
        expect(table.locator("caption")).to_have_text(f"nearest to “{first}”")
        expect(table.locator("td.word")).to_have_text([w for w, _ in vectors.most_similar(first, 5)])
        # the analogy row
        for box, word in zip("abc", ["cat", "dog", "red"]):
            page.fill(f"#{box}", word)
        page.click("#solve")
        expect(page.locator("#answers td.word")).to_have_text([w for w, _ in vectors.analogy("cat", "dog", "red", 5)])
        page.screenshot(path=str(ARTIFACTS / "serve-vectors.png"), full_page=True)
        # a word not in the vocabulary: the error, and no stale table
        page.fill("#word", "unicorn")
        page.press("#word", "Enter")
        expect(page.locator("#vectors-error")).to_have_text("'unicorn' is not in the vocabulary (18 words)")
        expect(table.locator("tbody tr")).to_have_count(0)
        assert outside == [], f"the page fetched from outside the app: {outside}"
    assert (ARTIFACTS / "serve-vectors.png").stat().st_size > 10_000
