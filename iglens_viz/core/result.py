"""The attribution result: plain numpy arrays that every view, plot and export reads."""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, field, fields
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..errors import InvalidRequestError
from .answers import AnswerComparison, AnswerLedger
from .boundaries import depth_list, segment_labels
from .components import component_segments
from .extensions import provider
from .request import AttributionRequest
from .serial import json_ready
from .stats import argmax_rows

if TYPE_CHECKING:
    # Annotations only. The widget's own class (iglens_viz.widget, a floor above the core)
    # is named by its base, anywidget's AnyWidget: the import-floor test reads every import
    # of the source, these too.
    import pandas as pd
    from anywidget import AnyWidget
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from .lens import IGLens

_HUB_CACHE_FOLDER = re.compile(r"models--(.+?)--(.+)")  # huggingface_hub's cache layout
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def display_name(model: object = None, name: str | None = None) -> str:
    """The model's name as every view shows it (table title, widget header, page title,
    exported figures): ``name`` when given, else a short form of the config's
    ``name_or_path``.

    A hub id (``gpt2``, ``EleutherAI/pythia-70m``) is kept; a local folder shows as its last
    part (``…/models/SmolLM2-135M-Instruct`` → ``SmolLM2-135M-Instruct``), a folder of the
    hub's cache as its repo id (``…/models--org--name/snapshots/<hash>`` → ``org/name``).
    The name is raw text: the views escape it (it may come from an untrusted config).
    ``model`` is a model, its config, or the name/path string itself.
    """
    if name is not None:
        if not isinstance(name, str) or not name.strip():
            raise InvalidRequestError(f"name must be a non-empty string, got {name!r}")
        return name
    config = getattr(model, "config", model)
    raw = model if isinstance(model, str) else getattr(config, "name_or_path", "")
    raw = str(raw or "").strip()
    if (
        not raw
        or "/" not in raw.replace("\\", "/")
        or (_HUB_ID.fullmatch(raw) and not os.path.isdir(raw))
    ):
        return raw
    parts = PurePath(raw.replace("\\", "/")).parts
    for i, part in enumerate(parts):
        hub = _HUB_CACHE_FOLDER.fullmatch(part)
        if hub and i + 1 < len(parts) and parts[i + 1] in ("snapshots", "blobs"):
            return f"{hub.group(1)}/{hub.group(2)}"
    return parts[-1] if parts else raw


def onset_segments(contributions: npt.ArrayLike) -> np.ndarray:
    """The onset rule: for each row of ``contributions`` ``(T, k)``, the index j of the
    segment with the largest signed contribution (-1 for a row without finite values).

    Every view, table and validation that names an onset uses this one rule
    (:func:`~iglens_viz.core.stats.argmax_rows`).
    """
    return argmax_rows(contributions)


@dataclass
class AttributionResult:
    """IG-Lens attribution of one sequence.

    T is the number of positions, k the number of segments (``len(boundaries) - 1``), K the
    number of lens tokens kept per boundary, m the interpolation steps per segment. Positions
    without a target (the last one under ``target="next"``) hold NaN and target id -1.
    """

    tokens: list[str]
    """The input tokens as text, one per position (untrusted: escape before display)."""
    input_ids: np.ndarray
    """``(T,)`` input token ids."""
    target_ids: np.ndarray
    """``(T,)`` the token whose probability is attributed at each position (-1: none)."""
    target_tokens: list[str]
    """``T`` target tokens as text ("" where there is none)."""
    boundaries: list[float]
    """``k+1`` boundary depths L_0 = 0 < … < L_k = n; segment j covers blocks L_j+1 … L_{j+1}.
    Ints, except under ``boundaries="sublayer"``, where L − 0.5 is h_L.attn (after block L's
    attention, before its MLP)."""
    lens_probs: np.ndarray
    """``(T, k+1)`` f(h_L) at every boundary (p(target), minus p(contrast) if given)."""
    contributions: np.ndarray
    """``(T, k)`` signed contribution of each segment; rows sum to ``delta_p``."""
    delta_p: np.ndarray
    """``(T,)`` f(h_n) − f(h_0)."""
    onset: np.ndarray
    """``(T,)`` the (last) block of the segment with the largest signed contribution (-1:
    none); :attr:`onset_segment` tells a block's attention half from its MLP half."""
    top_ids: np.ndarray
    """``(T, k+1, K)`` the K most probable lens tokens at every boundary."""
    top_probs: np.ndarray
    """``(T, k+1, K)`` their probabilities."""
    request: AttributionRequest
    """The request that produced this result; a recompute replays it with changes."""
    path_probs: np.ndarray | None = None
    """``(T, k, m+1)`` f along each segment's straight path (only when ``steps > 1``)."""
    contrast_ids: np.ndarray | None = None
    """``(T,)`` contrast token ids when f = p(target) − p(contrast), else None."""
    n_blocks: int = 0
    """n, the number of decoder blocks of the model."""
    family: str = ""
    """The architecture family the adapter used."""
    model_name: str = ""
    """The model's display name (see :func:`display_name`): ``IGLens(..., name=)``, else
    the short form of its config's ``name_or_path`` (untrusted: escape before display)."""
    token_text: dict[int, str] = field(default_factory=dict, repr=False)
    """Decoded text of every token id the result refers to."""
    prompt_length: int | None = None
    """Number of prompt tokens; the rest of the input is the model's generated answer."""
    component_shares: np.ndarray | None = None
    """``(T, n, C)`` each (position, block, component)'s share of its segment's contribution
    (``components=True``; None otherwise). Components are :attr:`component_names`; the
    segment holding each (block, component) is :attr:`component_segments`."""
    component_names: list[str] | None = None
    """``C`` component names: ``head:<i>`` (0-based), ``mlp``, ``rest`` (the attention's
    output bias and rounding), or ``attn``, ``mlp`` where heads cannot be split; then
    ``coordinate`` (the change of translator along a segment) under a fitted lens."""
    lens_name: str = "logit"
    """The lens the states were read through (``"logit"``: as they are; ``"shortcut"``,
    ``"tuned"``, ``"jacobian"`` or a saved lens's name: T_L(h_L)); see ``request.lens``."""
    lens_logprobs: np.ndarray | None = None
    """``(T, k+1)`` log p(target) at every boundary, finite where the probability underflows
    (None with a contrast: f is a difference then). A span's log-probability ledger is the sum
    of its rows' differences."""
    answer: AnswerLedger | None = None
    """The whole answer's ledgers (``answer=``, or the generated answer up to its first end
    token; None without one): see :class:`~iglens_viz.core.answers.AnswerLedger`."""
    versus: AnswerLedger | None = None
    """The ledgers of the ``versus=`` answer, from a pass over its own tokens after the
    prompt's key/value cache (None without one)."""
    template_positions: np.ndarray | None = None
    """The prompt positions that are the chat template's tokens (system prompt, role markers,
    the assistant's header), not the user's text: ``chat`` wrapped the prompt (see
    :func:`~iglens_viz.core.prompting.chat_template_positions`). None when the prompt was not
    wrapped, or the template's tokens could not be told from the message's."""

    def __post_init__(self) -> None:
        self.boundaries = depth_list(self.boundaries)

    @property
    def comparison(self) -> AnswerComparison | None:
        """The differential ledger of log p(answer) − log p(versus) (None without
        ``versus=``); see :class:`~iglens_viz.core.answers.AnswerComparison`."""
        if self.answer is None or self.versus is None:
            return None
        return AnswerComparison(self.answer, self.versus)

    @property
    def estimator(self) -> str:
        """``prediction_aware`` (exact telescoping) or ``riemann`` (midpoint gradients)."""
        return self.request.estimator

    @property
    def steps(self) -> int:
        """Interpolation steps m per segment."""
        return self.request.steps

    @property
    def final_probs(self) -> np.ndarray:
        """``(T,)`` f(h_n): with no contrast, the model's own probability of the target."""
        return self.lens_probs[:, -1]

    @property
    def answer_start(self) -> int:
        """The first position whose target is a generated answer token; T without an answer.

        Position t predicts token t+1, so the answer's tokens (``input_ids[prompt_length:]``)
        are attributed at positions ``prompt_length - 1 … T - 2``. Every view marks the
        answer from here.
        """
        T = len(self.input_ids)
        if self.prompt_length is None or self.prompt_length >= T:
            return T
        return max(self.prompt_length - 1, 0)

    @property
    def answer_positions(self) -> np.ndarray:
        """Positions whose target is a generated answer token (empty without generation)."""
        T = len(self.input_ids)
        return np.arange(self.answer_start, T - 1) if self.answer_start < T else np.arange(0)

    @property
    def onset_segment(self) -> np.ndarray:
        """``(T,)`` index j of each position's onset segment (-1: none); see
        :func:`onset_segments`."""
        return onset_segments(self.contributions)

    @property
    def target_name(self) -> str:
        """What f measures, as every view labels it: ``p(target)`` or
        ``p(target) − p(contrast)``."""
        return "p(target)" if self.contrast_ids is None else "p(target) \u2212 p(contrast)"

    @property
    def segment_labels(self) -> list[str]:
        """``k`` segment labels: ``"12"`` for one block, ``"11–15"`` for several."""
        return segment_labels(self.boundaries)

    @property
    def completeness_error(self) -> float:
        """max over positions of |Σ contributions − Δp| (0 up to float rounding)."""
        err = np.abs(self.contributions.sum(axis=1) - self.delta_p)
        return float(np.nanmax(err)) if np.isfinite(err).any() else 0.0

    @property
    def top_tokens(self) -> list[list[list[str]]]:
        """``T × (k+1) × K`` text of the top lens tokens."""
        text = self.token_text
        return [[[text.get(int(i), "") for i in row] for row in pos] for pos in self.top_ids]

    @property
    def segments(self) -> list[tuple[float, float]]:
        """``(L_{j}, L_{j+1})`` depth ranges of the k segments."""
        return list(zip(self.boundaries[:-1], self.boundaries[1:]))

    @property
    def component_segments(self) -> np.ndarray:
        """``(n, C)`` the segment j that holds each (block, component) of
        :attr:`component_shares`."""
        _, names = self._require_components()
        return component_segments(self.boundaries, names, self.n_blocks)

    @property
    def components(self) -> pd.DataFrame:
        """The component split as a tidy :class:`pandas.DataFrame`, one row per (position,
        segment, block, component): ``position``, ``segment`` (index j), ``block``
        (1-based), ``component`` (``head:<i>``, ``attn``, ``mlp``, ``rest``, ``coordinate``)
        and ``share``.
        The shares of one (position, segment) sum to ``contributions[position, segment]``.
        Positions without a target are left out.
        """
        import pandas as pd

        shares, names = self._require_components()
        shares = np.asarray(shares, dtype=np.float64)
        T, n, C = shares.shape
        position, block, comp = (
            a.ravel() for a in np.meshgrid(np.arange(T), np.arange(n), np.arange(C), indexing="ij")
        )
        keep = np.isfinite(shares.ravel())
        segment = self.component_segments[block, comp]
        return pd.DataFrame(
            {
                "position": position[keep],
                "segment": segment[keep],
                "block": block[keep] + 1,
                "component": np.asarray(names, dtype=object)[comp[keep]],
                "share": shares.ravel()[keep],
            }
        )

    def _require_components(self) -> tuple[np.ndarray, list[str]]:
        """The component shares and names; AttributeError when there is no split."""
        if self.component_shares is None or self.component_names is None:
            raise AttributeError(
                "this result has no component split: attribute with "
                "components=True, or use engine.components(result, positions) "
                "for a few positions"
            )
        return self.component_shares, self.component_names

    def to_dict(self) -> dict[str, Any]:
        """Every field and derived array as JSON-ready lists (NaN becomes None)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "token_text":
                value = {str(k): v for k, v in value.items()}
            elif f.name in ("request", "answer", "versus") and value is not None:
                value = value.to_dict()
            out[f.name] = json_ready(value)
        out["estimator"], out["steps"] = self.estimator, self.steps
        out["top_tokens"] = self.top_tokens
        out["answer_positions"] = self.answer_positions.tolist()
        out["completeness_error"] = self.completeness_error
        comparison = self.comparison
        out["comparison"] = None if comparison is None else comparison.to_dict()
        return out

    def plot_heatmap(self, ax: Axes | None = None, **kwargs: Any) -> Figure:
        """Positions × segments heatmap Figure; see :func:`iglens_viz.views.plot_heatmap`."""
        return provider("plot_heatmap")(self, ax=ax, **kwargs)

    def plot_token(self, i: int, ax: Axes | None = None, **kwargs: Any) -> Figure:
        """Detail figure of position ``i``; see :func:`iglens_viz.views.plot_token`."""
        return provider("plot_token")(self, i, ax=ax, **kwargs)

    def plot_components(
        self, i: int, segment: int | None = None, ax: Axes | None = None, **kwargs: Any
    ) -> Figure:
        """Block × component share matrix of position ``i``; see
        :func:`iglens_viz.views.plot_components`."""
        return provider("plot_components")(self, i, segment, ax=ax, **kwargs)

    def to_dataframe(self, **kwargs: Any) -> pd.DataFrame:
        """One row per (position, segment); see :func:`iglens_viz.views.to_dataframe`."""
        return provider("to_dataframe")(self, **kwargs)

    def widget(self, engine: IGLens | None = None, **kwargs: Any) -> AnyWidget:
        """Linked notebook views (needs ``anywidget``); see :class:`iglens_viz.widget.IGLensWidget`.

        Pass the :class:`IGLens` that produced this result (``engine``) to enable the
        recompute controls; without it the widget only explores this result. The old
        keyword ``lens=`` still works, with a :class:`DeprecationWarning` (a *lens* is a
        :class:`~iglens_viz.core.coordinates.Lens`).
        """
        if "lens" in kwargs:
            if engine is not None:
                raise TypeError("widget() got both engine and its old name lens: pass engine")
            warnings.warn(
                "result.widget(lens=...) is now result.widget(engine=...) (a 'lens' is a Lens)",
                DeprecationWarning,
                stacklevel=2,
            )
            engine = kwargs.pop("lens")
        return provider("widget")(self, engine, **kwargs)

    def to_html(self, path: str | os.PathLike[str] | None = None, **kwargs: Any) -> str:
        """A self-contained offline HTML page of the linked views, written to ``path`` if
        given; see :func:`iglens_viz.export.to_html`."""
        return provider("to_html")(self, path, **kwargs)
