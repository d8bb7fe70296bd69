"""Large downloads behave (issue #39 item 4), through a real HTTP server on 127.0.0.1 and the real download,
verify and unpack code: resume after a cut (HTTP Range, or afresh where the server ignores it), the checksum
verified before anything is unpacked, one line for a 404, a stall, a truncated body or a corrupted byte, a
progress line with bytes and rate, and ``data fetch --dry-run``."""
import hashlib
import io
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from replicate.cli.main import main
from replicate.core.errors import ReplicateError
from replicate.data import archives, store

MEMBER = bytes(range(256)) * 4096  # 1 MiB: several chunks of the download loop


def _zip_bytes() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("inner/data.bin", MEMBER)
    return buffer.getvalue()


ARCHIVE = _zip_bytes()


class Server:
    """An HTTP server with a behaviour per request: ``whole``, ``cut`` (declares the whole length, sends half,
    closes), ``stall`` (sends nothing), ``missing`` (404), ``no_range`` (ignores Range), ``corrupt`` (one byte
    flipped). Records each request's Range header."""

    def __init__(self):
        self.mode, self.ranges, self.if_ranges = "whole", [], []
        self.redirect, self.version = False, None  # answer /toy.zip with a 302; send this Last-Modified
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if outer.redirect and self.path == "/toy.zip":
                    self.send_response(302)
                    self.send_header("Location", "/real/toy.zip")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                outer.ranges.append(self.headers.get("Range"))
                outer.if_ranges.append(self.headers.get("If-Range"))
                body = ARCHIVE
                if outer.mode == "missing":
                    self.send_error(404, "Not Found")
                    return
                if outer.mode == "stall":
                    time.sleep(3)
                    return
                if outer.mode == "corrupt":
                    body = body[:100] + bytes([body[100] ^ 1]) + body[101:]
                start = 0
                asked = self.headers.get("Range")
                stale = self.headers.get("If-Range") not in (None, outer.version)  # changed since: the whole body
                if asked and outer.mode != "no_range" and not stale:
                    start = int(asked.split("=")[1].rstrip("-"))
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(body) - start))
                if outer.version:
                    self.send_header("Last-Modified", outer.version)
                self.end_headers()
                sent = body[start:]
                self.wfile.write(sent[:len(sent) // 2] if outer.mode == "cut" else sent)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/toy.zip"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def served(monkeypatch, tmp_path):
    """A toy dataset whose official archive the local server publishes (the test-only override of the catalogue),
    an empty data folder, no local copy."""
    server = Server()
    spec = store.DatasetFiles(
        name="toydl", files=(store.FileSpec("data.bin", hashlib.sha256(MEMBER).hexdigest(), gzipped=False),),
        archives=(store.Archive("toy.zip", (server.url,), (("inner/data.bin", "data.bin"),),
                                sha256=hashlib.sha256(ARCHIVE).hexdigest()),),
        size="1 MB")
    store.spec("mnist")  # the catalogue is loaded before the toy entry goes in
    monkeypatch.setitem(store._REGISTRY, "toydl", spec)
    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("REPLICATE_DATA_FROM", "none")
    monkeypatch.setattr(archives, "TIMEOUT_S", 1)
    yield server
    server.close()


def _files(tmp_path):
    return sorted(p.relative_to(tmp_path / "data").as_posix() for p in (tmp_path / "data").rglob("*") if p.is_file())


def test_a_cut_download_resumes_where_it_stopped(served, tmp_path, capsys):
    served.mode = "cut"
    with pytest.raises(ReplicateError) as err:
        store.fetch("toydl")
    part = tmp_path / "data" / "toydl" / ".download" / "toy.zip.part"
    kept = part.stat().st_size  # the half sent, less the piece the broken connection cut (archives.HTTP_CHUNK)
    assert len(ARCHIVE) // 2 - archives.HTTP_CHUNK < kept <= len(ARCHIVE) // 2
    assert f"connection closed after {kept:,} of {len(ARCHIVE):,} bytes" in str(err.value)
    assert "the next fetch resumes there" in str(err.value)
    assert _files(tmp_path) == ["toydl/.download/toy.zip.part"]  # nothing half-written among the data
    served.mode = "whole"
    store.fetch("toydl")
    assert served.ranges[-1] == f"bytes={kept}-"  # asked only for the rest
    assert (tmp_path / "data" / "toydl" / "data.bin").read_bytes() == MEMBER
    assert _files(tmp_path) == ["toydl/data.bin"]
    progress = capsys.readouterr().err
    assert "toydl archive toy.zip: 1.0 of 1.0 MB" in progress and "MB/s (resumed at 0.5 MB)" in progress


def test_a_resume_through_a_redirect_keeps_the_bytes_received(served, tmp_path):
    """A redirect answers before the body's response (GloVe's host redirects; http → https): the bytes held are
    kept through it, and the rest asked of the server it leads to."""
    served.mode, served.redirect = "cut", True
    with pytest.raises(ReplicateError):
        store.fetch("toydl")
    kept = (tmp_path / "data" / "toydl" / ".download" / "toy.zip.part").stat().st_size
    served.mode = "whole"
    store.fetch("toydl")
    assert served.ranges[-1] == f"bytes={kept}-"
    assert (tmp_path / "data" / "toydl" / "data.bin").read_bytes() == MEMBER


def test_a_file_changed_since_the_cut_is_fetched_whole(served, tmp_path):
    """The part remembers the version (Last-Modified) of the body it began; the resume asks for the rest only of that
    version (If-Range), and a server whose file changed sends the whole body instead, never a splice of two."""
    served.mode, served.version = "cut", "Sat, 05 Dec 2026 10:00:00 GMT"
    with pytest.raises(ReplicateError):
        store.fetch("toydl")
    served.mode, served.version = "whole", "Sun, 06 Dec 2026 10:00:00 GMT"
    store.fetch("toydl")
    assert served.if_ranges[-1] == "Sat, 05 Dec 2026 10:00:00 GMT"
    assert (tmp_path / "data" / "toydl" / "data.bin").read_bytes() == MEMBER
    assert _files(tmp_path) == ["toydl/data.bin"]  # neither the part nor its version is left behind


def test_a_server_that_ignores_range_restarts_cleanly(served, tmp_path):
    served.mode = "cut"
    with pytest.raises(ReplicateError):
        store.fetch("toydl")
    served.mode = "no_range"
    store.fetch("toydl")
    assert (tmp_path / "data" / "toydl" / "data.bin").read_bytes() == MEMBER


@pytest.mark.parametrize("mode, says", [
    ("missing", "HTTP 404 Not Found"),
    ("stall", "the server stopped sending for 1 s (a stalled download)"),
    ("corrupt", "has SHA-256"),
])
def test_each_fault_is_one_clear_line_and_stages_nothing(served, tmp_path, mode, says):
    served.mode = mode
    with pytest.raises(ReplicateError) as err:
        store.fetch("toydl")
    assert says in str(err.value)
    assert not (tmp_path / "data" / "toydl" / "data.bin").exists()
    if mode == "corrupt":  # verified before unpacking: a corrupted archive is dropped, never resumed
        assert "the archive was not used" in str(err.value)
        assert _files(tmp_path) == []


def test_dry_run_says_what_fetch_would_do_and_does_nothing(served, tmp_path, capsys):
    assert main(["data", "fetch", "toydl", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "toydl" in out and "download" in out and served.url in out and "(1 MB)" in out
    assert served.ranges == [] and not (tmp_path / "data" / "toydl").exists()
    store.fetch("toydl")
    assert main(["data", "fetch", "toydl", "--dry-run"]) == 0
    assert "staged" in capsys.readouterr().out
    assert main(["data", "fetch", "--dry-run", "toydl"]) == 0  # names after the flag too, as users type them
    assert "staged" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["data", "fetch", "--dry-run", "toydl", "--bogus"])  # an unknown flag is still refused
