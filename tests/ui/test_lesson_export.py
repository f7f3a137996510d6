"""Issue 23's slides and two-level help, in an exported page in headless Chromium.

The page is a synthetic result with hostile token strings, exported with ``view = "lesson"``.
A click on the student view's SVG and PNG buttons downloads the slide: the SVG parses, its
title names the prompt and the lens (escaped, as text), and its curve read back through its
own axis labels is the lesson position's lens probability computed here from the result; the
PNG is a real PNG at twice the figure's size. In the full view the detail panel's curve
buttons download its cumulative curve the same way. The help opens on the student version in
the student view (the researcher text behind "More detail") and on the researcher text in the
full view.
"""

from __future__ import annotations

import re
import struct
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from iglens_viz.views.token_format import format_token

from .helpers import PageRecorder, synthetic_result

pytestmark = pytest.mark.browser

PWN = "<img src=x onerror=window.__pwned=1>"
TOKENS = [" The", " capital", "\u202e", " of", PWN, " Vietnam", " is", " Ho", " Chi"]
TIMEOUT = 30_000
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def result():
    return synthetic_result(tokens=TOKENS, n=6, seed=11)


@pytest.fixture(scope="module")
def page_url(result, tmp_path_factory):
    widget = result.widget()
    widget.view = "lesson"
    path = tmp_path_factory.mktemp("slides") / "lesson.html"
    widget.to_html(path)
    return path.as_uri()


@pytest.fixture
def opened(page, page_url):
    recorder = PageRecorder().attach(page)
    page.goto(page_url)
    page.wait_for_selector("[data-view=lesson] svg.iglens-lesson-curve", timeout=TIMEOUT)
    yield page
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("document.querySelectorAll('img, iframe, object, embed').length") == 0
    assert recorder.console_errors == [] and recorder.page_errors == []
    assert recorder.network == []


def parse_svg(data: bytes):
    root = ET.fromstring(data)
    assert root.tag == f"{SVG}svg"
    tags = {el.tag.removeprefix(SVG) for el in root.iter()}
    assert tags <= {"svg", "title", "rect", "text", "line", "polyline", "circle"}, tags
    texts = [("".join(t.itertext()), float(t.get("y"))) for t in root.iter(f"{SVG}text")]
    lines = [
        [tuple(map(float, pt.split(","))) for pt in pl.get("points").split()]
        for pl in root.iter(f"{SVG}polyline")
    ]
    return root.find(f"{SVG}title").text, texts, lines


def in_percent(texts, line):
    """A polyline's values in percent, through the figure's "0%" and top tick labels."""
    ticks = {float(t[:-1]): y for t, y in texts if re.fullmatch(r"[0-9.]+%", t)}
    top = max(ticks)
    return [(ticks[0] - y) / (ticks[0] - ticks[top]) * top for _, y in line]


def check_png(page, selector, name, width):
    with page.expect_download(timeout=TIMEOUT) as info:
        page.click(selector)
    assert info.value.suggested_filename == name
    with open(info.value.path(), "rb") as f:
        png = f.read()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    w, h = struct.unpack(">II", png[16:24])
    assert w == 2 * width and h > 2 * 300  # twice the figure's density


def test_lesson_slide_downloads_as_svg_and_png(opened, result):
    page = opened
    pos = int(page.get_attribute("[data-view=lesson]", "data-position"))
    with page.expect_download(timeout=TIMEOUT) as info:
        page.click("[data-view=lesson] [data-lesson-export=svg]")
    assert info.value.suggested_filename == "iglens-lesson-synthetic.svg"
    with open(info.value.path(), "rb") as f:
        title, texts, lines = parse_svg(f.read())
    prompt = format_token("".join(result.tokens[: pos + 1]), max_len=120)
    strings = [t for t, _ in texts]
    assert strings[0] == "IG-Lens lesson \u00b7 synthetic"
    assert strings[1] == f"prompt: \u201c{prompt}\u201d"
    assert "read through the logit lens" in strings[2]
    assert title == " \u00b7 ".join(strings[:3])
    assert "\u202e" not in "".join(strings)  # shown as a visible escape
    # one curve, the position's next token: its lens probability after each block, computed here
    (curve,) = lines
    want = 100 * np.asarray(result.lens_probs[pos], dtype=np.float64)
    np.testing.assert_allclose(in_percent(texts, curve), want, atol=0.05)
    # the slide ends with the story the page tells: the walk's sentences, in order
    story = page.locator("[data-view=lesson] .iglens-lesson-event").all_text_contents()
    assert story and strings[strings.index("Block by block:") + 1 :] == [f"• {e}" for e in story]
    assert page.text_content("[data-view=lesson] .iglens-slide-export-status") == (
        "saved iglens-lesson-synthetic.svg"
    )
    png = "[data-view=lesson] [data-lesson-export=png]"
    check_png(page, png, "iglens-lesson-synthetic.png", 960)


def test_detail_curve_downloads_as_svg_and_png(opened, result):
    page = opened
    page.click("[data-view-tab=heatmap]")
    page.wait_for_selector(".iglens-detail [data-curve-export=svg]", timeout=TIMEOUT)
    i = int(page.get_attribute(".iglens-detail", "data-selected-index"))
    with page.expect_download(timeout=TIMEOUT) as info:
        page.click(".iglens-detail [data-curve-export=svg]")
    assert info.value.suggested_filename == "iglens-curve-synthetic.svg"
    with open(info.value.path(), "rb") as f:
        _, texts, lines = parse_svg(f.read())
    assert f"at [{i}] {format_token(result.tokens[i], max_len=40)}" in texts[2][0]
    (curve,) = lines
    want = 100 * np.asarray(result.lens_probs[i], dtype=np.float64)
    np.testing.assert_allclose(in_percent(texts, curve), want, atol=0.05 * max(1, want.max() / 100))
    check_png(page, ".iglens-detail [data-curve-export=png]", "iglens-curve-synthetic.png", 960)


def test_help_shows_the_student_version_in_the_lesson_and_the_researcher_text_in_full(opened):
    page = opened
    student = ".iglens-help [data-help-level=student]"
    researcher = ".iglens-help [data-help-level=researcher]"
    page.click(".iglens-help-toggle")
    assert page.is_visible(student) and not page.is_visible(researcher)
    assert "Readable is not the same as computed" in page.text_content(student)
    assert page.text_content("[data-action=help-more]") == "More detail"
    page.click("[data-action=help-more]")
    assert page.is_visible(researcher)
    assert "conditional marginal" in page.text_content(researcher)
    page.click("[data-action=help-more]")
    assert not page.is_visible(researcher)
    page.click("[data-view-tab=heatmap]")  # the full view: the researcher text
    assert page.is_visible(student) and page.is_visible(researcher)
    assert page.text_content("[data-action=help-more]") == "Less detail"
