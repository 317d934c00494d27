"""Serve the built site on 127.0.0.1 and drive Debian's Chromium through Playwright.

These tests need `_build/html` (run `make build` first) and Chromium (`make chromium`); they
fail with that instruction rather than skip, because a skipped site check checks nothing.
"""

import functools
import http.server
import os
import tempfile
import threading
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[2]
HTML = Path(os.environ.get("BOOK_HTML", ROOT / "_build" / "html"))
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
# Chromium flags for a closed network: no background connections, no sandbox as root.
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def pytest_configure(config):
    if not (HTML / "index.html").exists():
        raise pytest.UsageError(f"no built site at {HTML}: run `make build` first")
    if not CHROMIUM.exists():
        raise pytest.UsageError(f"no Chromium at {CHROMIUM}: run `make chromium` first")


@pytest.fixture(scope="session")
def base_url():
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(HTML))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        context = p.chromium.launch_persistent_context(
            profile,
            executable_path=str(CHROMIUM),
            headless=True,
            args=ARGS,
            viewport={"width": 1280, "height": 1400},
        )
        yield context
        context.close()


@pytest.fixture
def page(browser, base_url):
    pg = browser.new_page()
    pg.external, pg.missing, pg.errors = [], [], []

    def route(request_route):  # the site must work offline: block and record off-host requests
        if request_route.request.url.startswith(base_url):
            request_route.continue_()
        else:
            pg.external.append(request_route.request.url)
            request_route.abort()

    pg.route("**/*", route)
    pg.on("response", lambda r: r.status >= 400 and pg.missing.append(f"{r.status} {r.url}"))
    # JavaScript errors: uncaught exceptions and console.error messages (a blocked off-host
    # request or a 404 is also logged as a console error: it is reported here as well)
    pg.on("pageerror", lambda e: pg.errors.append(f"uncaught: {e}"))
    pg.on("console", lambda m: m.type == "error" and pg.errors.append(f"console: {m.text}"))
    yield pg
    pg.close()
