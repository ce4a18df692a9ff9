"""docs/sdk-js.md as a newcomer follows it (issue 41): its examples pass ``ingestKey``, the stale
line on text metrics with dimensions is gone, and ``scripts/serve.mjs`` serves the example page
or a page of one's own on the port the page documents, with ``/v1/`` forwarded to a real
collector that takes the ingest key. Real HTTP, node in a subprocess."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from deniable.client import MetricSpec
from testkit import RunningCollector, collector_settings, loopback_url, register_all, spare_port
from testkit.configuration import INGEST_KEY
from testkit.jsbundles import SDK, built_bundles

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "sdk-js.md"


def js_blocks(text: str) -> list[str]:
    return re.findall(r"```js\n(.*?)```", text, flags=re.S)


def test_every_client_in_the_guide_passes_its_ingest_key() -> None:
    text = GUIDE.read_text()
    clients = [
        block[block.index("new Client(") :] for block in js_blocks(text) if "new Client(" in block
    ]
    assert len(clients) >= 3
    for client in clients:
        assert "ingestKey" in client[: client.index(");")], client
    page = (SDK / "examples" / "index.html").read_text()
    assert "new deniable.Client({ url: location.origin, ingestKey })" in page
    assert "dimensions on\ntext metrics" not in text and "dimensions on text metrics" not in text
    assert "refuses them too" not in text


@contextmanager
def serving(*args: str) -> Iterator[str]:
    """``node scripts/serve.mjs ARGS`` from sdk/js, until the block ends; its base URL."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    built_bundles("deniable.min.js")
    port = int(args[1])
    process = subprocess.Popen(
        [node, "scripts/serve.mjs", *args],
        cwd=SDK,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = loopback_url(port)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url + "/deniable.min.js", trust_env=False, timeout=2)
                break
            except httpx.HTTPError:
                assert process.poll() is None, process.stdout.read() if process.stdout else ""
                assert time.monotonic() < deadline, "serve.mjs did not answer"
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningCollector]:
    """A collector whose uploads and specs need the ingest key, with dark_mode."""
    directory = tmp_path_factory.mktemp("js-docs")
    server = RunningCollector(collector_settings(f"sqlite:///{directory}/c.db")).start()
    register_all(server.url, [MetricSpec.boolean("dark_mode", epsilon=1.0)])
    yield server
    server.stop()


def test_serve_mjs_takes_the_port_the_guide_documents(collector: RunningCollector) -> None:
    text = " ".join(GUIDE.read_text().split())
    assert "The second argument is the port (default 8080)" in text
    port = spare_port()
    with serving(collector.url, str(port)) as url, httpx.Client(trust_env=False) as http:
        page = http.get(url + "/")
        assert page.status_code == 200 and "ingestKey" in page.text
        assert http.get(url + "/deniable.min.js").status_code == 200
        forwarded = http.get(url + "/v1/metrics", headers={"Authorization": f"Bearer {INGEST_KEY}"})
        assert forwarded.status_code == 200, forwarded.text
        assert [m["name"] for m in forwarded.json()["metrics"]] == ["dark_mode"]


def test_serve_mjs_serves_a_page_of_ones_own(collector: RunningCollector, tmp_path: Path) -> None:
    text = " ".join(GUIDE.read_text().split())
    assert "**Serving your own page.** Give `serve.mjs` a folder as its third argument" in text
    mine = tmp_path / "my-page"
    (mine / "js").mkdir(parents=True)
    (mine / "index.html").write_text("<!doctype html><title>mine</title>")
    (mine / "js" / "app.js").write_text("export const app = 1;\n")
    (tmp_path / "secret.txt").write_text("outside the folder")
    port = spare_port()
    with serving(collector.url, str(port), str(mine)) as url, httpx.Client(trust_env=False) as http:
        assert "<title>mine</title>" in http.get(url + "/").text
        script = http.get(url + "/js/app.js")
        assert script.status_code == 200
        assert script.headers["content-type"].startswith("text/javascript")
        assert http.get(url + "/deniable.min.js").status_code == 200
        assert http.get(url + "/%2e%2e/secret.txt").status_code == 404
        assert http.get(url + "/nothing.html").status_code == 404
        ok = http.get(url + "/v1/metrics", headers={"Authorization": f"Bearer {INGEST_KEY}"})
        assert ok.status_code == 200
