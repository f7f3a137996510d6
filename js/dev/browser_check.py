"""Drive the dev harness in headless Chromium: screenshots (light/dark), real clicks and
keys, and timings. A developer tool, not part of `npm test`.

    npm run build
    python js/dev/browser_check.py [--out /tmp/iglens-shots]

Needs the Python `playwright` package and a Chromium (Debian: /usr/bin/chromium; no
browser download). Prints the timings and the screenshot paths; exits non-zero when an
interaction check fails or a timing exceeds its budget.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from playwright.sync_api import sync_playwright

HERE = pathlib.Path(__file__).resolve().parent
HARNESS = (HERE / "index.html").as_uri()

TIMING_JS = """async ({T}) => {
  const el = document.getElementById('app');
  const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
  const out = {};
  const tokens = el.querySelectorAll('[data-token-index]');
  const sync = [], painted = [];
  const picks = [Math.floor(T / 2), Math.floor(T / 3), T - 2, 5, Math.floor(T / 4), 7, 11, 17, 23];
  for (const i of picks) {
    await new Promise((r) => setTimeout(r, 30));
    const t0 = performance.now();
    tokens[i].click();
    void el.querySelector('.iglens-detail').getBoundingClientRect().height; // style + layout
    sync.push(performance.now() - t0);
    await frame();
    painted.push(performance.now() - t0);
    const shown = el.querySelector('.iglens-detail').getAttribute('data-selected-index');
    if (shown !== String(i)) out.error = 'detail did not follow';
  }
  const med = (a) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)];
  out.click_median_ms = med(sync);
  out.click_max_ms = sync[sync.length - 1];
  out.click_to_next_frame_median_ms = med(painted);
  return out;
}"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/iglens-shots")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    report: dict[str, object] = {}

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=args.chromium, args=["--no-sandbox", "--allow-file-access-from-files"]
        )
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

        # 1. screenshots of the fixture, light and dark
        for theme in ("light", "dark"):
            page.goto(f"{HARNESS}?theme={theme}")
            page.wait_for_selector("body[data-ready='1']")
            path = out / f"widget-{theme}.png"
            page.screenshot(path=str(path), full_page=True)
            report[f"screenshot_{theme}"] = str(path)

        # 2. real mouse and keyboard
        page.goto(f"{HARNESS}?theme=light&select=-1")
        page.wait_for_selector("body[data-ready='1']")
        page.click("[data-token-index='2']")
        detail = page.locator(".iglens-detail")
        if detail.get_attribute("data-selected-index") != "2":
            failures.append("click on token 2 did not select it")
        page.keyboard.press("ArrowRight")
        if detail.get_attribute("data-selected-index") != "3":
            failures.append("ArrowRight did not move to 3")
        page.keyboard.press("Escape")
        if detail.get_attribute("data-selected-index") is not None:
            failures.append("Escape did not clear")
        canvas = page.locator("canvas.iglens-heatmap-canvas")
        box = canvas.bounding_box()
        assert box is not None
        page.mouse.move(box["x"] + box["width"] * 0.62, box["y"] + 24 + 10 * 20 + 8)
        page.wait_for_selector(".iglens-tooltip:not([hidden])")
        path = out / "widget-tooltip.png"
        page.screenshot(path=str(path), full_page=True)
        report["screenshot_tooltip"] = str(path)
        page.mouse.click(box["x"] + box["width"] * 0.62, box["y"] + 24 + 10 * 20 + 8)
        if detail.get_attribute("data-selected-index") != "10":
            failures.append("clicking heatmap row 10 did not select it")

        # 3. timings: 512 tokens x 30 blocks, and 1,000 x 40 with a path
        for T, blocks, steps, budget in ((512, 30, 1, 300), (1000, 40, 4, None)):
            page.goto(
                f"{HARNESS}?theme=light&T={T}&blocks={blocks}&steps={steps}&answer={T - 60}&perf=1"
            )
            page.wait_for_selector("body[data-ready='1']")
            text = page.locator("#perf").inner_text()
            first = float(text.split("to second frame: ")[1].split(" ms")[0])
            mount_ms = float(text.split("mount + layout: ")[1].split(" ms")[0])
            clicks = page.evaluate(TIMING_JS, {"T": T})
            key = f"T{T}_k{blocks}"
            report[key] = {"mount_layout_ms": mount_ms, "first_frame_ms": first, **clicks}
            if budget is not None and first > budget:
                failures.append(f"{key}: first render {first:.0f} ms > {budget} ms")
            if clicks.get("click_median_ms", 0) > 50:
                failures.append(
                    f"{key}: click → detail median {clicks['click_median_ms']:.0f} ms > 50 ms"
                )
            if "error" in clicks:
                failures.append(f"{key}: {clicks['error']}")
            path = out / f"widget-{T}x{blocks}.png"
            page.screenshot(path=str(path))
            report[f"screenshot_{key}"] = str(path)

        # 4. narrow cell
        page.set_viewport_size({"width": 640, "height": 900})
        page.goto(f"{HARNESS}?theme=dark")
        page.wait_for_selector("body[data-ready='1']")
        path = out / "widget-narrow-dark.png"
        page.screenshot(path=str(path), full_page=True)
        report["screenshot_narrow_dark"] = str(path)
        browser.close()

    if errors:
        failures.append(f"page errors: {errors[:5]}")
    print(json.dumps(report, indent=2))
    for f in failures:
        print("FAIL:", f)
    print(f"{'FAILED' if failures else 'OK'}: {len(failures)} problem(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
