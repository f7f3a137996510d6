"""Browser fixtures: Playwright on Debian's Chromium (no browser download).

Browser tests skip when Playwright or Chromium is missing on a developer machine, and fail
under CI (``CI`` set), where ``.ci/run`` installs Chromium.
"""

from __future__ import annotations

import os

import pytest

from .helpers import chromium_path, launch_chromium


def _unavailable(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"browser tests need {reason} (CI installs it: see .ci/run)")
    pytest.skip(f"browser tests need {reason}")


@pytest.fixture(scope="session")
def playwright_instance():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package (pip install -e '.[test]')")
    if chromium_path() is None:
        _unavailable("Chromium (apt-get install chromium)")
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="session")
def browser(playwright_instance):
    browser = launch_chromium(playwright_instance)
    yield browser
    browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page
    context.close()
