"""The kernel-free site (issue 38) in headless Chromium: the default model's exported folder
served by a local static server, every request off that origin failed. A typed question is
answered in the page (onnxruntime-web, WebAssembly) with Python's greedy tokens, per-block
probabilities within the manifest's tolerance of Python's ``attribute``, Σ contributions = Δp
in float32; the ledger is drawn; Cancel stops a second question. Prints the timings and the
tab's memory (``-s`` shows them). The shipped lesson is drawn while the model still loads
(it needs no session); a part with one byte flipped stops the load with one line naming it.

The export takes minutes: set ``IGLENS_SITE_DIR`` to a folder exported before (``iglens
export-site DIR``) to reuse it (its page is rewritten from the current bundle).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

import iglens_viz
from iglens_viz.export.site import read_manifest

from .site_server import fail_off_origin, serve_site, site_state, wait_for_site

pytestmark = [pytest.mark.browser, pytest.mark.real_model]

QUESTION = "What is the capital of France?"
SECOND = "Name three rivers of Europe and say where each one rises."
FLOAT32_SUM = 64 * 2.0**-24
"""|Σ contributions − Δp| allowed: the float32 rounding of 30 differences and their sum."""


@pytest.fixture(scope="module")
def site(default_site) -> Path:
    """The default site (exported once per run: tests/conftest.py)."""
    return default_site


@pytest.fixture(scope="module")
def served(site):
    server, url = serve_site(site)
    yield url
    server.shutdown()


@pytest.fixture(scope="module")
def python_answer():
    """Python's answer to the question, and its seconds (the same machine, the same run)."""
    model, tokenizer = iglens_viz.load_model()
    engine = iglens_viz.IGLens(model, tokenizer)
    started = time.monotonic()
    result = engine.attribute(QUESTION, chat=True, max_new_tokens=12)
    return result, time.monotonic() - started


def test_a_typed_question_is_answered_in_the_page_as_in_python(
    browser, served, site, python_answer
):
    manifest = read_manifest(site)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    off_origin = fail_off_origin(page, served)
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    started = time.monotonic()
    page.goto(served)
    assert wait_for_site(page, ("ready", "error")) == "ready", page.evaluate(
        "() => iglensSite.error"
    )
    loaded = time.monotonic() - started
    backend = page.text_content("[data-testid=site-backend]")
    assert "WebAssembly" in backend or "WebGPU" in backend

    page.fill("[data-testid=site-question]", QUESTION)
    asked = time.monotonic()
    page.click("[data-testid=site-ask]")
    assert wait_for_site(page, ("done", "error")) == "done", page.evaluate("() => iglensSite.error")
    answered = time.monotonic() - asked
    got = page.evaluate(
        "() => ({ids: iglensSite.inputIds, targets: iglensSite.targetIds,"
        " probs: iglensSite.lensProbs, completeness: iglensSite.completeness,"
        " timings: iglensSite.timings})"
    )
    ref, python_seconds = python_answer
    assert got["ids"] == [int(i) for i in ref.input_ids]  # the prompt and the greedy answer
    n = manifest["model"]["n_blocks"]
    probs = np.array(got["probs"]).reshape(len(got["ids"]), n + 1)
    has = ref.target_ids >= 0
    assert (np.array(got["targets"])[has] == ref.target_ids[has]).all()
    diff = float(np.abs(probs - ref.lens_probs)[has].max())
    assert diff <= manifest["tolerance"]["max_abs_diff_block_probability"], diff
    assert got["completeness"] <= FLOAT32_SUM
    assert page.locator("[data-token-index]").count() == len(got["ids"])  # the ledger drawn

    # Cancel stops a second question between graph calls; the first answer stays drawn
    page.fill("[data-testid=site-question]", SECOND)
    page.click("[data-testid=site-ask]")
    page.click("[data-testid=site-cancel]")
    assert wait_for_site(page, ("cancelled", "done", "error"), limit=120) == "cancelled"
    assert "Cancelled" in page.text_content("[data-testid=site-status]")
    assert page.locator("[data-token-index]").count() == len(got["ids"])
    assert page.is_enabled("[data-testid=site-ask]")

    paint = page.evaluate(
        "() => performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null"
    )
    cdp = context.new_cdp_session(page)
    cdp.send("Performance.enable")
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    # the tab's memory, WebAssembly heaps included (the page is cross-origin isolated)
    tab = page.evaluate(
        "async () => performance.measureUserAgentSpecificMemory ?"
        " (await performance.measureUserAgentSpecificMemory()).bytes : null"
    )
    figures = {
        "backend": backend,
        "first_paint_ms": paint,
        "model_load_s": round(loaded, 1),
        "question_to_ledger_s": round(answered, 1),
        "python_attribute_s": round(python_seconds, 1),
        "page_over_python": round(answered / python_seconds, 2),
        "page_timings_ms": {k: round(v) for k, v in got["timings"].items()},
        "max_abs_diff_block_probability": diff,
        "completeness": got["completeness"],
        "js_heap_used_mb": round(metrics.get("JSHeapUsedSize", 0) / 1e6, 1),
        "js_heap_total_mb": round(metrics.get("JSHeapTotalSize", 0) / 1e6, 1),
        "tab_memory_mb": None if tab is None else round(tab / 1e6, 1),
    }
    print("\nsite figures:", json.dumps(figures))
    assert off_origin == [] and errors == []
    context.close()


def test_the_shipped_lesson_is_drawn_at_first_paint_before_the_model(browser, served, site):
    lesson = read_manifest(site)["lessons"][0]
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    off_origin = fail_off_origin(page, served)
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(served)
    end = time.monotonic() + 60
    while page.evaluate("() => window.iglensSite?.lesson ?? null") is None:
        assert time.monotonic() < end, page.text_content("[data-testid=site-lesson]")
        time.sleep(0.05)
    # drawn while the model still loads: the lesson needs no session
    assert site_state(page) == "loading"
    assert page.locator("[data-token-index]").count() == lesson["positions"]
    caption = page.text_content("[data-testid=site-lesson]")
    assert lesson["question"] in caption and f"{lesson['positions']} positions" in caption
    picker = page.locator('[data-testid=site-lessons] option:not([value=""])')
    assert picker.all_text_contents() == [e["question"] for e in read_manifest(site)["lessons"]]
    # the lesson stays while the model loads; every part was checked before the sessions
    assert wait_for_site(page, ("ready", "error")) == "ready", page.evaluate(
        "() => iglensSite.error"
    )
    assert page.locator("[data-token-index]").count() == lesson["positions"]
    timings = page.evaluate("() => iglensSite.timings")
    assert page.evaluate("() => iglensSite.verified") is True
    print("\nlesson and check figures:", json.dumps({k: round(v) for k, v in timings.items()}))
    assert off_origin == [] and errors == []
    context.close()


def test_a_damaged_part_is_one_error_line_naming_it(browser, site, tmp_path):
    # the site's files linked, one weight part copied with one byte flipped
    damaged = tmp_path / "site"
    for path in site.rglob("*"):
        if path.is_file():
            (damaged / path.relative_to(site)).parent.mkdir(parents=True, exist_ok=True)
            (damaged / path.relative_to(site)).symlink_to(path)
    part = damaged / "graphs" / "weights-03.bin"
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0x01
    part.unlink()
    part.write_bytes(bytes(data))
    server, origin = serve_site(damaged)
    try:
        context = browser.new_context()
        page = context.new_page()
        off_origin = fail_off_origin(page, origin)
        page.goto(origin)
        assert wait_for_site(page, ("ready", "error")) == "error"
        status = page.text_content("[data-testid=site-status]")
        assert status == (
            "Could not load the model: DamagedFile: graphs/weights-03.bin is damaged "
            "(its sha256 is not the manifest's): copy or export the site again"
        )
        # nothing else ran: no session, no backend, Ask stays disabled
        assert page.evaluate("() => iglensSite.backend ?? null") is None
        assert page.text_content("[data-testid=site-backend]") == ""
        assert not page.is_enabled("[data-testid=site-ask]")
        assert off_origin == []
        context.close()
    finally:
        server.shutdown()
