"""Serving an exported kernel-free site to headless Chromium, shared by its browser test,
its screenshots (make_site_screenshots.py) and its benchmark (benchmarks/site_question.py)."""

from __future__ import annotations

import functools
import http.server
import threading
import time
from pathlib import Path

__all__ = ["fail_off_origin", "serve_site", "shadow_site", "site_state", "wait_for_site"]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    """A static file server that logs nothing."""

    def log_message(self, *args: object) -> None:
        pass


class _Isolated(_Quiet):
    """Sends the two headers that make the page cross-origin isolated (WebAssembly threads)."""

    def end_headers(self) -> None:
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        super().end_headers()


def serve_site(folder: Path, isolated: bool = True) -> tuple[http.server.ThreadingHTTPServer, str]:
    """A static server of ``folder`` on a free local port (``server.shutdown()`` stops it),
    and its address; ``isolated`` sends the headers that allow threads."""
    handler = functools.partial(_Isolated if isolated else _Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def shadow_site(site: Path, into: Path) -> Path:
    """``site`` with this checkout's page: its other entries linked, not copied."""
    from iglens_viz.export.site import read_manifest
    from iglens_viz.export.site_page import write_page

    into.mkdir()
    for entry in site.iterdir():
        if entry.name not in ("index.html", "page"):
            (into / entry.name).symlink_to(entry.resolve())
    write_page(into, read_manifest(site)["model"]["name"])
    return into


def site_state(page) -> str | None:
    """The page's state (``window.iglensSite.state``), None before its script runs."""
    # read with evaluate: the page's CSP forbids the eval that wait_for_function uses
    return page.evaluate("() => window.iglensSite ? window.iglensSite.state : null")


def wait_for_site(page, states: tuple[str | None, ...], limit: float = 900) -> str:
    """Poll until the page reaches one of ``states``; TimeoutError after ``limit`` seconds."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        state = site_state(page)
        if state in states:
            return state
        time.sleep(0.1)
    raise TimeoutError(f"the page stayed {site_state(page)!r}, not {states}, for {limit:.0f} s")


def fail_off_origin(page, origin: str) -> list[str]:
    """Fail every request of ``page`` off ``origin``; returns the list of those asked for."""
    off_origin: list[str] = []

    def route(route):
        if route.request.url.startswith(origin):
            route.continue_()
        else:
            off_origin.append(route.request.url)
            route.abort()

    page.route("**/*", route)
    return off_origin
