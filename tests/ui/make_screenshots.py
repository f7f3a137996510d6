"""Regenerate docs/screenshots/*.png from the real default model.

The exported page of ``lens.attribute("What is the capital of Vietnam?", chat=True,
max_new_tokens=12)`` on SmolLM2-135M-Instruct (``iglens_viz.load_model()``), opened from
file:// in headless Chromium with the light and dark colour schemes at 1280, 1024 and 700 px,
with the token before the answer's city selected and its head split
(``lens.with_components``): the default view (``widget-{light,dark}.png``,
``widget-1024-…``, ``widget-700-…``), the logit-lens grid (``grid-…``) and the compare view
of the Vietnam and France prompts on one colour scale (``compare-…``); and presentation mode
(the header's "present" button clicked) on a 1024×768 projector, the viewport as shown: the
default view (``present-1024-…``), the grid (``present-grid-1024-…``) and the compare view
(``present-compare-1024-…``); and the student view (``view = "lesson"``, no ``selected=``: it
opens on the answer's first content token, ``[41] ␣is → ␣Ho``) at 1280×800 and 1024×768, the
viewport as shown (``lesson-1280-…``, ``lesson-1024-…``; the README's first picture); and the
block-gate game of ``[41] ␣is → ␣Ho`` against "What is the capital of Italy?", played as the
page's Compare button plays it (``IGLensWidget.gate_game``): its panel in the detail view at
1280 and 1024 px (``gates-…``, ``gates-1024-…``), in presentation mode at 1024×768
(``gates-present-1024-…``) and in the student view at 1024×768 (``gates-lesson-1024-…``). Not
a test; run from the repository root::

    python tests/ui/make_screenshots.py [--out docs/screenshots] [--only gates]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from itertools import product
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

PROMPT = "What is the capital of Vietnam?"
OTHER_PROMPT = "What is the capital of France?"
WIDTHS = (1280, 1024, 700)
PROJECTOR = {"width": 1024, "height": 768}
LESSON = [(1280, 800), (1024, 768)]  # the student view's windows (tests/ui/test_lesson_view.py)
COUNTERFACTUAL = "What is the capital of Italy?"
# the gate game's panel: (page, viewport width, height, present mode, file name stem)
GATE_SHOTS = [
    ("gates", 1280, 900, False, "gates"),
    ("gates", 1024, 768, False, "gates-1024"),
    ("gates", 1024, 768, True, "gates-present-1024"),
    ("gates-lesson", 1024, 768, False, "gates-lesson-1024"),
]
PRESENT = {  # view -> file name stem
    "widget": "present-1024",
    "grid": "present-grid-1024",
    "compare": "present-compare-1024",
}

# Where, in present mode, the strip's selected token, the strip, the main view and the
# cumulative curve (the detail's second chart) are: the page should not scroll.
PRESENT_BOXES = """(main) => {
  const box = (el) => {
    if (!el) return null;
    const q = el.getBoundingClientRect();
    return {top: Math.round(q.top), bottom: Math.round(q.bottom)};
  };
  return {
    scrollTop: document.scrollingElement.scrollTop,
    token: box(document.querySelector('.iglens-token.iglens-selected')),
    strip: box(document.querySelector('.iglens-strip')),
    main: box(document.querySelector(main)),
    curve: box(document.querySelectorAll('.iglens-detail svg.iglens-chart')[1]),
  };
}"""
MAIN_VIEW = {
    "widget": ".iglens-heatmap-body",
    "grid": ".iglens-grid-scroll",
    "compare": ".iglens-compare-chart",
}


def _attribute(lens, prompt: str):
    """A chat answer's attribution and the position to open on."""
    result = lens.attribute(prompt, chat=True, max_new_tokens=12)
    if Path(result.model_name).is_absolute():
        # The default model loads from a local cache folder; show its name, not the path.
        from iglens_viz.loading import DEFAULT_MODEL_NAME

        result = dataclasses.replace(result, model_name=DEFAULT_MODEL_NAME)
    answer = [int(i) for i in result.answer_positions]
    # The position after "... is": its target is the answer's city, the telling one.
    named = [i for i in answer if result.tokens[i].strip() == "is"]
    return result, (named or answer or [len(result.input_ids) - 1])[0]


def real_pages(folder: Path) -> tuple[dict[str, Path], int, int]:
    """The exported pages to shoot, by view name, the selected position and the position
    the student view opens on by itself."""
    import iglens_viz
    from iglens_viz.export import to_html

    model, tokenizer = iglens_viz.load_model()
    lens = iglens_viz.IGLens(model, tokenizer)
    result, selected = _attribute(lens, PROMPT)
    # The student view as a teacher opens it: no selected=, it opens on the point.
    lesson = result.widget()
    lesson.view = "lesson"
    lesson.to_html(folder / "lesson.html")
    opens = lesson.selected
    # The selected token's head split, as a widget click computes it (8 steps per segment).
    result = lens.with_components(result, [selected], steps=8)
    pages = {
        "widget": folder / "vietnam.html",
        "grid": folder / "grid.html",
        "compare": folder / "compare.html",
    }
    to_html(result, pages["widget"], selected=selected)
    grid = result.widget(selected=selected)
    grid.view = "grid"
    grid.to_html(pages["grid"])
    other, other_selected = _attribute(lens, OTHER_PROMPT)
    iglens_viz.compare(
        result,
        other,
        labels=["Vietnam", "France"],
        pinned=[[0, selected], [1, other_selected]],
        selected=selected,
    ).to_html(pages["compare"])
    pages["lesson"] = folder / "lesson.html"
    pages.update(gate_pages(lens, folder))
    return pages, selected, opens


def gate_pages(lens, folder: Path) -> dict[str, Path]:
    """The Vietnam answer's widget with the gate game of the position it opens on played, as
    the page's button plays it, exported in the detail view and in the student view."""
    result, _ = _attribute(lens, PROMPT)
    widget = result.widget(lens)
    widget.gate_game(widget.selected, COUNTERFACTUAL)
    pages = {"gates": folder / "gates.html", "gates-lesson": folder / "gates-lesson.html"}
    widget.to_html(pages["gates"])
    widget.view = "lesson"
    widget.to_html(pages["gates-lesson"])
    return pages


def shoot(
    pages: dict[str, Path], out: Path, selected: int, opens: int, only: str | None = None
) -> list[Path]:
    from playwright.sync_api import sync_playwright
    from ui.helpers import PageRecorder, launch_chromium

    written = []
    with sync_playwright() as p:
        browser = launch_chromium(p)
        for name, width, height, present, stem in GATE_SHOTS:
            for scheme in ("light", "dark"):
                written.append(
                    _shoot_gates(
                        browser,
                        pages[name],
                        out / f"{stem}-{scheme}.png",
                        (width, height),
                        present,
                        scheme,
                    )
                )
        if only == "gates":
            browser.close()
            return written
        shown = {k: v for k, v in pages.items() if k not in ("lesson", "gates", "gates-lesson")}
        for (view, page_path), width, scheme in product(shown.items(), WIDTHS, ("light", "dark")):
            context = browser.new_context(
                color_scheme=scheme, device_scale_factor=1, viewport={"width": width, "height": 900}
            )
            page = context.new_page()
            recorder = PageRecorder().attach(page)
            page.goto(page_path.as_uri())
            page.wait_for_selector(f"[data-selected-index='{selected}']", timeout=30_000)
            page.mouse.move(2, 2)  # park the mouse outside the views
            page.evaluate("window.scrollTo(0, 0)")
            page.wait_for_timeout(300)  # canvases draw on the next animation frame
            size = "" if width == WIDTHS[0] else f"-{width}"
            target = out / f"{view}{size}-{scheme}.png"
            page.screenshot(path=str(target), full_page=True)
            problems = recorder.console_errors + recorder.page_errors + recorder.network
            if problems:
                raise RuntimeError(f"{view} {width} {scheme}: {problems}")
            written.append(target)
            context.close()
        for (view, stem), scheme in product(PRESENT.items(), ("light", "dark")):
            written.append(_shoot_present(browser, pages[view], out, view, stem, scheme, selected))
        for (width, height), scheme in product(LESSON, ("light", "dark")):
            lesson = pages["lesson"]
            written.append(_shoot_lesson(browser, lesson, out, width, height, scheme, opens))
        browser.close()
    return written


def _shoot_gates(browser, page_path: Path, target: Path, size, present: bool, scheme) -> Path:
    """The gate game's panel of an exported page (in present mode: switched on with its
    button), the panel's own box."""
    from ui.helpers import PageRecorder

    viewport = {"width": size[0], "height": size[1]}
    context = browser.new_context(color_scheme=scheme, device_scale_factor=1, viewport=viewport)
    page = context.new_page()
    recorder = PageRecorder().attach(page)
    page.goto(page_path.as_uri())
    panel = page.locator(".iglens-gates:visible").first
    panel.locator(".iglens-gates-figure").wait_for(timeout=60_000)
    if present:
        page.click("[data-action=present]")
        page.wait_for_timeout(400)
    page.mouse.move(2, 2)
    panel.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    panel.screenshot(path=str(target))
    problems = recorder.console_errors + recorder.page_errors + recorder.network
    if problems:
        raise RuntimeError(f"{target.name}: {problems}")
    context.close()
    return target


def _shoot_present(browser, page_path: Path, out: Path, view, stem, scheme, selected) -> Path:
    """Presentation mode switched on as a user would (its button), the 1024×768 viewport."""
    from ui.helpers import PageRecorder

    context = browser.new_context(color_scheme=scheme, device_scale_factor=1, viewport=PROJECTOR)
    page = context.new_page()
    recorder = PageRecorder().attach(page)
    page.goto(page_path.as_uri())
    page.wait_for_selector(f"[data-selected-index='{selected}']", timeout=30_000)
    page.click("[data-action=present]")
    if page.get_attribute("[data-action=present]", "aria-pressed") != "true":
        raise RuntimeError(f"present {view} {scheme}: the button did not switch it on")
    page.mouse.move(2, 2)  # park the mouse outside the views
    page.wait_for_timeout(400)  # the views redraw at the larger size on the next frame
    target = out / f"{stem}-{scheme}.png"
    page.screenshot(path=str(target))  # the viewport: what the projector shows
    boxes = page.evaluate(PRESENT_BOXES, MAIN_VIEW[view])
    off = [
        k
        for k, b in boxes.items()
        if k != "scrollTop" and (b is None or b["top"] < 0 or b["bottom"] > PROJECTOR["height"])
    ]
    if boxes["scrollTop"] or off:
        print(f"warning: present {view} {scheme}: not all on screen: {off} {boxes}")
    problems = recorder.console_errors + recorder.page_errors + recorder.network
    if problems:
        raise RuntimeError(f"present {view} {scheme}: {problems}")
    context.close()
    return target


def _shoot_lesson(browser, page_path: Path, out, width: int, height: int, scheme, opens) -> Path:
    """The student view where it opens (no ``selected=``), the viewport as shown; ``opens``:
    the position the widget chose (its ``selected``), which the page must show."""
    from ui.helpers import PageRecorder

    viewport = {"width": width, "height": height}
    context = browser.new_context(color_scheme=scheme, device_scale_factor=1, viewport=viewport)
    page = context.new_page()
    recorder = PageRecorder().attach(page)
    page.goto(page_path.as_uri())
    page.wait_for_selector("[data-view=lesson] svg.iglens-lesson-curve", timeout=60_000)
    page.mouse.move(2, 2)  # park the mouse outside the views
    page.wait_for_timeout(300)
    target = out / f"lesson-{width}-{scheme}.png"
    page.screenshot(path=str(target))
    opened = page.get_attribute("[data-view=lesson]", "data-position")
    if opened != str(opens):
        raise RuntimeError(f"lesson {width} {scheme}: opened on {opened}, not {opens}")
    problems = recorder.console_errors + recorder.page_errors + recorder.network
    if problems:
        raise RuntimeError(f"lesson {width} {scheme}: {problems}")
    context.close()
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--only", choices=("gates",), default=None, help="only these shots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        pages, selected, opens = real_pages(Path(tmp))
        for path in shoot(pages, args.out, selected, opens, args.only):
            at = opens if path.name.startswith("lesson-") else selected
            print(f"wrote {path} (selected position {at})")


if __name__ == "__main__":
    main()
