"""Regenerate docs/screenshots/widget-{light,dark}.png from the real default model.

The exported page of ``lens.attribute("What is the capital of Vietnam?", chat=True,
max_new_tokens=12)`` on SmolLM2-135M-Instruct (``iglens_viz.load_model()``), opened from
file:// in headless Chromium with the light and dark colour schemes, the answer's first
token selected, with its head split (``lens.with_components``). Not a test; run from the
repository root::

    python tests/ui/make_screenshots.py [--out docs/screenshots]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

PROMPT = "What is the capital of Vietnam?"


def real_page(folder: Path) -> tuple[Path, int]:
    import iglens_viz
    from iglens_viz.export import to_html

    model, tokenizer = iglens_viz.load_model()
    lens = iglens_viz.IGLens(model, tokenizer)
    result = lens.attribute(PROMPT, chat=True, max_new_tokens=12)
    if Path(result.model_name).is_absolute():
        # The default model loads from a local cache folder; show its name, not the path.
        from iglens_viz.loading import DEFAULT_MODEL_NAME

        result = dataclasses.replace(result, model_name=DEFAULT_MODEL_NAME)
    answer = [int(i) for i in result.answer_positions]
    # Open on the position after "... is": its target is the answer's city, the telling one.
    named = [i for i in answer if result.tokens[i].strip() == "is"]
    selected = (named or answer or [len(result.input_ids) - 1])[0]
    # The selected token's head split, as a widget click computes it (8 steps per segment).
    result = lens.with_components(result, [selected], steps=8)
    path = folder / "vietnam.html"
    to_html(result, path, selected=selected, title=f"IG-Lens · {PROMPT}")
    return path, selected


def shoot(page_path: Path, out: Path, selected: int, *, width: int = 1280) -> list[Path]:
    from playwright.sync_api import sync_playwright

    from ui.helpers import PageRecorder, launch_chromium

    written = []
    with sync_playwright() as p:
        browser = launch_chromium(p)
        for scheme in ("light", "dark"):
            context = browser.new_context(color_scheme=scheme, device_scale_factor=1,
                                          viewport={"width": width, "height": 900})
            page = context.new_page()
            recorder = PageRecorder().attach(page)
            page.goto(page_path.as_uri())
            page.wait_for_selector("[data-selected-index]", timeout=30_000)
            # Bring the selected token into view in the strip and the heatmap (a selection
            # change scrolls both), then park the mouse outside the views.
            token = page.locator(f"[data-token-index='{selected}']")
            token.scroll_into_view_if_needed()
            token.focus()
            page.keyboard.press("ArrowRight")
            page.keyboard.press("ArrowLeft")
            page.wait_for_selector(f"[data-selected-index='{selected}']")
            page.mouse.move(2, 2)
            page.evaluate("window.scrollTo(0, 0)")
            page.wait_for_timeout(300)  # canvases draw on the next animation frame
            target = out / f"widget-{scheme}.png"
            page.screenshot(path=str(target), full_page=True)
            problems = recorder.console_errors + recorder.page_errors + recorder.network
            if problems:
                raise RuntimeError(f"{scheme}: {problems}")
            written.append(target)
            context.close()
        browser.close()
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        page, selected = real_page(Path(tmp))
        for path in shoot(page, args.out, selected):
            print(f"wrote {path} (selected position {selected})")


if __name__ == "__main__":
    main()
