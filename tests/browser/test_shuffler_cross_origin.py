"""The documented browser set-up through a shuffler (issue 37, item 9): a page on one origin
(``http://localhost:PORT``, a static server) runs ``new Client({url, shuffler, sealing,
shufflerKey})`` with the collector and the shuffler each on an origin of its own, both allowing
the page's origin (``DENIABLE_CORS_ORIGINS``, ``DENIABLE_SHUFFLER_CORS_ORIGINS``), in headless
Chromium: the specs come from the collector, the keys from the shuffler, the sealed report goes
to the shuffler, and the collector stores it. The same page on an origin not allowed cannot read
the shuffler's keys. A screenshot goes to test-artifacts/screenshots/."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from deniable.client import MetricSpec
from testkit import ADMIN_TOKEN, spare_port
from testkit.browser import browser_problem, require_browser
from testkit.jsbundles import built_bundles
from testkit.shuffler_process import SHUFFLER_UPLOAD_KEY, Pipeline
from testkit.stub_collector import eventually

require_browser(browser_problem())  # before Selenium is imported: skip, or fail in CI

from .conftest import SCREENSHOTS  # noqa: E402

BUNDLES = ("deniable.min.js", "deniable-shuffle.min.js")
PAGE = Path(__file__).with_name("pages") / "shuffled.html"
DARK = MetricSpec.boolean("dark_mode", epsilon=1.0)


class Site:
    """A static server on loopback for the page and the two bundles (copied to a folder)."""

    def __init__(self, folder: Path, dist: Path) -> None:
        for name in BUNDLES:
            (folder / name).write_bytes((dist / name).read_bytes())
        (folder / "index.html").write_bytes(PAGE.read_bytes())

        class Quiet(SimpleHTTPRequestHandler):
            extensions_map: ClassVar[dict[str, str]] = {
                ".js": "text/javascript",
                ".html": "text/html",
            }

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

        handler = functools.partial(Quiet, directory=str(folder))
        self.server = ThreadingHTTPServer(("127.0.0.1", spare_port()), handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    served = Site(tmp_path_factory.mktemp("site"), built_bundles(*BUNDLES))
    yield served
    served.close()


@pytest.fixture(scope="module")
def pipeline(site: Site, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    origin = f"http://localhost:{site.port}"
    running = Pipeline(
        f"sqlite:///{tmp_path_factory.mktemp('db')}/collector.db",
        tmp_path_factory.mktemp("pipeline"),
        min_batch=1,
        shuffler_settings={"DENIABLE_SHUFFLER_CORS_ORIGINS": origin},
        collector_env={"DENIABLE_CORS_ORIGINS": origin},
    ).start([DARK])
    yield running
    running.stop()


def stored_ids(collector: str) -> list[str]:
    answer = httpx.get(
        f"{collector}/v1/admin/metrics/{DARK.name}/reports?limit=100",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        trust_env=False,
    )
    assert answer.status_code == 200, answer.text
    return [report["id"] for report in answer.json()["reports"]]


def test_a_page_sends_through_a_shuffler_on_another_origin(
    site: Site, pipeline: Pipeline, driver: Any
) -> None:
    assert pipeline.shuffler is not None
    shuffler, collector = pipeline.shuffler.url, pipeline.collector.url
    driver.set_script_timeout(60)
    driver.get(f"http://localhost:{site.port}/index.html")
    result = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "window.sendThroughShuffler(arguments[0]).then(done, (e) => done({error: String(e)}));",
        {"url": collector, "shuffler": shuffler, "shufflerKey": SHUFFLER_UPLOAD_KEY},
    )
    assert "error" not in result, result
    assert (result["specs"], result["recorded"], result["flushed"]) == (True, True, True), result
    assert result["stats"]["delivered"] == 1 and result["problems"] == [], result
    (report_id,) = result["ids"]
    assert eventually(lambda: report_id in stored_ids(collector), timeout=30)
    driver.execute_script(
        "document.getElementById('status').textContent +="
        " '\\nstored by the collector (its admin export): ' + arguments[0];",
        report_id,
    )
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOTS / "shuffler-cross-origin.png"))

    # The same page on an origin the shuffler does not allow (127.0.0.1 is not localhost).
    driver.get(f"http://127.0.0.1:{site.port}/index.html")
    refused = driver.execute_async_script(
        "const done = arguments[arguments.length - 1]; window.readKeys(arguments[0]).then(done);",
        shuffler,
    )
    assert refused["ok"] is False and "Failed to fetch" in refused["error"], refused


def test_the_preflight_names_only_the_allowed_origin(site: Site, pipeline: Pipeline) -> None:
    assert pipeline.shuffler is not None
    allowed, other = f"http://localhost:{site.port}", f"http://127.0.0.1:{site.port}"
    for url in (pipeline.shuffler.url + "/v1/sealed", pipeline.collector.url + "/v1/reports"):
        asked = {"Access-Control-Request-Method": "POST"}
        headers = {**asked, "Access-Control-Request-Headers": "authorization,content-type"}
        answer = httpx.options(url, headers={**headers, "Origin": allowed}, trust_env=False)
        assert answer.status_code == 200, (url, answer.text)
        assert answer.headers["access-control-allow-origin"] == allowed
        assert "authorization" in answer.headers["access-control-allow-headers"].lower()
        answer = httpx.options(url, headers={**headers, "Origin": other}, trust_env=False)
        assert answer.status_code == 400
        assert "access-control-allow-origin" not in answer.headers
    # Admin routes stay same-origin: no CORS answer for them whatever the origin.
    admin = pipeline.collector.url + "/v1/admin/metrics/dark_mode/reports"
    answer = httpx.get(admin, headers={"Origin": allowed}, trust_env=False)
    assert "access-control-allow-origin" not in answer.headers
