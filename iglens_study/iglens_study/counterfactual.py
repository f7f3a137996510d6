"""The study's counterfactual mode: which block carries the answer at the answer position?

For every clean/corrupt pair (:mod:`.pairs`) and every block L = 1 … n, :func:`pair_study`
measures what ``docs/study.md`` (section "Counterfactual mode: pre-registered hypotheses")
defines, with M the logit difference ``logit(t) − logit(c)`` at the last position:

* the activation patching effects (:func:`iglens_viz.causal.patch`, noising unless said):
  ``patch_total`` (block L's update replaced at the last position, the rest running),
  ``patch_total_all`` (at every position), ``patch_direct`` (later blocks frozen),
  ``restore_state`` (denoising: the clean h_L written into the corrupt run at the last
  position, ``parts="state"``) and ``attribution`` (attribution patching, the linear
  estimate of ``patch_total``), each normalised by ``M_clean − M_corrupt``;
* ``ig_<lens>``: the IG-Lens contribution of block L to p(t) − p(c) on the clean prompt at
  the last position under each lens (prediction-aware, every block its own segment);
* ``dla``: frozen-norm direct logit attribution of Δ_L to M, ``(W_t − W_c) · N(Δ_L)`` with N
  the final norm's linear part at the clean h_n's scale (soft-capping ignored; a LayerNorm
  centres Δ_L as it centres h; the norm's and the head's biases cancel);
* ``ld_jump``: M read through the final norm and head at h_L minus at h_{L−1} (logit lens).

Pairs run in batches: the patching of every pair of a batch shares padded forward passes
(all blocks of several pairs), and each batch is one part file of ``out/parts/``, written
whole, so an interrupted study resumes after the last finished batch.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from iglens_viz.causal.patching import PatchResult, patch
from iglens_viz.core.coordinates import (
    FIT_REPORT_SETTINGS,
    Lens,
    defining_settings,
    model_fingerprint,
)
from iglens_viz.core.lens import IGLens
from iglens_viz.errors import InvalidRequestError
from iglens_viz.files import check_output_folder, write_atomic

from .folder import (
    FolderKind,
    StudyFolderError,
    concat,
    prepare,
    read_metadata,
    read_table,
    write_part,
    write_table,
)
from .pairs import CAPITAL_PAIRS, Pair, _pairs_of, answered_capitals, load_pairs
from .schemas import PER_PAIR_COLUMNS, column_dtype, pair_columns

if TYPE_CHECKING:
    from pandas import DataFrame
    from transformers import PreTrainedTokenizerBase

    from .pair_scoring import PairSummary

__all__ = ["PAIR_OUTPUT_FILES", "PER_PAIR_COLUMNS", "PairStudy", "pair_columns", "pair_study"]

PAIR_OUTPUT_FILES = ("metadata.json", "parts/", "table.parquet")
"""What :func:`pair_study` writes into its ``out`` folder."""

STUDY_KIND = "counterfactual"
"""``metadata.json``'s ``study``: tells a counterfactual study's folder from others."""

CAPITAL_SETTINGS = {"max_pairs": 240, "per_country": 6, "min_p": 0.1}
"""The pre-registered settings of the built-in ``capital-pairs`` set (``seed`` apart)."""


@dataclass
class PairStudy:
    """The product of :func:`pair_study`: one row per (pair, block), the pairs, and what
    produced them."""

    table: DataFrame
    """pandas DataFrame, one row per (pair, block); columns :func:`pair_columns`."""
    pairs: list[Pair] = field(default_factory=list)
    """The pair set (all of it: ``limit`` keeps the table to its first pairs)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Model and its fingerprint, lenses, pair-set settings, seed, versions, seconds."""

    @property
    def lenses(self) -> list[str]:
        """The lens names of the table's ``ig_<lens>`` columns."""
        return [c[len("ig_") :] for c in self.table.columns if c.startswith("ig_")]

    def scores(self, seed: int = 0) -> DataFrame:
        """Per (pair, method): the named block and its hits, ρ and restore value; see
        :func:`iglens_study.pair_scoring.pair_scores`."""
        from .pair_scoring import pair_scores

        return pair_scores(self.table, seed=seed)

    def summary(self, n_boot: int = 2000, seed: int = 0) -> PairSummary:
        """Every method's figures with cluster-bootstrap intervals and paired differences;
        see :func:`iglens_study.pair_scoring.pair_summary`."""
        from .pair_scoring import pair_summary

        return pair_summary(self.table, n_boot=n_boot, seed=seed)

    def hypotheses(self, n_boot: int = 2000, seed: int = 0) -> DataFrame:
        """H1–H4 of ``docs/study.md``, each answered by its pre-registered rule; see
        :func:`iglens_study.pair_scoring.hypotheses`."""
        from .pair_scoring import hypotheses

        return hypotheses(self.table, n_boot=n_boot, seed=seed)

    def report(self, folder: str | os.PathLike[str], n_boot: int = 2000, seed: int = 0) -> Path:
        """Write ``report.md``, ``summary.csv``, ``hypotheses.csv`` and the figures into
        ``folder``; see :func:`iglens_study.pair_report.write_pair_report`."""
        from .pair_report import write_pair_report

        return write_pair_report(self.table, folder, self.metadata, n_boot=n_boot, seed=seed)

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> PairStudy:
        """A study written by :func:`pair_study` with ``out=folder`` (finished or not)."""
        folder = Path(folder)
        metadata = read_metadata(folder / "metadata.json")
        if metadata is None or metadata.get("study") != STUDY_KIND:
            raise StudyFolderError(f"{folder} holds no counterfactual study")
        hint = f"; rerun the study with out={str(folder)!r} to redo it"
        pairs = [Pair(**p) for p in metadata.get("pair_list", [])]
        return cls(_sorted(read_table(folder, PAIR_FOLDER, hint)), pairs, metadata)


# --- the pairs -------------------------------------------------------------------------------


def _resolve_pairs(
    model: torch.nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    spec: str | os.PathLike[str] | Sequence[Pair],
    seed: int,
    per_country: int | None = None,
) -> tuple[list[Pair], dict[str, Any]]:
    """The pairs and the pair set's description for the metadata."""
    if isinstance(spec, (str, Path)) and str(spec) == CAPITAL_PAIRS:
        settings = dict(CAPITAL_SETTINGS)
        if per_country is not None:
            settings["per_country"] = per_country
        answered, n_prompts = answered_capitals(model, tokenizer, min_p=settings["min_p"])
        pairs = _pairs_of(
            answered, tokenizer, int(settings["max_pairs"]), int(settings["per_country"]), seed
        )
        info = {
            "pairs": CAPITAL_PAIRS,
            "pair_settings": {**settings, "seed": int(seed)},
            "n_prompts": n_prompts,
            "n_answered": len(answered),
        }
        return pairs, info
    if per_country is not None:
        raise InvalidRequestError(
            f"per_country applies to the built-in {CAPITAL_PAIRS!r} set only, not to given pairs"
        )
    if isinstance(spec, (str, os.PathLike)):
        return load_pairs(spec, tokenizer, model), {"pairs": os.fspath(spec), "pair_settings": {}}
    pairs = list(spec)
    if not pairs or not all(isinstance(p, Pair) for p in pairs):
        raise InvalidRequestError(
            f"pairs must be {CAPITAL_PAIRS!r}, a JSONL file or a non-empty list of Pair"
        )
    return pairs, {"pairs": "(given)", "pair_settings": {}}


def _digest(pairs: Sequence[Pair]) -> str:
    text = json.dumps([p.to_dict() for p in pairs], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --- one batch -------------------------------------------------------------------------------


@torch.no_grad()
def _readings(
    lens: IGLens, ids: torch.Tensor, t: int, c: int
) -> tuple[float, bool, np.ndarray, np.ndarray]:
    """p(t) at the clean run's last position, whether t is the top-1 there, and per block
    ``dla`` and ``ld_jump`` (``[n]`` each), from the clean run's states h_0 … h_n."""
    readout = lens.readout
    trace = lens.trace(ids)
    h = trace.hidden[:, -1].to(readout.device, readout.dtype)  # [n+1, d]
    logits = readout.logits(h[-1:])[0].double()
    probs = torch.exp(logits - torch.logsumexp(logits, -1))
    p_t = float(probs[t])
    top1 = int(torch.argmax(logits)) == t
    ids_t = torch.full(h.shape[:1], t, dtype=torch.long)
    ids_c = torch.full(h.shape[:1], c, dtype=torch.long)
    z = readout.features(h)
    m = (readout.target_logits(z, ids_t) - readout.target_logits(z, ids_c)).double()
    ld_jump = (m[1:] - m[:-1]).cpu().numpy()
    scale = readout.norm_scale(h[-1])
    delta = h[1:] - h[:-1]
    linear = readout.features(delta, frozen_scale=scale) - readout.features(
        torch.zeros_like(delta[:1]), frozen_scale=scale
    )
    w = (readout.head_block(slice(t, t + 1)) - readout.head_block(slice(c, c + 1)))[0]
    dla = (linear @ w).double().cpu().numpy()
    return p_t, top1, dla, ld_jump


def _batch_table(
    model: torch.nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    lens: IGLens,
    lenses: Sequence[Lens],
    names: Sequence[str],
    indices: Sequence[int],
    pairs: Sequence[Pair],
) -> dict[str, np.ndarray]:
    """The table's columns for the pairs ``indices`` (rows pair-major, blocks 1 … n)."""
    chosen = [pairs[i] for i in indices]
    cleans = [lens.input_ids(p.clean) for p in chosen]
    corrupts = [lens.input_ids(p.corrupt) for p in chosen]
    kw: dict[str, Any] = dict(
        target=[p.target_id for p in chosen],
        contrast=[p.contrast_id for p in chosen],
        memory_budget=lens.memory_budget,
    )

    def run(**options: Any) -> list[PatchResult]:
        out = patch(model, tokenizer, cleans, corrupts, **kw, **options)
        assert isinstance(out, list), "lists of prompts give a list of results"
        return out

    total = run(positions="target")
    columns = {
        "patch_total": total,
        "patch_total_all": run(positions="all"),
        "patch_direct": run(positions="target", effect="direct"),
        "restore_state": run(parts="state", positions="target", direction="denoising"),
        "attribution": run(positions="target", method="attribution"),
    }
    n = lens.n_blocks
    lens.clear_cache()
    lens.traces(cleans)  # one padded pass for the clean runs' states (the logit lens's)
    rows: dict[str, list[Any]] = {name: [] for name in pair_columns(names)}
    for k, (i, pair, ids) in enumerate(zip(indices, chosen, cleans)):
        T = ids.numel()
        p_t, top1, dla, ld_jump = _readings(lens, ids, pair.target_id, pair.contrast_id)
        fixed = {
            "pair": i,
            "cluster": pair.cluster,
            "clean": pair.clean,
            "corrupt": pair.corrupt,
            "target": pair.target,
            "contrast": pair.contrast,
            "target_id": pair.target_id,
            "contrast_id": pair.contrast_id,
            "template": pair.template,
            "source": pair.source,
            "n_tokens": T,
            "p_target": p_t,
            "target_top1": top1,
            "m_clean": total[k].clean_metric,
            "m_corrupt": total[k].corrupt_metric,
        }
        for name, value in fixed.items():
            rows[name].extend([value] * n)
        rows["block"].extend(range(1, n + 1))
        for name, results in columns.items():
            rows[name].extend(results[k].effects.tolist())
        target = [-1] * (T - 1) + [pair.target_id]
        contrast = [-1] * (T - 1) + [pair.contrast_id]
        for name, coordinates in zip(names, lenses):
            result = lens.attribute(ids, target=target, contrast=contrast, lens=coordinates)
            rows[f"ig_{name}"].extend(result.contributions[T - 1].tolist())
        rows["dla"].extend(dla.tolist())
        rows["ld_jump"].extend(ld_jump.tolist())
    return {name: np.asarray(values, dtype=column_dtype(name)) for name, values in rows.items()}


# --- the folder ------------------------------------------------------------------------------

PAIR_FOLDER = FolderKind(
    name="counterfactual study",
    unit="pair",
    units="pairs",
    columns=("pair", "block"),
    settings=(
        "study",
        "model",
        "model_fingerprint",
        "dtype",
        "readout_dtype",
        "lenses",
        "pairs",
        "pair_settings",
        "pairs_digest",
    ),
)
"""The counterfactual study's folder; its settings must match for a folder to resume it
(``limit`` need not, nor ``lens_fits``: a lens fitted again with the same settings is the
same lens)."""


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _sorted(table: DataFrame) -> DataFrame:
    return table.sort_values(["pair", "block"], ignore_index=True) if len(table) else table


def _check_kind(folder: Path) -> Callable[..., None]:
    """Refuse a folder of the ablation study."""

    def check(old: dict[str, Any], changed: list[str]) -> None:
        if old.get("study") != STUDY_KIND:
            raise InvalidRequestError(
                f"{folder} holds another study (the all-position ablation study, "
                f"`iglens study PROMPTS`), not a counterfactual one; use a new folder"
            )

    return check


# --- the study -------------------------------------------------------------------------------


def pair_study(
    model: torch.nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    pairs: str | os.PathLike[str] | Sequence[Pair] = CAPITAL_PAIRS,
    *,
    lenses: Sequence[str | Lens] = ("logit", "shortcut"),
    out: str | os.PathLike[str] | None = None,
    batch_size: int = 16,
    limit: int | None = None,
    progress: bool = True,
    seed: int = 0,
    per_country: int | None = None,
) -> PairStudy:
    """The counterfactual study: patching effects, IG-Lens contributions and the linear
    readings of every block, for every clean/corrupt pair.

    Parameters
    ----------
    model, tokenizer:
        A supported causal LM and its tokenizer.
    pairs:
        ``"capital-pairs"`` (built for this model: :func:`~iglens_study.pairs.
        capital_pairs` with the pre-registered settings and ``seed``), a JSONL file
        (:func:`~iglens_study.pairs.load_pairs`), or a list of
        :class:`~iglens_study.pairs.Pair`.
    lenses:
        The lenses of the ``ig_<lens>`` columns: ``"logit"``, ``"shortcut"``, ``"tuned"``,
        ``"jacobian"`` (fitted on first use and cached), a lens file, or a
        :class:`~iglens_viz.core.coordinates.Lens` (its column: ``ig_<lens.name>``).
    out:
        A folder: ``parts/part-*.parquet`` (one per batch, written whole), ``metadata.json``
        and, at the end, ``table.parquet``. Rerunning with the same folder and settings
        resumes after the last finished batch; a folder of another study is refused.
    batch_size:
        Pairs whose patched runs share padded forward passes (and one part file).
    limit:
        Study only the first ``limit`` pairs of the set.
    progress:
        Show a progress bar (tqdm).
    seed:
        The built-in set's shuffle seed (pre-registered: 0).
    per_country:
        The built-in set's cap of pairs per country as clean (and as corrupt); None: the
        pre-registered 6. Another cap is a declared deviation (``docs/study.md``), recorded
        in the metadata's ``pair_settings``.

    Returns
    -------
    A :class:`PairStudy`; its ``table`` has one row per (pair, block) with the columns of
    :func:`pair_columns` (see the module docstring and ``docs/study.md``): the pair's fields,
    ``n_tokens``, ``p_target`` (p(t) at the clean prompt's last position), ``target_top1``,
    ``m_clean`` / ``m_corrupt`` (M of each prompt), ``block`` (1 … n), the five patching
    effects, ``ig_<lens>`` per lens, ``dla`` and ``ld_jump``.
    """
    import pandas as pd
    from tqdm.auto import tqdm

    from iglens_viz import __version__

    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidRequestError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidRequestError(f"limit must be an integer >= 1, got {limit!r}")
    if not lenses:
        raise InvalidRequestError("lenses: name at least one, e.g. ('logit', 'shortcut')")
    if out is not None:
        check_output_folder(out, PAIR_OUTPUT_FILES)
        read_metadata(Path(out) / "metadata.json")  # a damaged one is named before any work
    dtype = torch.float64 if next(model.parameters()).dtype == torch.float64 else torch.float32
    lens = IGLens(  # the readout in float64 for a float64 model, as patch() reads it
        model, tokenizer, cache_size=max(4, batch_size * (len(lenses) + 1)), dtype=dtype
    )
    resolved = [lens.resolve_lens(spec) for spec in lenses]
    names = [r.name for r in resolved]
    if len(set(names)) != len(names):
        raise InvalidRequestError(
            f"lenses {names}: each lens once (their names make the ig_<lens> columns)"
        )
    if per_country is not None and (
        isinstance(per_country, bool) or not isinstance(per_country, int) or per_country < 1
    ):
        raise InvalidRequestError(f"per_country must be an integer >= 1, got {per_country!r}")
    pair_list, info = _resolve_pairs(model, tokenizer, pairs, seed, per_country)
    todo_all = list(range(len(pair_list) if limit is None else min(limit, len(pair_list))))
    metadata: dict[str, Any] = {
        "study": STUDY_KIND,
        "model": str(getattr(model.config, "name_or_path", "") or type(model).__name__),
        "model_fingerprint": model_fingerprint(model),
        "dtype": str(next(model.parameters()).dtype),
        "readout_dtype": str(lens.readout.dtype),
        "lenses": [
            {
                "name": name,
                "kind": r.kind,
                "fingerprint": r.fingerprint,
                "settings": _jsonable(defining_settings(r.settings)),
            }
            for name, r in zip(names, resolved)
        ],
        "lens_fits": [
            _jsonable({k: v for k, v in r.settings.items() if k in FIT_REPORT_SETTINGS})
            for r in resolved
        ],
        **info,
        "pairs_digest": _digest(pair_list),
        "n_pairs": len(pair_list),
        "limit": limit,
        "seed": int(seed),
        "batch_size": batch_size,
        "version": __version__,
        "torch_version": torch.__version__,
        "metric": "logit_diff: logit(t) - logit(c) at the last position",
        "pair_list": [p.to_dict() for p in pair_list],
    }
    folder = None if out is None else Path(out)
    done = set() if folder is None else prepare(folder, metadata, PAIR_FOLDER, _check_kind(folder))
    todo = [i for i in todo_all if i not in done]
    bar = tqdm(
        total=len(todo_all),
        initial=len(todo_all) - len(todo),
        disable=not progress,
        unit="pair",
        desc="iglens pair study",
    )
    tables = []
    started = time.perf_counter()
    for first in range(0, len(todo), batch_size):
        batch = todo[first : first + batch_size]
        part = pd.DataFrame(_batch_table(model, tokenizer, lens, resolved, names, batch, pair_list))
        if folder is not None:
            write_part(folder, batch[0], part)
        tables.append(part)
        bar.update(len(batch))
    bar.close()
    metadata["seconds"] = round(time.perf_counter() - started, 3)
    metadata["pairs_run"] = len(todo)
    if folder is not None:
        table = read_table(folder, PAIR_FOLDER)
        table = table[table["pair"].isin(todo_all)] if len(table) else table
        table = _sorted(table)
        write_table(folder / "table.parquet", table)
        write_atomic(folder / "metadata.json", json.dumps(metadata, indent=1, ensure_ascii=False))
    else:
        table = _sorted(concat(tables))
    return PairStudy(table, pair_list, metadata)
