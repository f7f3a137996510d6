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
* grid render: a click on the "Logit-lens grid" tab until the next animation frame (the grid
  lays out and draws its visible cells synchronously in the handler). Goal ≤ 300 ms.
* compare render: on a page of ``iglens_viz.compare(a, b)`` (two 512 × 30 results, one pin
  each), a click on the "Compare" tab until the next frame: the pinned curves and both
  results' fit-to-height heatmaps on the shared scale. Goal ≤ 300 ms.
* lazy interior path (:func:`run_lazy_path`): the kernel's side of a click on "Show the path
  inside each segment" — a ``path`` command dispatched → ``path`` trait filled — for one token of a
  512-token prompt at m = 8, on the embedded SmolLM2-135M (30 blocks). Goal ≤ 200 ms.

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
GOAL_GRID_MS = 300.0
GOAL_COMPARE_MS = 300.0
GOAL_LAZY_PATH_MS = 200.0

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
    from ui.helpers import synthetic_result

    from iglens_viz.export import to_html

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
        renders, mounts, navigation, click_sync, click_updated, click_frame = ([] for _ in range(6))
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
    return dict(
        T=T,
        n=n,
        page_bytes=size,
        loads=loads,
        clicks=clicks,
        chromium=version,
        first_render_ms=median(renders),
        mount_ms=median(mounts),
        navigation_to_drawn_ms=median(navigation),
        click_sync_ms=median(click_sync),
        click_sync_count=len(click_sync),
        click_to_detail_ms=median(click_updated),
        click_to_frame_ms=median(click_frame),
        first_render_all=renders,
        click_all=click_updated,
        problems=problems,
    )


TAB_JS = """
async (name) => {
  const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
  const other = name === "heatmap" ? "grid" : "heatmap";
  document.querySelector(`[data-view-tab="${other}"]`).click();  // untimed: leave the view
  await frame(); await frame();
  const tab = document.querySelector(`[data-view-tab="${name}"]`);
  const view = document.querySelector(`[data-view="${name}"]`);
  const t0 = performance.now();
  tab.click();
  const sync = performance.now() - t0;
  if (view.hidden) throw new Error(`the ${name} view is still hidden`);
  await frame();
  return {sync, frame: performance.now() - t0};
}
"""


def build_compare_page(folder: Path, T: int, n: int) -> tuple[Path, int]:
    """An exported page of ``iglens_viz.compare(a, b)``: two T × n results, one pin each."""
    from ui.helpers import synthetic_result

    import iglens_viz

    a = synthetic_result(T=T, n=n, K=5, seed=0, vocab=49152)
    b = synthetic_result(T=T, n=n, K=5, seed=1, vocab=49152)
    path = folder / f"bench-compare-{T}x{n}.html"
    iglens_viz.compare(a, b, view="heatmap").to_html(path)
    return path, path.stat().st_size


def run_views(T: int, n: int, repeats: int) -> dict:
    """Grid render (tab click → logit-lens grid drawn, next frame included) on the T × n page,
    and compare render (tab click → pinned curves and both results' panels drawn) on a
    ``compare(a, b)`` page of two T × n results. Medians over ``repeats`` switches."""
    from playwright.sync_api import sync_playwright
    from ui.helpers import PageRecorder, launch_chromium

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        pages = {
            "grid": build_page(Path(tmp), T, n)[0],
            "compare": build_compare_page(Path(tmp), T, n)[0],
        }
        with sync_playwright() as p:
            browser = launch_chromium(p)
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            recorder = PageRecorder().attach(page)
            for name, path in pages.items():
                page.goto(path.as_uri())
                page.wait_for_selector("[data-token-index]", timeout=60_000)
                times, sync = [], []
                for q in range(repeats + 1):  # the first switch warms the JIT
                    got = page.evaluate(TAB_JS, name)
                    if q:
                        times.append(got["frame"])
                        sync.append(got["sync"])
                out[f"{name}_render_ms"] = median(times)
                out[f"{name}_sync_ms"] = median(sync)
                out[f"{name}_all"] = times
            out["view_problems"] = recorder.console_errors + recorder.page_errors + recorder.network
            browser.close()
    return out


def report_views(args) -> dict:
    """Print the grid and compare render rows (see :func:`run_views`)."""
    v = run_views(args.tokens, args.blocks, args.repeats)

    def verdict(value, goal):
        return "meets" if value <= goal else "MISSES"

    print(
        f"  grid render (tab click -> drawn)      {v['grid_render_ms']:7.1f} ms  "
        f"goal <= {GOAL_GRID_MS:.0f} ms: {verdict(v['grid_render_ms'], GOAL_GRID_MS)}"
        f"   (median of {args.repeats} switches; {v['grid_sync_ms']:.1f} ms in the handler)"
    )
    print(
        f"  compare render (2 results, tab->drawn){v['compare_render_ms']:7.1f} ms  "
        f"goal <= {GOAL_COMPARE_MS:.0f} ms: "
        f"{verdict(v['compare_render_ms'], GOAL_COMPARE_MS)}"
        f"   (median of {args.repeats} switches; {v['compare_sync_ms']:.1f} ms in the handler)"
    )
    if v["view_problems"]:
        print(f"  page problems (grid/compare): {v['view_problems']}")
    return v


def run_lazy_path(T: int, steps: int, repeats: int, model: str = "default") -> dict:
    """Per-token lazy interior path: what the kernel does between a click's ``path`` command
    and its answer (``IGLensWidget.dispatch`` → ``IGLens.interior_path`` at ``steps``, the
    ``path`` trait set, the envelope built), on a T-token prompt whose forward pass is cached.

    ``model="default"``: the embedded SmolLM2-135M (30 blocks, 49,152-token vocabulary), the
    size the goal is about; falls back to a tiny random Llama when it cannot be loaded.
    Median over ``repeats`` positions (after one warm-up request).
    """
    import time

    import numpy as np

    from iglens_viz import IGLens
    from iglens_viz.widget import IGLensWidget

    name, engine = model, None
    if model == "default":
        try:
            from iglens_viz import load_model

            engine = IGLens(*load_model())
            name = "SmolLM2-135M (embedded default)"
        except Exception as err:  # noqa: BLE001 - a benchmark: say so and go on
            print(f"  (the default model did not load: {err}; using a tiny random Llama)")
    if engine is None:
        from tiny_models import tiny_model, tiny_tokenizer

        model = tiny_model("llama", num_hidden_layers=30, max_position_embeddings=max(64, T))
        engine = IGLens(model, tiny_tokenizer())
        name = "tiny random Llama, 30 blocks"
    rng = np.random.default_rng(0)
    ids = [int(i) for i in rng.integers(0, min(int(engine.readout.vocab_size), 30000), T)]
    result = engine.attribute(ids)  # steps = 1: no path in the result
    w = IGLensWidget(result, engine)
    positions = [
        int(p)
        for p in rng.choice(np.flatnonzero(result.target_ids >= 0), repeats + 1, replace=False)
    ]
    times = []
    for n, position in enumerate(positions):
        command = {"kind": "path", "id": f"b{n}", "result_id": w.result_id}
        t0 = time.perf_counter()
        answer = w.dispatch({**command, "position": position, "steps": steps})
        elapsed = 1000 * (time.perf_counter() - t0)
        if answer is None or not answer["ok"]:
            raise RuntimeError(answer and answer["error"])
        if n:  # the first request warms the readout
            times.append(elapsed)
    return dict(
        lazy_T=T,
        lazy_blocks=int(engine.n_blocks),
        lazy_steps=steps,
        lazy_model=name,
        lazy_repeats=repeats,
        lazy_path_ms=median(times),
        lazy_path_all=times,
    )


def report_lazy_path(args) -> dict:
    """Print the lazy per-token path row (see :func:`run_lazy_path`)."""
    v = run_lazy_path(args.tokens, args.path_steps, 3 if args.quick else 15, args.path_model)
    verdict = "meets" if v["lazy_path_ms"] <= GOAL_LAZY_PATH_MS else "MISSES"
    print(
        f"  lazy interior path of one token       {v['lazy_path_ms']:7.1f} ms  "
        f"goal <= {GOAL_LAZY_PATH_MS:.0f} ms: {verdict}   (median of {v['lazy_repeats']} "
        f"tokens; m={v['lazy_steps']}, {v['lazy_T']} tokens x {v['lazy_blocks']} blocks, "
        f"{v['lazy_model']}; kernel side: path command -> path)"
    )
    return v


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--blocks", type=int, default=30)
    parser.add_argument("--loads", type=int, default=7)
    parser.add_argument("--clicks", type=int, default=25)
    parser.add_argument(
        "--repeats", type=int, default=9, help="tab switches timed for the grid and compare renders"
    )
    parser.add_argument("--quick", action="store_true", help="3 loads, 8 clicks")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    parser.add_argument(
        "--path-steps",
        type=int,
        default=8,
        help="interpolation steps of the lazy per-token path (default 8)",
    )
    parser.add_argument(
        "--path-model",
        choices=("default", "tiny"),
        default="default",
        help="model of the lazy-path row (default: the embedded SmolLM2)",
    )
    parser.add_argument("--no-path", action="store_true", help="skip the lazy-path row")
    args = parser.parse_args()
    if args.quick:
        args.loads, args.clicks, args.repeats = 3, 8, 3
    r = run(args.tokens, args.blocks, args.loads, args.clicks)

    def verdict(value, goal):
        return "meets" if value <= goal else "MISSES"

    print(
        f"IG-Lens widget: exported page, {r['T']} tokens x {r['n']} blocks "
        f"({r['page_bytes'] / 1e6:.2f} MB), Chromium {r['chromium']}, "
        f"{platform.machine()} {platform.system()}"
    )
    print(
        f"  first render (script start -> drawn)  {r['first_render_ms']:7.1f} ms  "
        f"goal <= {GOAL_RENDER_MS:.0f} ms: {verdict(r['first_render_ms'], GOAL_RENDER_MS)}"
        f"   (median of {r['loads']} loads)"
    )
    print(f"    mount() alone                       {r['mount_ms']:7.1f} ms")
    print(f"    navigation start -> drawn           {r['navigation_to_drawn_ms']:7.1f} ms")
    print(
        f"  click -> detail panel updated         {r['click_to_detail_ms']:7.1f} ms  "
        f"goal <= {GOAL_CLICK_MS:.0f} ms: {verdict(r['click_to_detail_ms'], GOAL_CLICK_MS)}"
        f"   (median of {r['clicks']} clicks)"
    )
    print(
        f"    of which synchronous in the handler {r['click_sync_ms']:7.1f} ms  "
        f"({r['click_sync_count']}/{r['clicks']} clicks updated synchronously)"
    )
    print(f"    click -> next frame drawn           {r['click_to_frame_ms']:7.1f} ms")
    if r["problems"]:
        print(f"  page problems: {r['problems']}")
    r.update(report_views(args))
    if not args.no_path:
        r.update(report_lazy_path(args))
    if args.json:
        args.json.write_text(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
