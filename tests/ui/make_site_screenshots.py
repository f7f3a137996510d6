"""Regenerate docs/screenshots/site-*.png: the kernel-free site (issue 38) in headless Chromium.

A site folder exported before (``iglens export-site DIR``; the argument) gets this checkout's
page in a shadow folder that links its graphs and tokenizer, is served from a local static
server with the two isolation headers (so the page runs its multi-threaded WebAssembly, as a
class's server would) and opened at 1280 × 900 with every request off that origin failed.
Shots, each in the light and the dark colour scheme (switched in place: the views follow
``prefers-color-scheme``):

* ``site-first-paint-{light,dark}.png`` — the page at first paint, the model downloading (a
  folder exported with lessons shows its first lesson's ledger already);
* ``site-{light,dark}.png`` — "What is the capital of France?" typed, Enter, the ledger drawn
  (the whole page at 1280 px);
* ``site-1024-{light,dark}.png`` — the same answer at 1024 × 768, the whole page.

Not a test; run from the repository root::

    python tests/ui/make_site_screenshots.py /tmp/site [--out docs/screenshots]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

QUESTION = "What is the capital of France?"
SCHEMES = ("light", "dark")


def _both(page, stem: str, out: Path, full_page: bool) -> list[Path]:
    written = []
    for scheme in SCHEMES:
        page.emulate_media(color_scheme=scheme)
        page.wait_for_timeout(400)  # the views retheme and redraw on the next frame
        target = out / f"{stem}-{scheme}.png"
        page.screenshot(path=str(target), full_page=full_page)
        written.append(target)
    return written


def shoot(folder: Path, out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright
    from ui.helpers import PageRecorder, launch_chromium
    from ui.site_server import serve_site, wait_for_site

    server, url = serve_site(folder)
    written: list[Path] = []
    with sync_playwright() as p:
        browser = launch_chromium(p)
        context = browser.new_context(
            color_scheme="light", device_scale_factor=1, viewport={"width": 1280, "height": 900}
        )
        page = context.new_page()
        recorder = PageRecorder().attach(page, allow_hosts=(url.split("/")[2],))
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(url) else r.abort())
        page.goto(url)
        page.wait_for_selector("[data-testid=site-status]")
        written += _both(page, "site-first-paint", out, full_page=False)
        if wait_for_site(page, ("ready", "error")) != "ready":
            raise RuntimeError(page.evaluate("() => iglensSite.error"))
        page.fill("[data-testid=site-question]", QUESTION)
        page.press("[data-testid=site-question]", "Enter")
        if wait_for_site(page, ("done", "error")) != "done":
            raise RuntimeError(page.evaluate("() => iglensSite.error"))
        page.mouse.move(2, 2)  # park the mouse outside the views
        written += _both(page, "site", out, full_page=True)
        page.set_viewport_size({"width": 1024, "height": 768})
        written += _both(page, "site-1024", out, full_page=True)
        problems = recorder.console_errors + recorder.page_errors + recorder.network
        if problems:
            raise RuntimeError(f"the page: {problems}")
        browser.close()
    server.shutdown()
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("site", type=Path, help="a site folder exported before")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from ui.site_server import shadow_site

    with tempfile.TemporaryDirectory() as tmp:
        for path in shoot(shadow_site(args.site, Path(tmp) / "site"), args.out):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
