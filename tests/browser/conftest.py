"""Serve the built site on 127.0.0.1 and drive Debian's Chromium through Playwright.

These tests need `_build/html` (run `make build` first) and Chromium (`make chromium`); they
fail with that instruction rather than skip, because a skipped site check checks nothing.
"""

import os
import tempfile
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from ..helpers import ROOT, load_tool

HTML = Path(os.environ.get("BOOK_HTML", ROOT / "_build" / "html"))
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
# the site's server and Chromium's flags for a closed network, shared with `make pdf`
book_pdf = load_tool("book_pdf")
ARGS = book_pdf.ARGS


def pytest_configure(config):
    if not (HTML / "index.html").exists():
        raise pytest.UsageError(f"no built site at {HTML}: run `make build` first")
    if not CHROMIUM.exists():
        raise pytest.UsageError(f"no Chromium at {CHROMIUM}: run `make chromium` first")


@pytest.fixture(scope="session")
def base_url():
    with book_pdf.serve(HTML) as url:
        yield url.rstrip("/")


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
