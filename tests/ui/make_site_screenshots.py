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
import functools
import http.server
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

QUESTION = "What is the capital of France?"
SCHEMES = ("light", "dark")


class _Isolated(http.server.SimpleHTTPRequestHandler):
    """A static server that sends the two headers multi-threaded WebAssembly needs."""

    def end_headers(self) -> None:
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        super().end_headers()

    def log_message(self, *args: object) -> None:
        pass


def shadow(site: Path, into: Path) -> Path:
    """``site`` with this checkout's page: its other entries linked, not copied."""
    from iglens_viz.export.site import read_manifest
    from iglens_viz.export.site_page import write_page

    into.mkdir()
    for entry in site.iterdir():
        if entry.name not in ("index.html", "page"):
            (into / entry.name).symlink_to(entry.resolve())
    write_page(into, read_manifest(site)["model"]["name"])
    return into


def _wait(page, states: tuple[str, ...], limit: float = 900) -> str:
    # polled with evaluate: the page's CSP forbids the eval that wait_for_function uses
    end = time.monotonic() + limit
    while time.monotonic() < end:
        state = page.evaluate("() => window.iglensSite ? window.iglensSite.state : null")
        if state in states:
            return state
        time.sleep(0.1)
    raise RuntimeError(f"the page did not reach {states} in {limit:.0f} s")


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

    handler = functools.partial(_Isolated, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
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
        if _wait(page, ("ready", "error")) != "ready":
            raise RuntimeError(page.evaluate("() => iglensSite.error"))
        page.fill("[data-testid=site-question]", QUESTION)
        page.press("[data-testid=site-question]", "Enter")
        if _wait(page, ("done", "error")) != "done":
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
    with tempfile.TemporaryDirectory() as tmp:
        for path in shoot(shadow(args.site, Path(tmp) / "site"), args.out):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
