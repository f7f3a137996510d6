"""The kernel-free site (issue 38) against Python on one question. Not a test: nothing here
asserts on time.

A site folder (``iglens export-site DIR``; exported to a temporary folder when none is given,
which takes minutes) is served from a local static server with the two isolation headers
(``Cross-Origin-Opener-Policy: same-origin``, ``Cross-Origin-Embedder-Policy:
require-corp``) and opened in headless Chromium (``/usr/bin/chromium`` through Playwright,
every request off the server's origin failed). Each round, in a fresh browser:

* **first paint** — the page's ``first-contentful-paint``;
* **model ready** — ``page.goto`` until the page says ``ready`` (download, both sessions);
* **question** — "What is the capital of France?" (chat, at most 12 new tokens): Enter in the
  question box until the page says ``done`` (the ledger is drawn before it does);
* **memory** — the tab's ``measureUserAgentSpecificMemory`` (WebAssembly heaps included; the
  isolated page only), the JS heap (CDP ``Performance.getMetrics``: ``JSHeapUsedSize``) and
  the renderer process's resident set now and at its peak (``VmRSS`` / ``VmHWM`` in
  ``/proc``, the process found through CDP ``SystemInfo.getProcessInfo``);
* **Python** — ``IGLens(*load_model()).attribute(question, chat=True, max_new_tokens=12)`` in
  this process after the page's rounds (the model loaded and one call made untimed, the cache
  cleared before each timed call): the ratios page / Python are per round.

Each round opens the page twice, served with the headers and then *without* them (the page
runs one WebAssembly thread), then times Python.
The page's files are written from this checkout's bundle into a shadow folder that links the
given folder's graphs and tokenizer (``--as-is`` serves the folder's own page). Prints
min / median / max over ``--repeat`` rounds, the machine and its load average.

Usage::

    python benchmarks/site_question.py /tmp/site            # a folder exported before
    python benchmarks/site_question.py /tmp/site --repeat 3
    python benchmarks/site_question.py                      # exports the default model first
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _machine import cpu_name  # the benchmarks' own folder (run as a script)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

QUESTION = "What is the capital of France?"
MAX_NEW_TOKENS = 12  # the page's own limit (js/site/page.js)


def _renderer_memory(browser) -> dict[str, float]:
    """The largest renderer's resident set now and at its peak (MB), from ``/proc``."""
    cdp = browser.new_browser_cdp_session()
    info = cdp.send("SystemInfo.getProcessInfo")["processInfo"]
    best: dict[str, float] = {}
    for process in info:
        if process.get("type") != "renderer":
            continue
        try:
            status = Path(f"/proc/{process['id']}/status").read_text()
        except OSError:
            continue
        kb = {
            line.split(":")[0]: float(line.split()[1])
            for line in status.splitlines()
            if line.startswith(("VmRSS", "VmHWM"))
        }
        if kb.get("VmRSS", 0) / 1e3 > best.get("rss_mb", -1):
            best = {"rss_mb": kb.get("VmRSS", 0) / 1e3, "peak_mb": kb.get("VmHWM", 0) / 1e3}
    return best


def page_round(playwright, folder: Path, isolated: bool) -> dict:
    """One fresh browser's figures for the question (seconds, MB)."""
    from ui.helpers import launch_chromium
    from ui.site_server import fail_off_origin, serve_site, wait_for_site

    server, url = serve_site(folder, isolated)
    browser = launch_chromium(playwright)
    try:
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        off_origin = fail_off_origin(page, url)
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        started = time.monotonic()
        page.goto(url)
        if wait_for_site(page, ("ready", "error")) != "ready":
            raise RuntimeError(page.evaluate("() => iglensSite.error"))
        ready = time.monotonic() - started
        page.fill("[data-testid=site-question]", QUESTION)
        asked = time.monotonic()
        page.press("[data-testid=site-question]", "Enter")
        if wait_for_site(page, ("done", "error")) != "done":
            raise RuntimeError(page.evaluate("() => iglensSite.error"))
        answered = time.monotonic() - asked
        figures = page.evaluate(
            """async () => ({
              paint: performance.getEntriesByName('first-contentful-paint')[0]?.startTime,
              positions: iglensSite.inputIds.length,
              generated: iglensSite.generated.length,
              backend: document.querySelector('[data-testid=site-backend]').textContent,
              isolated: self.crossOriginIsolated,
              tab: self.crossOriginIsolated && performance.measureUserAgentSpecificMemory
                ? (await performance.measureUserAgentSpecificMemory()).bytes : null,
            })"""
        )
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        if off_origin or errors:
            raise RuntimeError(f"off-origin requests {off_origin}, page errors {errors}")
        return {
            "first_paint": figures["paint"] / 1e3,
            "ready": ready,
            "question": answered,
            "positions": figures["positions"],
            "generated": figures["generated"],
            "backend": figures["backend"],
            "isolated": figures["isolated"],
            "tab_mb": None if figures["tab"] is None else figures["tab"] / 1e6,
            "js_heap_mb": metrics.get("JSHeapUsedSize", 0) / 1e6,
            **_renderer_memory(browser),
        }
    finally:
        browser.close()
        server.shutdown()


def _spread(values: list[float], unit: str, digits: int = 1) -> str:
    if len(values) == 1:
        return f"{values[0]:,.{digits}f} {unit}"
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{low:,.{digits}f} / {mid:,.{digits}f} / {high:,.{digits}f} {unit} (min / median / max)"


def report(label: str, rounds: list[dict], python: list[float] | None) -> None:
    first = rounds[0]
    print(f"\n{label}: {first['backend'].strip()} (crossOriginIsolated {first['isolated']})")
    print(f"  question: {first['positions']} positions, {first['generated']} generated tokens")
    print(f"  first paint     {_spread([r['first_paint'] for r in rounds], 's', 2)}")
    print(f"  model ready     {_spread([r['ready'] for r in rounds], 's')}")
    print(f"  Enter → ledger  {_spread([r['question'] for r in rounds], 's')}")
    if python:
        print(f"  Python attribute {_spread(python, 's')}")
        ratios = [r["question"] / p for r, p in zip(rounds, python, strict=True)]
        print(f"  page / Python   {_spread(ratios, '×', 2)}")
    tabs = [r["tab_mb"] for r in rounds if r["tab_mb"] is not None]
    if tabs:
        print(f"  tab memory      {_spread(tabs, 'MB', 0)} (measureUserAgentSpecificMemory)")
    print(f"  JS heap used    {_spread([r['js_heap_mb'] for r in rounds], 'MB', 0)}")
    if all("rss_mb" in r for r in rounds):
        print(f"  renderer RSS    {_spread([r['rss_mb'] for r in rounds], 'MB', 0)}")
        print(f"  renderer peak   {_spread([r['peak_mb'] for r in rounds], 'MB', 0)} (VmHWM)")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", nargs="?", type=Path, help="an exported site folder")
    parser.add_argument("--repeat", type=int, default=1, help="isolated rounds (default 1)")
    parser.add_argument("--as-is", action="store_true", help="serve the folder's own page")
    args = parser.parse_args(argv)

    from playwright.sync_api import sync_playwright

    import iglens_viz

    load_start = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    began = time.monotonic()
    print(f"machine: {cpu_name()}, {os.cpu_count()} CPUs; load average {load_start}")
    model, tokenizer = iglens_viz.load_model()
    lens = iglens_viz.IGLens(model, tokenizer)
    tmp = Path(tempfile.mkdtemp(prefix="site-question-"))
    try:
        site = args.site
        if site is None:
            site = tmp / "exported"
            print("exporting the default model's site (minutes) …", flush=True)
            iglens_viz.export_site(site, model, tokenizer)
        from ui.site_server import shadow_site

        folder = site if args.as_is else shadow_site(site, tmp / "site")
        lens.attribute(QUESTION, chat=True, max_new_tokens=MAX_NEW_TOKENS)  # warm-up
        rounds, single, python = [], [], []
        with sync_playwright() as playwright:
            for i in range(args.repeat):
                rounds.append(page_round(playwright, folder, isolated=True))
                single.append(page_round(playwright, folder, isolated=False))
                lens.clear_cache()  # else the answer and its trace come from the cache
                started = time.perf_counter()
                lens.attribute(QUESTION, chat=True, max_new_tokens=MAX_NEW_TOKENS)
                python.append(time.perf_counter() - started)
                print(
                    f"round {i + 1}: page {rounds[-1]['question']:.1f} s, one thread "
                    f"{single[-1]['question']:.1f} s, Python {python[-1]:.1f} s",
                    flush=True,
                )
        report("isolated (COOP/COEP)", rounds, python)
        report("without the headers", single, python)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load_end = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"\nload average {load_start} at start, {load_end} at end; {time.monotonic() - began:.0f} s"
    )


if __name__ == "__main__":
    main()
