"""The documentation site as a reader sees it: built in strict mode, served on 127.0.0.1, opened in headless
Chromium, where every image of the home page, a figure's page and the replication report has loaded.

``make test`` builds the site once (``make docs``) and names it in ``REPLICATE_SITE_DIR``; run alone, the test
builds it into a temporary folder. Where Chromium is not installed the browser tests are skipped with the reason
(``.ci/run`` installs it with apt-get). ``REPLICATE_SITE_SCREENSHOTS=DIR`` keeps a screenshot of each page.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from replicate.core.errors import ReplicateError
from replicate.report import site

PAGES = ("index.html", "figures/li2020/fig2.html", "replication.html")
DEADLINE_S = 30  # for any one wait: the server, the browser, a page and its images
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def test_links_point_at_staged_pages_and_a_link_to_nothing_stops_the_assembly(tmp_path):
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "figures" / "p").mkdir(parents=True)
    (repo / "figures" / "p" / "f.png").write_bytes(b"png")
    (repo / "README.md").write_text("# r\n[docs](docs/guide.md)\n")
    (repo / "docs" / "index.md").write_text("# i\n")
    (repo / "docs" / "guide.md").write_text(
        '# g\n[readme](../README.md#quick-start) <img src="../figures/p/f.png"> [web](https://example.org)\n'
        "```\n[not a link](../nowhere.md)\n```\n")
    staging = site.assemble(tmp_path / "src", repo=repo)
    assert (staging / "guide.md").read_text().startswith(
        '# g\n[readme](readme.md#quick-start) <img src="figures/p/f.png"> [web](https://example.org)\n')
    assert (staging / "readme.md").read_text() == "# r\n[docs](guide.md)\n"
    assert (staging / "figures" / "p" / "f.png").read_bytes() == b"png"
    (repo / "docs" / "guide.md").write_text("[gone](../missing.md)\n")
    with pytest.raises(ReplicateError, match="missing.md"):
        site.assemble(tmp_path / "src", repo=repo)



def test_a_list_under_a_paragraph_and_the_stars_of_mathematics_read_on_the_site_as_on_github(tmp_path):
    """GitHub starts a list right under a paragraph line, mkdocs' Markdown only after a blank line (the specs' lists
    ran into their paragraphs); a lone star in a table or a claim is mathematics (w*, EMNIST*), never emphasis."""
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "docs" / "index.md").write_text(
        "A paragraph:\n- one\n  continued\n- two\n\n| a | ‖w − w*‖ and F* | **FAIL** |\n\n*italic* stays\n")
    text = (site.assemble(tmp_path / "src", repo=repo) / "index.md").read_text()
    assert text == ("A paragraph:\n\n- one\n  continued\n- two\n\n| a | ‖w − w\\*‖ and F\\* | **FAIL** |\n\n"
                    "*italic* stays\n")
    assert site._cell("‖w̃* − w*‖ | EMNIST*") == "‖w̃\\* − w\\*‖ \\| EMNIST\\*"

@pytest.fixture(scope="module")
def site_dir(tmp_path_factory) -> Path:
    """The built site: ``make test``'s (``REPLICATE_SITE_DIR``), else built here in strict mode."""
    if os.environ.get("REPLICATE_SITE_DIR"):
        built = Path(os.environ["REPLICATE_SITE_DIR"])
        assert (built / "index.html").is_file(), f"REPLICATE_SITE_DIR={built} holds no built site (make docs)"
        return built
    pytest.importorskip("mkdocs", reason="mkdocs is not installed: pip install -r requirements-docs.txt")
    folder = tmp_path_factory.mktemp("site")
    return site.build(site.assemble(folder / "src"), folder / "site")


def test_every_committed_figure_has_a_page_in_the_built_site(site_dir):
    from replicate.core import paths

    keys = [str(p.relative_to(paths.figures_dir()))[:-len(".claims.json")]
            for p in paths.figures_dir().glob("**/*.claims.json") if "arena" not in p.parts]
    assert keys and [k for k in keys if not (site_dir / "figures" / f"{k}.html").is_file()] == []
    assert [k for k in keys if not (site_dir / "figures" / f"{k}.png").is_file()] == []


def test_the_api_reference_states_each_algorithm(site_dir):
    """An algorithm's class has no docstring of its own: the reference shows its module's statement of it."""
    from replicate.fl.algorithms import ALGORITHMS

    import html

    text = (site_dir / "reference.html").read_text()
    for cls in ALGORITHMS.values():
        opening = sys.modules[cls.__module__].__doc__[:24]  # "FedProx (Li, Sahu, Zahee", "SCAFFOLD (Karimireddy ..."
        assert f"<p>{html.escape(opening, quote=False)}" in text, cls.__name__


@pytest.fixture(scope="module")
def server(site_dir):
    """``python -m http.server`` on a free port of 127.0.0.1, serving the site; always stopped."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                                "--directory", str(site_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait(lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close() or True, "the server")
        yield f"http://127.0.0.1:{port}"
    finally:
        _stop(process)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (apt-get install chromium; .ci/run installs it where it can)")
    websocket = pytest.importorskip("websocket", reason="websocket-client is not installed (requirements-docs.txt)")
    profile = tmp_path_factory.mktemp("chromium")
    process = subprocess.Popen([CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
                                "--remote-debugging-port=0", f"--user-data-dir={profile}", "--window-size=1280,1000",
                                "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        active = profile / "DevToolsActivePort"  # the port Chromium chose, once it listens
        _wait(lambda: active.is_file() and len(active.read_text().split()) == 2, "Chromium's DevTools port")
        port = active.read_text().split()[0]
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5).read())
        url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
        connection = websocket.create_connection(url, timeout=DEADLINE_S, suppress_origin=True)
        try:
            yield _Page(connection)
        finally:
            connection.close()
    finally:
        _stop(process)


@pytest.mark.parametrize("page", PAGES)
def test_every_image_of_the_page_loads_in_chromium(page, server, browser, tmp_path):
    images = browser.open(f"{server}/{page}")
    assert images, f"{page} shows no image"
    assert [image for image in images if image["width"] == 0] == [], f"{page}: images that did not load"
    if page.startswith("figures/"):
        assert any(image["src"].endswith("/figures/li2020/fig2.png") for image in images)
    shots = os.environ.get("REPLICATE_SITE_SCREENSHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        browser.screenshot(Path(shots) / (page.replace("/", "_")[:-len(".html")] + ".png"))


class _Page:
    """The one page of a headless Chromium, driven over the DevTools protocol."""

    def __init__(self, connection):
        self.connection, self.calls = connection, 0

    def call(self, method: str, **params) -> dict:
        self.calls += 1
        self.connection.send(json.dumps({"id": self.calls, "method": method, "params": params}))
        while True:  # events arrive in between; the answer carries the call's id
            message = json.loads(self.connection.recv())
            if message.get("id") == self.calls:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:60]}…: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str) -> list[dict]:
        """Load ``url``; once every image has loaded or failed, each image's address and natural width."""
        self.call("Page.navigate", url=url)
        _wait(lambda: self.evaluate(f"location.href === {json.dumps(url)} && document.readyState === 'complete'"),
              url)
        return self.evaluate("""Promise.all(Array.from(document.images, image => image.complete ? null :
            new Promise(done => { image.onload = image.onerror = done; }))).then(() =>
            Array.from(document.images, image => ({src: image.currentSrc, width: image.naturalWidth})))""")

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))


def _wait(ready, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            if ready():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not ready after {DEADLINE_S} s")
        time.sleep(0.05)


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
