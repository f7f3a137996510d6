"""Benchmark the linked views in Chromium on a 512-token × 30-block exported page.

Not a test: nothing here asserts on time. It prints figures next to the project's goals:

* first render: from the page's module script starting (``iglens-start`` mark) to the views
  being drawn (``iglens-drawn``: the first animation frame after ``mount`` returns, when
  canvases queued with requestAnimationFrame have drawn). Goal ≤ 300 ms.
  Also printed: ``mount`` alone, and navigation start → drawn (which adds parsing the
  ~MB page and decoding the inlined bundle).
* click → detail: ``performance.now()`` before a token's ``click()`` until the detail
  panel's ``data-selected-index`` names that token (synchronous DOM update), and until the
  next animation frame (the update drawn). Goal ≤ 50 ms.

Medians over several page loads and clicks. The result is synthetic (exact telescoping sums,
K=5 lens tokens, every block a boundary), so no model is loaded. Headless Chromium from
Debian (``/usr/bin/chromium``) through Playwright.

Usage::

    python benchmarks/bench_widget.py            # 512 × 30, 7 loads, 25 clicks
    python benchmarks/bench_widget.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

GOAL_RENDER_MS = 300.0
GOAL_CLICK_MS = 50.0

FIRST_RENDER_JS = """
async () => {
  const ready = () => document.documentElement.dataset.iglensReady;
  const has = (name) => performance.getEntriesByName(name).length > 0;
  while (!ready() || (ready() === "true" && !has("iglens-drawn"))) {
    await new Promise((r) => setTimeout(r, 5));
  }
  if (ready() !== "true") throw new Error("the page did not render");
  const mark = (name) => performance.getEntriesByName(name)[0].startTime;
  return {start: mark("iglens-start"), mountStart: mark("iglens-mount-start"),
          mounted: mark("iglens-mounted"), drawn: mark("iglens-drawn")};
}
"""

CLICK_JS = """
async (i) => {
  const token = document.querySelector(`[data-token-index="${i}"]`);
  token.scrollIntoView({block: "nearest"});
  await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  const shows = () => document.querySelector(`[data-selected-index="${i}"]`) !== null;
  const t0 = performance.now();
  token.click();
  let sync = shows() ? performance.now() - t0 : null;
  while (!shows()) await new Promise((r) => requestAnimationFrame(() => r()));
  const updated = performance.now() - t0;
  await new Promise((r) => requestAnimationFrame(() => r()));
  return {sync, updated, frame: performance.now() - t0};
}
"""


def build_page(folder: Path, T: int, n: int) -> tuple[Path, int]:
    from iglens_viz.export import to_html
    from ui.helpers import synthetic_result

    result = synthetic_result(T=T, n=n, K=5, seed=0, vocab=49152)
    path = folder / f"bench-{T}x{n}.html"
    to_html(result, path)
    return path, path.stat().st_size


def median(values):
    return statistics.median(values) if values else float("nan")


def run(T: int, n: int, loads: int, clicks: int) -> dict:
    from playwright.sync_api import sync_playwright

    from ui.helpers import PageRecorder, launch_chromium

    with tempfile.TemporaryDirectory() as tmp:
        path, size = build_page(Path(tmp), T, n)
        renders, mounts, navigation, click_sync, click_updated, click_frame = ([] for _ in
                                                                                range(6))
        with sync_playwright() as p:
            browser = launch_chromium(p)
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            recorder = PageRecorder().attach(page)
            for load in range(loads + 1):  # the first load warms the browser's caches
                page.goto(path.as_uri())
                marks = page.evaluate(FIRST_RENDER_JS)
                if load == 0:
                    continue
                renders.append(marks["drawn"] - marks["start"])
                mounts.append(marks["mounted"] - marks["mountStart"])
                navigation.append(marks["drawn"])
            rng_positions = [(37 * j + 11) % T for j in range(clicks + 2)]
            for j, i in enumerate(rng_positions):
                out = page.evaluate(CLICK_JS, i)
                if j < 2:
                    continue  # warm-up clicks (JIT)
                if out["sync"] is not None:
                    click_sync.append(out["sync"])
                click_updated.append(out["updated"])
                click_frame.append(out["frame"])
            problems = recorder.console_errors + recorder.page_errors + recorder.network
            version = browser.version
            browser.close()
    return dict(T=T, n=n, page_bytes=size, loads=loads, clicks=clicks, chromium=version,
                first_render_ms=median(renders), mount_ms=median(mounts),
                navigation_to_drawn_ms=median(navigation),
                click_sync_ms=median(click_sync), click_sync_count=len(click_sync),
                click_to_detail_ms=median(click_updated), click_to_frame_ms=median(click_frame),
                first_render_all=renders, click_all=click_updated, problems=problems)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--blocks", type=int, default=30)
    parser.add_argument("--loads", type=int, default=7)
    parser.add_argument("--clicks", type=int, default=25)
    parser.add_argument("--quick", action="store_true", help="3 loads, 8 clicks")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args()
    if args.quick:
        args.loads, args.clicks = 3, 8
    r = run(args.tokens, args.blocks, args.loads, args.clicks)

    def verdict(value, goal):
        return "meets" if value <= goal else "MISSES"

    print(f"IG-Lens widget: exported page, {r['T']} tokens x {r['n']} blocks "
          f"({r['page_bytes'] / 1e6:.2f} MB), Chromium {r['chromium']}, "
          f"{platform.machine()} {platform.system()}")
    print(f"  first render (script start -> drawn)  {r['first_render_ms']:7.1f} ms  "
          f"goal <= {GOAL_RENDER_MS:.0f} ms: {verdict(r['first_render_ms'], GOAL_RENDER_MS)}"
          f"   (median of {r['loads']} loads)")
    print(f"    mount() alone                       {r['mount_ms']:7.1f} ms")
    print(f"    navigation start -> drawn           {r['navigation_to_drawn_ms']:7.1f} ms")
    print(f"  click -> detail panel updated         {r['click_to_detail_ms']:7.1f} ms  "
          f"goal <= {GOAL_CLICK_MS:.0f} ms: {verdict(r['click_to_detail_ms'], GOAL_CLICK_MS)}"
          f"   (median of {r['clicks']} clicks)")
    print(f"    of which synchronous in the handler {r['click_sync_ms']:7.1f} ms  "
          f"({r['click_sync_count']}/{r['clicks']} clicks updated synchronously)")
    print(f"    click -> next frame drawn           {r['click_to_frame_ms']:7.1f} ms")
    if r["problems"]:
        print(f"  page problems: {r['problems']}")
    if args.json:
        args.json.write_text(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
