"""``seqlab data fetch`` against a server this test starts on 127.0.0.1: checksums, skips, corrupted
files, dropped connections. The real addresses are never contacted."""

import hashlib
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from typer.testing import CliRunner

from seqlab.cli import app
from seqlab.data import fetch as fetch_module
from seqlab.data.fetch import DATASETS, FetchError, Remote, fetch

FILES = {"tiny/a.txt": "안녕하세요\tHello\n".encode() * 500, "tiny/b.csv": b"Q,A,label\n\"x, y\",z,0\n"}


class Server:
    """Serves FILES; ``behaviour[path]`` can be 'corrupt', 'drop' (every time) or 'drop-once'."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.behaviour: dict[str, str] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                path = self.path.lstrip("/")
                server.requests[path] += 1
                if path not in FILES:
                    self.send_error(404)
                    return
                body, how = FILES[path], server.behaviour.get(path)
                if how == "corrupt":
                    body = body[:-3] + b"!!!"
                self.send_response(200)
                self.send_header("Content-Length", str(len(FILES[path])))
                self.end_headers()
                if how == "drop" or (how == "drop-once" and server.requests[path] == 1):
                    self.wfile.write(body[: len(body) // 2])  # then the connection closes
                    self.close_connection = True
                    return
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server(monkeypatch):
    # the publishers' addresses are never asked (every fetch here names the mirror); port 9 discards
    remotes = [Remote(p, "http://127.0.0.1:9/" + p, hashlib.sha256(b).hexdigest()) for p, b in FILES.items()]
    monkeypatch.setitem(DATASETS, "tiny", remotes)
    s = Server()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()  # shutdown() only stops serve_forever; this closes the listening socket


def test_fetch_writes_every_file_with_its_checksum_then_skips_them(server, tmp_path):
    paths = fetch("tiny", tmp_path, mirror=server.url, progress=False)
    assert [p.relative_to(tmp_path).as_posix() for p in paths] == list(FILES)
    assert all(p.read_bytes() == FILES[p.relative_to(tmp_path).as_posix()] for p in paths)
    fetch("tiny", tmp_path, mirror=server.url, progress=False)
    assert set(server.requests.values()) == {1}  # the second fetch downloaded nothing


def test_a_damaged_local_file_is_fetched_again(server, tmp_path):
    fetch("tiny", tmp_path, mirror=server.url, progress=False)
    (tmp_path / "tiny/a.txt").write_bytes(b"truncated")
    fetch("tiny", tmp_path, mirror=server.url, progress=False)
    assert (tmp_path / "tiny/a.txt").read_bytes() == FILES["tiny/a.txt"]
    assert server.requests["tiny/a.txt"] == 2 and server.requests["tiny/b.csv"] == 1


def test_a_corrupted_download_never_replaces_the_file(server, tmp_path):
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny/a.txt").write_bytes(b"what the user had")
    server.behaviour["tiny/a.txt"] = "corrupt"
    with pytest.raises(FetchError, match=r"tiny/a.txt: SHA-256 .* expected"):
        fetch("tiny", tmp_path, mirror=server.url, progress=False)
    assert (tmp_path / "tiny/a.txt").read_bytes() == b"what the user had"
    assert sorted(p.name for p in (tmp_path / "tiny").iterdir()) == ["a.txt"]  # no temporary files
    assert server.requests["tiny/a.txt"] == fetch_module.ATTEMPTS


def test_a_dropped_connection_is_retried(server, tmp_path):
    server.behaviour["tiny/a.txt"] = "drop-once"
    fetch("tiny", tmp_path, mirror=server.url, progress=False)
    assert (tmp_path / "tiny/a.txt").read_bytes() == FILES["tiny/a.txt"]
    assert server.requests["tiny/a.txt"] == 2


def test_a_connection_that_keeps_dropping_fails_cleanly(server, tmp_path):
    server.behaviour["tiny/b.csv"] = "drop"
    with pytest.raises(FetchError, match="tiny/b.csv: connection failed"):
        fetch("tiny", tmp_path, mirror=server.url, progress=False)
    assert (tmp_path / "tiny/a.txt").read_bytes() == FILES["tiny/a.txt"]  # what came before is kept
    assert sorted(p.name for p in (tmp_path / "tiny").iterdir()) == ["a.txt"]


def test_missing_file_and_unknown_dataset_are_clear_errors(server, tmp_path, monkeypatch):
    monkeypatch.setitem(DATASETS, "gone", [Remote("tiny/missing.txt", "", "0" * 64)])
    with pytest.raises(FetchError, match="missing.txt: HTTP 404"):
        fetch("gone", tmp_path, mirror=server.url, progress=False)
    with pytest.raises(FetchError, match="unknown dataset 'nope' .*multi30k"):
        fetch("nope", tmp_path)


def test_cli_fetch_fills_the_data_directory(server, tmp_path, monkeypatch):
    runner = CliRunner()
    monkeypatch.setenv("SEQLAB_DATA", str(tmp_path / "from-env"))
    result = runner.invoke(app, ["data", "fetch", "tiny", "--mirror", server.url])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "from-env/tiny/b.csv").read_bytes() == FILES["tiny/b.csv"]
    result = runner.invoke(app, ["data", "fetch", "tiny", "--dest", str(tmp_path / "d"), "--mirror", server.url])
    assert result.exit_code == 0 and (tmp_path / "d/tiny/a.txt").exists()
    server.behaviour["tiny/a.txt"] = "corrupt"
    result = runner.invoke(app, ["data", "fetch", "tiny", "--dest", str(tmp_path / "e"), "--mirror", server.url])
    assert result.exit_code == 2 and "SHA-256" in result.output


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_published_checksums_match_the_shared_copies(shared_data, name):
    if not all((shared_data / remote.path).exists() for remote in DATASETS[name]):
        pytest.skip(f"{name} is not among the shared data files")
    for remote in DATASETS[name]:
        assert remote.check(*fetch_module._measure(shared_data / remote.path)) is None, remote.path


def test_a_corpus_without_a_checksum_is_checked_by_its_lines_and_words(server, tmp_path, monkeypatch):
    body = FILES["tiny/a.txt"]
    counts = (body.count(b"\n"), len(body.split()))
    monkeypatch.setitem(DATASETS, "counted", [Remote("tiny/a.txt", "http://127.0.0.1:9/tiny/a.txt", counts=counts)])
    (path,) = fetch("counted", tmp_path, server.url, progress=False)
    assert path.read_bytes() == body
    fetch("counted", tmp_path, server.url, progress=False)
    assert server.requests["tiny/a.txt"] == 1  # already there, by its counts
    monkeypatch.setitem(DATASETS, "counted", [Remote("tiny/a.txt", "", counts=(counts[0] + 1, counts[1]))])
    with pytest.raises(FetchError, match=r"lines and .* words, expected"):
        fetch("counted", tmp_path / "other", server.url, progress=False)
    assert not (tmp_path / "other" / "tiny" / "a.txt").exists()


def test_counting_does_not_depend_on_where_the_chunks_break():
    text = b"the cat sat\non the\n\n  mat .\nno newline at the end"
    for size in (1, 2, 3, 7, len(text)):
        measure = fetch_module._Measure()
        for start in range(0, len(text), size):
            measure.update(text[start : start + size])
        assert measure.result() == (hashlib.sha256(text).hexdigest(), (5, 12))
