"""Shared by the export tests, the browser tests and the widget benchmark.

* :func:`synthetic_result`: an :class:`AttributionResult` of any size with exact
  telescoping sums, made without a model (hostile token strings welcome).
* :func:`launch_chromium`: Playwright on Debian's Chromium (no browser download), with
  background networking off.
* :class:`PageRecorder`: every console error, page error and non-local request of a page.
* :data:`STRIP_CUT`: the token strip's chips that show cut in half; :data:`CURVE_FITS` and
  :func:`curve_fits`: the student view's curve drawn within its column.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from iglens_viz.core.request import AttributionRequest
from iglens_viz.core.result import AttributionResult

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")

STRIP_CUT = """(root) => {
  // the token strip's chips under root that show in part only, cut at the strip's top or
  // bottom edge (its inner box); and whether the selected token shows whole
  const list = root.querySelector('.iglens-strip');
  const box = list.getBoundingClientRect();
  const top = box.top + list.clientTop, bottom = top + list.clientHeight;
  const cut = [];
  for (const c of list.querySelectorAll('.iglens-token, .iglens-template-fold')) {
    const q = c.getBoundingClientRect();
    if (q.height === 0 || q.bottom <= top + 0.5 || q.top >= bottom - 0.5) continue;
    if (q.top < top - 0.5 || q.bottom > bottom + 0.5) cut.push(c.textContent);
  }
  const sel = root.querySelector('.iglens-token.iglens-selected');
  const s = sel && sel.getBoundingClientRect();
  return {cut, selected: s ? s.top >= top - 0.5 && s.bottom <= bottom + 0.5 : null,
          height: list.clientHeight, scroll: list.scrollHeight};
}"""
"""JS for ``page.evaluate(STRIP_CUT, root)``: the strip's chips cut in half (issue 32: a
projector shows no half line of tokens) and whether the selected one shows whole."""

CURVE_FITS = """(out) => {
  // the student view's curve under out against its column, scrolled into view
  const v = out.querySelector('[data-view=lesson]');
  const svg = v.querySelector('svg.iglens-lesson-curve');
  if (!svg) return null;  // between two drawings
  svg.scrollIntoView({block: 'nearest'});  // the notebook scrolled to it, as a reader does
  const left = v.querySelector('.iglens-lesson-left').getBoundingClientRect();
  const column = v.querySelector('.iglens-lesson-column').getBoundingClientRect();
  const s = svg.getBoundingClientRect();
  // the last block's point of the walk's subject: its x in the svg (drawn 1:1, viewBox = size)
  const line = v.querySelector('polyline.iglens-lesson-line');
  const pts = line.getAttribute('points').trim().split(' ');
  const lastX = s.left + Number(pts[pts.length - 1].split(',')[0]);
  const hit = document.elementFromPoint(lastX, s.top + s.height / 2);
  return {drawn: Number(svg.getAttribute('width')), shown: s.width, column: left.width,
          right: s.right, leftRight: left.right, lastX,
          // the lens column beside the curve (or under it, in a narrow view), never over it
          apart: s.right <= column.left || s.bottom <= column.top,
          lastVisible: !!hit && svg.contains(hit),
          dark: out.querySelector('.iglens-root').classList.contains('iglens-dark'),
          present: out.querySelector('.iglens-root').classList.contains('iglens-present')};
}"""


def curve_fits(m: dict | None) -> bool:
    """The student view's curve, measured by :data:`CURVE_FITS`, drawn within its column: no
    wider, the lens column beside or under it, the last block's point on screen and its own."""
    return (
        m is not None
        and m["drawn"] <= m["column"]
        and m["right"] <= m["leftRight"] + 0.5
        and m["apart"]
        and m["lastX"] <= m["leftRight"]
        and m["lastVisible"]
    )


def chromium_path() -> str | None:
    """Debian's Chromium, if installed."""
    for path in (CHROMIUM, shutil.which("chromium") or "", shutil.which("chromium-browser") or ""):
        if path and Path(path).is_file():
            return path
    return None


def launch_chromium(playwright, **kwargs):
    """A headless Chromium browser from the system package."""
    path = chromium_path()
    if path is None:
        raise RuntimeError("Chromium is not installed: apt-get install -y chromium")
    return playwright.chromium.launch(
        executable_path=path, args=CHROMIUM_ARGS, headless=True, **kwargs
    )


@dataclass
class PageRecorder:
    """Collects a page's console errors, uncaught errors and requests leaving the machine."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    network: list[str] = field(default_factory=list)

    def attach(self, page, *, allow_hosts: tuple[str, ...] = ()) -> PageRecorder:
        def on_console(msg):
            if msg.type == "error":
                self.console_errors.append(msg.text)

        def on_request(request):
            url = request.url
            if url.startswith(LOCAL_SCHEMES):
                return
            if any(url.startswith(f"http://{h}") for h in allow_hosts):
                return
            self.network.append(url)

        page.on("console", on_console)
        page.on("pageerror", lambda err: self.page_errors.append(str(err)))
        page.on("request", on_request)
        return self


def synthetic_result(
    T: int = 12,
    n: int = 6,
    K: int = 5,
    *,
    tokens: list[str] | None = None,
    steps: int = 1,
    seed: int = 0,
    vocab: int = 500,
    boundaries: list[int] | None = None,
) -> AttributionResult:
    """A plausible attribution of T positions over n blocks, without a model.

    Lens probabilities wander from a small start to a final value with some non-monotone
    stretches; contributions are their first differences (exact completeness). Token ids
    come from ``tokens`` (reused as the vocabulary's text) or are ``tok{id}``.
    """
    rng = np.random.default_rng(seed)
    bounds = list(range(n + 1)) if boundaries is None else list(boundaries)
    k = len(bounds) - 1
    if tokens is None:
        input_ids = rng.integers(0, vocab, T)
    else:
        T = len(tokens)
        input_ids = np.arange(T) % vocab
    walk = np.cumsum(rng.normal(0, 0.12, (T, n + 1)), axis=1)
    walk += np.linspace(-3, rng.uniform(-1, 3), n + 1)[None]
    probs_all = 1 / (1 + np.exp(-walk))
    lens = probs_all[:, bounds]
    contributions = np.diff(lens, axis=1)
    target_ids = rng.integers(0, vocab, T)
    top_ids = rng.integers(0, vocab, (T, k + 1, K))
    top_ids[:, :, 0] = target_ids[:, None]
    top_probs = np.sort(rng.dirichlet(np.ones(K + 1), (T, k + 1))[..., :K], axis=-1)[..., ::-1]
    top_probs[:, :, 0] = np.maximum(top_probs[:, :, 0], lens)
    path = None
    if steps > 1:
        alphas = np.linspace(0, 1, steps + 1)
        wiggle = 0.02 * np.sin(np.pi * alphas)[None, None] * rng.normal(size=(T, k, 1))
        path = lens[:, :-1, None] + alphas[None, None] * contributions[..., None] + wiggle
        path[..., 0], path[..., -1] = lens[:, :-1], lens[:, 1:]
    text = {}
    if tokens is not None:
        for i, tok in zip(input_ids, tokens):
            text[int(i)] = tok
    used = np.unique(np.concatenate([input_ids, target_ids, top_ids.ravel()]))
    for i in used:
        text.setdefault(int(i), f"tok{int(i)}")
    onset = np.asarray(bounds)[1:][np.argmax(contributions, axis=1)]
    return AttributionResult(
        tokens=[text[int(i)] for i in input_ids],
        input_ids=input_ids.astype(np.int64),
        target_ids=target_ids.astype(np.int64),
        target_tokens=[text[int(i)] for i in target_ids],
        boundaries=bounds,
        lens_probs=lens,
        contributions=contributions,
        delta_p=lens[:, -1] - lens[:, 0],
        onset=onset.astype(np.int64),
        top_ids=top_ids.astype(np.int64),
        top_probs=top_probs,
        request=AttributionRequest(tuple(int(i) for i in input_ids), steps=steps),
        path_probs=path,
        n_blocks=n,
        family="synthetic",
        model_name="synthetic",
        token_text=text,
        prompt_length=T,
    )
