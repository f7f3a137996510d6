"""Run a study: IG-Lens, the logit-lens readings and the ablation drops of many prompts.

For every prompt the study runs IG-Lens over every block (one cached forward pass), reads the
lens's target logit, its top-1 and a frozen-norm probability at every boundary, and measures
the drop of the target probability when each block is ablated, under each
requested mode:

* ``zero`` — the block adds nothing (``h_L := h_{L-1}``).
* ``mean`` — the block's update is replaced by its mean over the prompt's *references* at the
  same position (never over the prompt's own sequence: that mean mixes in later positions and
  the attention sink). The references are drawn per task — up to ``reference`` prompts of
  each task with the seed, a task being the prompt's ``source`` without a file's line number
  (``capitals``, ``shipped:<category>``, a user's file or list) — and a prompt's references
  are those of its task other than itself (for ``capitals``, those of its own template when
  there are at least 4). Only references of the prompt's token length are averaged when
  there are at least 4; else, at each position, every reference that has it. A position no
  reference reaches is not filled from other positions: its drop is NaN (counted in the
  metadata's ``unreferenced`` and :meth:`Study.unreferenced`, and left out of that mode's
  scoring).
* ``resample`` — the block's update is taken from one reference at least as long as the
  prompt, at the same positions (chosen with the seed; the same template preferred); with
  none, the prompt's drops are NaN.

The target probability is the readout's f(h_n), the value IG-Lens's last boundary reads and
every trace checks against the model's own output (equal up to rounding; see
:mod:`iglens_viz.core.selfcheck`).

Prompts run in batches (``batch_size``): one right-padded forward pass with an attention mask
for their states, one readout map over all their rows, and their ablations sharing forward
passes that stop at h_n (see :mod:`iglens_viz.causal.batched`). Rows go to one tidy table, one
row per (prompt, position, segment). With ``out=`` each batch is written as a part
(Parquet) as soon as it is done, so an interrupted study resumes where it stopped.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

import numpy as np
import torch

from iglens_viz.causal.batched import AblationJob, ablated_probabilities
from iglens_viz.core.lens import IGLens
from iglens_viz.core.readout import target_probability
from iglens_viz.core.trace import Trace, block_plan
from iglens_viz.core.trajectory import is_monotone
from iglens_viz.errors import InvalidRequestError
from iglens_viz.files import check_output_folder

from .folder import (
    FolderKind,
    StudyFolderError,
    prepare,
    read_metadata,
    read_table,
    write_part,
)
from .prompts import CAPITAL_TEMPLATES, PromptsSpec, StudyPrompt, load_study_prompts
from .schemas import CLUSTER_COLUMN

if TYPE_CHECKING:
    from pandas import DataFrame
    from tqdm.auto import tqdm
    from transformers import PreTrainedTokenizerBase

    from iglens_viz.core.result import AttributionResult

__all__ = ["OUTPUT_FILES", "STUDY_MODES", "Study", "StudyFolderError", "StudyMode", "study"]

_T = TypeVar("_T")

StudyMode = Literal["zero", "mean", "resample"]
"""An ablation mode of a study; see :data:`STUDY_MODES`."""
STUDY_MODES: tuple[StudyMode, ...] = get_args(StudyMode)
"""Ablation modes a study can measure (see the module docstring)."""

OUTPUT_FILES = (
    "metadata.json",
    "parts/",
    "table.parquet",
    "summary.csv",
    "differences.csv",
    "report.md",
)
"""What a study writes into its ``out`` folder (besides the report's figures)."""


@dataclass
class Study:
    """The product of :func:`study`: one tidy table and what produced it."""

    table: DataFrame
    """pandas DataFrame, one row per (prompt, position, segment); see :func:`study`."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Model, dtype, modes, reference set, seed, package version, request."""

    @property
    def modes(self) -> list[str]:
        """The ablation modes measured (the table's ``drop_<mode>`` columns)."""
        return [c[len("drop_") :] for c in self.table.columns if c.startswith("drop_")]

    def scores(self, seed: int = 0) -> DataFrame:
        """Per (mode, prompt, position, method) metrics; see
        :func:`iglens_study.scoring.score`."""
        from .scoring import score

        return score(self.table, seed=seed)

    def summary(self, n_boot: int = 1000, seed: int = 0) -> DataFrame:
        """One row per (mode, method, token class) with bootstrap intervals over prompts;
        see :func:`iglens_study.scoring.summarize`."""
        from .scoring import summarize

        return summarize(self.scores(seed), n_boot=n_boot, seed=seed)

    def differences(self, n_boot: int = 1000, seed: int = 0) -> DataFrame:
        """IG-Lens's onset against every other method on the same tokens: paired differences
        with bootstrap intervals over clusters; see
        :func:`iglens_study.scoring.paired_differences`."""
        from .scoring import paired_differences

        return paired_differences(self.scores(seed), n_boot=n_boot, seed=seed)

    def report(
        self,
        folder: str | os.PathLike[str],
        summary: DataFrame | None = None,
        differences: DataFrame | None = None,
    ) -> Path:
        """Write ``report.md`` with tables and seaborn figures into ``folder``; see
        :func:`iglens_study.report.write_report`. Returns its path."""
        from .report import write_report

        return write_report(self, folder, summary, differences)

    def unreferenced(self) -> dict[str, int]:
        """Per ``mean`` / ``resample`` mode measured: the tokens (prompt, position) whose
        drops are NaN at every block — beyond every reference, so left out of that mode's
        scoring."""
        out: dict[str, int] = {}
        for mode in self.modes:
            if mode in ("mean", "resample") and len(self.table):
                missing = (
                    self.table[f"drop_{mode}"]
                    .isna()
                    .groupby([self.table["prompt"], self.table["position"]])
                )
                out[mode] = int(missing.all().sum())
        return out

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> Study:
        """A study written by :func:`study` with ``out=folder`` (finished or not)."""
        folder = Path(folder)
        metadata = read_metadata(folder / "metadata.json")
        if metadata is None:
            raise StudyFolderError(f"{folder} holds no study (no metadata.json)")
        hint = f"; rerun the study with out={str(folder)!r} to redo it"
        return cls(read_table(folder, STUDY_FOLDER, hint), metadata)


REFERENCE_RULE = "per-task-v2"
"""The rule by which ``mean`` and ``resample`` ablation pick their references, recorded in a
study's metadata (``"references"``) so a folder made under another rule is not resumed: up to
``reference`` prompts per task drawn with the seed, never the prompt itself, positions no
reference reaches left NaN (see the module docstring)."""

_ENOUGH = 4
"""At least this many same-template (capitals) or same-length references: use only them."""

_LINE = re.compile(r"(?s)(.*):\d+")
_ITEM = re.compile(r"item \d+")


def _task(prompt: StudyPrompt) -> str:
    """A prompt's task: its ``source`` without a file's ``:<line>`` (a user's file is one
    task, as is a list of prompts given directly); ``shipped:<category>`` per category."""
    source = prompt.source
    line = _LINE.fullmatch(source)
    if line is not None and not source.startswith("shipped:"):
        return line.group(1)
    if _ITEM.fullmatch(source):
        return "(given)"
    return source


def _template(prompt: StudyPrompt) -> str | None:
    """The phrasing of a ``capitals`` prompt (its template's text before the country), else
    None."""
    if prompt.source != "capitals":
        return None
    for template in CAPITAL_TEMPLATES:
        prefix = template.split("{country}")[0]
        if prompt.text.startswith(prefix):
            return prefix
    return None


def _cluster(prompt: StudyPrompt, index: int) -> str:
    """A prompt's bootstrap cluster (:data:`~.scoring.CLUSTER_COLUMN`): a capital prompt's
    country — its two phrasings ask the same fact, so they are not independent — else the
    prompt itself."""
    prefix = _template(prompt)
    if prefix is None:
        return f"prompt:{index}"
    return "country:" + prompt.text[len(prefix) :].removesuffix(" is")


def _with_clusters(table: DataFrame, items: Sequence[StudyPrompt]) -> DataFrame:
    """``table`` with every row's cluster; rows of parts written before clusters were
    recorded get theirs from the prompts (the table's ``prompt`` indexes ``items``)."""
    missing = (
        table[CLUSTER_COLUMN].isna()
        if CLUSTER_COLUMN in table.columns
        else np.ones(len(table), dtype=bool)
    )
    if missing.any():
        table = table.copy()
        prompts = table["prompt"].to_numpy(dtype=np.int64)
        filled = [_cluster(items[i], int(i)) for i in prompts[missing]]
        if CLUSTER_COLUMN not in table.columns:
            table[CLUSTER_COLUMN] = filled
        else:
            table.loc[missing, CLUSTER_COLUMN] = filled
    return table


def _draw_references(items: Sequence[StudyPrompt], size: int, seed: int) -> list[int]:
    """Up to ``size`` prompts of every task (in the order tasks first appear), drawn with
    ``seed``; sorted indices."""
    rng = np.random.default_rng(seed)
    by_task: dict[str, list[int]] = {}
    for i, prompt in enumerate(items):
        by_task.setdefault(_task(prompt), []).append(i)
    chosen: list[int] = []
    for members in by_task.values():
        picked = rng.choice(len(members), size=min(max(int(size), 0), len(members)), replace=False)
        chosen += [members[int(k)] for k in picked]
    return sorted(chosen)


class _References:
    """Block updates of the reference prompts, for ``mean`` and ``resample`` ablation.

    A prompt's references are the reference prompts of its task (:func:`_task`), never the
    prompt itself; a ``capitals`` prompt uses those of its own template when there are at
    least :data:`_ENOUGH`."""

    def __init__(
        self,
        lens: IGLens,
        ids: list[torch.Tensor],
        indices: Sequence[int],
        items: Sequence[StudyPrompt],
        seed: int = 0,
    ) -> None:
        self.indices = list(indices)
        self.items = list(items)
        self.seed = int(seed)
        self.updates: dict[int, torch.Tensor] = {}  # per reference: [n, T_r, d] float32, CPU
        for first in range(0, len(self.indices), lens.cache_size):
            batch = self.indices[first : first + lens.cache_size]
            for i, trace in zip(batch, lens.traces([ids[i] for i in batch])):
                states = trace.states
                self.updates[i] = (states[1:] - states[:-1]).float().cpu()
        self.tasks = {i: _task(self.items[i]) for i in self.indices}
        self.templates = {i: _template(self.items[i]) for i in self.indices}

    def pool(self, prompt: int) -> list[int]:
        """The references of ``prompt``: same task, not itself (same template if enough)."""
        task, template = _task(self.items[prompt]), _template(self.items[prompt])
        same = [i for i in self.indices if i != prompt and self.tasks[i] == task]
        if template is not None:
            phrased = [i for i in same if self.templates[i] == template]
            if len(phrased) >= _ENOUGH:
                return phrased
        return same

    def mean(self, prompt: int, T: int) -> tuple[torch.Tensor, int]:
        """``([n, T, d], reach)``: at each position t < reach, the mean update of the
        references that have position t (only those of length T when there are at least
        :data:`_ENOUGH`); positions from ``reach`` on are reached by none and hold zeros
        (their drops are NaN; a causal model's earlier positions never read them)."""
        pool = self.pool(prompt)
        same = [i for i in pool if self.updates[i].shape[1] == T]
        if len(same) >= _ENOUGH:
            pool = same
        first = next(iter(self.updates.values()), None)
        n, d = (0, 0) if first is None else (first.shape[0], first.shape[2])
        total = torch.zeros(n, T, d, dtype=torch.float64)
        count = torch.zeros(T, dtype=torch.float64)
        for i in pool:
            u = self.updates[i][:, :T]
            total[:, : u.shape[1]] += u.double()
            count[: u.shape[1]] += 1
        reach = int((count > 0).sum())  # a prefix: a reference that has t has every s < t
        out = (total / count.clamp(min=1)[None, :, None]).float()
        return out, reach

    def donor(self, prompt: int, T: int) -> torch.Tensor | None:
        """``[n, T, d]``: the updates of a reference at least as long as the prompt (same
        task, not itself; same template if any), chosen with the seed; None if there is
        none."""
        task, template = _task(self.items[prompt]), _template(self.items[prompt])
        long = [
            i
            for i in self.indices
            if i != prompt and self.tasks[i] == task and self.updates[i].shape[1] >= T
        ]
        phrased = [i for i in long if template is not None and self.templates[i] == template]
        choices = phrased or long
        if not choices:
            return None
        rng = np.random.default_rng([self.seed, int(prompt)])
        return self.updates[choices[int(rng.integers(len(choices)))]][:, :T]


def _answer_id(tokenizer: PreTrainedTokenizerBase, answer: str) -> int:
    ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
    if not ids:
        raise InvalidRequestError(f"the answer {answer!r} has no tokens")
    return int(ids[0])


def _targets(
    tokenizer: PreTrainedTokenizerBase, prompt: StudyPrompt, T: int
) -> Literal["predicted"] | list[int]:
    """The target spec: the answer's first token at the last position, or ``predicted``."""
    if prompt.answer is None:
        return "predicted"
    return [-1] * (T - 1) + [_answer_id(tokenizer, prompt.answer)]


@torch.no_grad()
def _lens_readings(
    lens: IGLens, traces: list[Trace], ys: list[torch.Tensor]
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per trace, ``[n+1, T]`` each: the target's lens logit, whether it is the lens's top-1,
    and its probability with the final norm's scale frozen at h_n's (the rows of every trace
    streamed together, under the lens's memory budget, as the readout map streams)."""
    readout = lens.readout
    ys = [y.to(readout.device) for y in ys]
    frozen = [
        readout.features(t.states, frozen_scale=readout.norm_scale(t.states[-1])) for t in traces
    ]
    flat = torch.cat([f.reshape(-1, f.shape[-1]) for f in frozen])
    rows, cols = block_plan(
        flat.shape[0],
        readout.vocab_size,
        readout.dtype,
        lens.memory_budget,
        head_width=readout.head_block_width,
    )
    lse = torch.cat(
        [
            readout.log_normalizer(flat[r : r + rows], block_columns=cols)
            for r in range(0, flat.shape[0], rows)
        ]
    )
    out, start = [], 0
    for trace, f, y in zip(traces, frozen, ys):
        size = f.shape[0] * f.shape[1]
        frozen_p = target_probability(
            readout.target_logits(f, y), lse[start : start + size].reshape(f.shape[:-1])
        )
        start += size
        logits = readout.target_logits(trace.features, y)
        top1 = trace.top_ids[..., 0] == y
        out.append(
            (logits.double().cpu().numpy(), top1.cpu().numpy(), frozen_p.double().cpu().numpy())
        )
    return out


def _batch_rows(
    lens: IGLens,
    model: torch.nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    batch: list[int],
    items: list[StudyPrompt],
    ids: list[torch.Tensor],
    modes: Sequence[StudyMode],
    references: _References | None,
) -> list[dict[str, np.ndarray]]:
    """The table's columns for a batch of prompts (one dict per prompt): their forward
    passes, readouts and ablations run together (see :func:`_prompt_rows`)."""
    lens.clear_cache()  # a batch's rows come from its own passes, whatever ran before
    traces = lens.traces([ids[i] for i in batch])
    results = [
        lens.attribute(ids[i], target=_targets(tokenizer, items[i], ids[i].numel())) for i in batch
    ]
    target_ids = [np.asarray(r.target_ids) for r in results]
    ys = [torch.as_tensor(np.where(t >= 0, t, 0)) for t in target_ids]
    readings = _lens_readings(lens, traces, ys)
    jobs = []
    reaches: dict[tuple[int, StudyMode], int] = {}  # positions the ablation reaches
    for i, targets in zip(batch, target_ids):
        T = ids[i].numel()
        for mode in modes:
            updates, reach = None, T
            if mode == "mean":
                assert references is not None, "mean ablation builds its references"
                updates, reach = references.mean(i, T)
            elif mode == "resample":
                assert references is not None, "resample ablation builds its references"
                updates = references.donor(i, T)
                reach = 0 if updates is None else T
            read = np.where(np.arange(T) < reach, targets, -1)
            if (read >= 0).any():
                jobs.append(AblationJob(ids[i], read, updates))
            else:  # no target the references reach: NaN drops, no forward pass
                reach = 0
            reaches[i, mode] = reach
    ablated = iter(
        ablated_probabilities(
            model, lens.adapter, lens.readout, jobs, memory_budget=lens.memory_budget
        )
    )
    rows = []
    for i, result, reading in zip(batch, results, readings):
        drops = {}
        for mode in modes:
            drop = np.full((ids[i].numel(), result.n_blocks), np.nan)
            reach = reaches[i, mode]
            if reach:
                drop[:reach] = (result.final_probs[:, None] - next(ablated))[:reach]
            drops[mode] = drop
        rows.append(_prompt_rows(i, items[i], result, reading, drops))
    return rows


def _prompt_rows(
    index: int,
    prompt: StudyPrompt,
    result: AttributionResult,
    readings: tuple[np.ndarray, np.ndarray, np.ndarray],
    drops: dict[StudyMode, np.ndarray],
) -> dict[str, np.ndarray]:
    """The table's columns for one prompt (every position with a target × every block)."""
    target_ids = np.asarray(result.target_ids)
    keep = np.flatnonzero(target_ids >= 0)
    logits, top1, frozen = readings
    n = result.n_blocks
    position = np.repeat(keep, n)
    segment = np.tile(np.arange(n), len(keep))
    onset = result.onset_segment[keep]
    monotone = np.array([is_monotone(result.contributions[t], result.delta_p[t]) for t in keep])
    rows = {
        "prompt": np.full(len(position), index),
        "position": position,
        "segment": segment,
        "block": segment + 1,
        "token": np.asarray(result.tokens, dtype=object)[position],
        "target": np.asarray(result.target_tokens, dtype=object)[position],
        "target_id": target_ids[position],
        "contribution": result.contributions[keep].ravel(),
        "lens_prob_start": result.lens_probs[keep, :-1].ravel(),
        "lens_prob_end": result.lens_probs[keep, 1:].ravel(),
        "lens_prob": result.lens_probs[keep, 1:].ravel(),
        "lens_logit_start": logits[:-1, keep].T.ravel(),
        "lens_logit_end": logits[1:, keep].T.ravel(),
        "top1_end": top1[1:, keep].T.ravel(),
        "frozen_prob_start": frozen[:-1, keep].T.ravel(),
        "frozen_prob_end": frozen[1:, keep].T.ravel(),
        "onset": np.repeat(onset, n) == segment,
        "monotone": np.repeat(monotone, n),
        "delta_p": np.repeat(result.delta_p[keep], n),
        "final_prob": np.repeat(result.final_probs[keep], n),
        "source": np.full(len(position), prompt.source, dtype=object),
        CLUSTER_COLUMN: np.full(len(position), _cluster(prompt, index), dtype=object),
    }
    for mode, drop in drops.items():
        rows[f"drop_{mode}"] = drop[keep].ravel()
    return rows


def _checked_arguments(
    prompts: PromptsSpec,
    modes: Sequence[StudyMode],
    limit: int | None,
    batch_size: int,
    out: str | os.PathLike[str] | None,
) -> list[StudyPrompt]:
    """The prompts to study, once every argument a user can get wrong is checked (before
    any work: the modes, the prompts, the batch size, the output folder)."""
    unknown = [m for m in modes if m not in STUDY_MODES]
    if unknown or not modes:
        raise InvalidRequestError(
            f"unknown ablation modes {unknown}; choose among {', '.join(STUDY_MODES)}"
        )
    items = load_study_prompts(prompts)
    if limit is not None:
        items = items[: int(limit)]
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidRequestError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    if out is not None:
        check_output_folder(out, OUTPUT_FILES)
    return list(items)


def _metadata(
    model: torch.nn.Module,
    dtype: torch.dtype,
    modes: Sequence[StudyMode],
    ref_indices: list[int],
    needs_references: bool,
    seed: int,
    items: Sequence[StudyPrompt],
    prompts: PromptsSpec,
) -> dict[str, Any]:
    """What a study's ``metadata.json`` records before it runs (its settings among them)."""
    from iglens_viz import __version__

    return {
        "model": str(getattr(model.config, "name_or_path", "") or type(model).__name__),
        "dtype": str(next(model.parameters()).dtype),
        "readout_dtype": str(dtype),
        "modes": list(modes),
        "reference": ref_indices,
        **({"references": REFERENCE_RULE} if needs_references else {}),
        "seed": int(seed),
        "n_prompts": len(items),
        "prompts": prompts if isinstance(prompts, str) else "(given)",
        "version": __version__,
        "request": {
            "boundaries": "all",
            "estimator": "prediction_aware",
            "steps": 1,
            "chat": False,
            "target": "the answer's first token, or predicted",
        },
    }


def study(
    model: torch.nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    prompts: PromptsSpec,
    *,
    modes: Sequence[StudyMode] = STUDY_MODES,
    reference: int = 32,
    seed: int = 0,
    out: str | os.PathLike[str] | None = None,
    limit: int | None = None,
    progress: bool = True,
    dtype: torch.dtype = torch.float32,
    batch_size: int = 16,
) -> Study:
    """Run IG-Lens, the logit-lens readings and the block ablations over many prompts.

    Parameters
    ----------
    model, tokenizer:
        A supported causal LM and its tokenizer.
    prompts:
        A built-in set name (``"capitals"``, ``"shipped"``, ``"default"``), a ``.txt`` /
        ``.jsonl`` file, or a list of strings / ``{"prompt", "target"}`` dicts (see
        :mod:`iglens_study.prompts`).
    modes:
        Ablation modes among :data:`STUDY_MODES`.
    reference:
        References per task for ``mean`` and ``resample`` (drawn from each task's prompts
        with ``seed``; see the module docstring).
    out:
        A folder: the table is written there in parts (one per batch of prompts) as the
        study runs, with ``metadata.json``; rerunning with the same folder and settings
        resumes after the last finished part.
    limit:
        Study only the first ``limit`` prompts.
    progress:
        Show a progress bar with the time left (tqdm).
    dtype:
        The readout's precision (``torch.float32`` or ``torch.float64``; see :class:`IGLens`).
    batch_size:
        Prompts run together: one right-padded forward pass (with an attention mask) for
        their states, one readout map for their rows, and their block ablations sharing
        forward passes. Each batch is one part file, so at most one batch is lost to an
        interruption. The table does not depend on it beyond rounding (other kernel shapes).

    Launched as N processes (``torchrun --nproc-per-node N`` or ``accelerate launch``), each
    process studies the prompts i with i mod N = its rank and rank 0 returns the whole table
    (the others, their own rows); see ``iglens study --help``.

    Returns
    -------
    A :class:`Study`: ``.table`` has one row per (prompt, position, segment) with ``prompt``
    (index in the input), ``position``, ``segment``, ``block``, ``token``, ``target``,
    ``contribution``, ``lens_prob`` (= ``lens_prob_end``), ``lens_prob_start``,
    ``lens_logit_start``/``_end``, ``top1_end``, ``frozen_prob_start``/``_end``, ``onset``,
    ``monotone``, ``delta_p``, ``final_prob``, ``source``, ``cluster`` (the bootstrap's unit:
    a capital prompt's country, else the prompt) and ``drop_<mode>`` per mode.
    """
    import pandas as pd

    items = _checked_arguments(prompts, modes, limit, batch_size, out)
    lens = IGLens(model, tokenizer, cache_size=batch_size, dtype=dtype)
    ids = [lens.input_ids(p.text) for p in items]
    needs_references = any(m in ("mean", "resample") for m in modes)
    ref_indices = _draw_references(items, int(reference), seed) if needs_references else []
    metadata = _metadata(model, dtype, modes, ref_indices, needs_references, seed, items, prompts)
    folder = None if out is None else Path(out)
    shard = _Shard.from_launcher()
    metadata["processes"] = shard.world
    metadata["rank"] = shard.rank
    done: set[int] = set()
    if folder is not None:
        check = _check_references(folder, metadata)
        done = shard.on_rank_0(lambda: prepare(folder, metadata, STUDY_FOLDER, check))
    references = _References(lens, ids, ref_indices, items, seed) if needs_references else None
    todo = [i for i in range(len(items)) if i not in done and i % shard.world == shard.rank]
    bar = _progress(len(items), len(done), progress and shard.rank == 0)
    tables = []
    started = time.perf_counter()
    for first in range(0, len(todo), batch_size):
        batch = todo[first : first + batch_size]
        rows = _batch_rows(lens, model, tokenizer, batch, items, ids, modes, references)
        part = pd.DataFrame({k: np.concatenate([r[k] for r in rows]) for k in rows[0]})
        if folder is not None:
            write_part(folder, int(part["prompt"].min()), part)
        tables.append(part)
        bar.update(len(batch))
    bar.close()
    metadata["seconds"] = round(time.perf_counter() - started, 3)
    if folder is not None:
        shard.barrier()  # every shard's parts are on disk
        table = read_table(folder, STUDY_FOLDER) if shard.rank == 0 else tables
    else:
        table = shard.gather(tables)
    table = (
        (pd.concat(table, ignore_index=True) if table else pd.DataFrame())
        if isinstance(table, list)
        else table
    )
    if len(table):
        table = table.sort_values(["prompt", "position", "segment"], ignore_index=True)
        table = _with_clusters(table, items)
    result = Study(table, metadata)
    if needs_references and len(table):
        metadata["unreferenced"] = result.unreferenced()
    return result


@dataclass
class _Shard:
    """This process's share of a study launched with N processes (``torchrun`` or
    ``accelerate launch``: they set ``RANK`` and ``WORLD_SIZE``). Process r takes the prompts
    i with i mod N = r; rank 0 gathers the table. One process alone: rank 0 of 1.

    The processes exchange only Python objects (prompt indices, tables) through
    ``torch.distributed`` on the gloo backend, whatever device each one computes on.
    """

    rank: int = 0
    world: int = 1

    @classmethod
    def from_launcher(cls) -> _Shard:
        import os

        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls()
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group(backend="gloo")
        return cls(dist.get_rank(), dist.get_world_size())

    def on_rank_0(self, fn: Callable[[], _T]) -> _T:
        """``fn()`` run by rank 0, its result (or its error) shared with every rank."""
        if self.world == 1:
            return fn()
        import torch.distributed as dist

        box: list[tuple[str, Any] | None] = [None]
        if self.rank == 0:
            try:
                box[0] = ("ok", fn())
            except Exception as err:  # every rank raises it, none waits forever
                box[0] = ("error", err)
        dist.broadcast_object_list(box, src=0)
        shared = box[0]
        assert shared is not None, "rank 0's result, broadcast to every rank"
        status, value = shared
        if status == "error":
            raise value
        return value

    def barrier(self) -> None:
        if self.world > 1:
            import torch.distributed as dist

            dist.barrier()

    def gather(self, tables: list[DataFrame]) -> list[DataFrame]:
        """Every rank's list of tables, concatenated on rank 0 (others keep their own)."""
        if self.world == 1:
            return tables
        import torch.distributed as dist

        if self.rank != 0:
            dist.gather_object(tables, None, dst=0)
            return tables
        gathered: list[Any] = [None] * self.world
        dist.gather_object(tables, gathered, dst=0)
        return [t for part in gathered for t in part]


def _progress(total: int, done: int, show: bool) -> tqdm:
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=done, disable=not show, unit="prompt", desc="iglens study")


STUDY_FOLDER = FolderKind(
    name="study",
    unit="prompt",
    units="prompts",
    columns=("prompt", "position", "segment"),
    settings=(
        "model",
        "dtype",
        "readout_dtype",
        "modes",
        "reference",
        "references",
        "seed",
        "n_prompts",
        "prompts",
    ),
)
"""The ablation study's folder; its settings must match for a folder to resume a study
(the number of processes need not)."""


def _check_references(folder: Path, metadata: dict[str, Any]) -> Callable[..., None]:
    """Refuse a folder whose mean and resample references follow another rule."""

    def check(old: dict[str, Any], changed: list[str]) -> None:
        referenced = {"mean", "resample"} & set(old.get("modes") or ())
        if "references" in changed and referenced and "references" in metadata:
            made = old.get(
                "references",
                "the previous rule (across tasks, missing positions filled from other positions)",
            )
            raise InvalidRequestError(
                f"{folder} holds a study whose mean and resample references follow "
                f"{made}, not {metadata.get('references')}; its drops would not be "
                f"comparable, so it is not resumed: use a new folder"
            )

    return check
