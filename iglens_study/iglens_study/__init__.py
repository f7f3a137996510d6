"""The pre-registered IG-Lens studies, a package beside iglens_viz on its public API.

The ablation study: does the onset predict the block whose ablation hurts most?

:func:`study` runs IG-Lens, logit-lens readings and block ablations (zero, reference mean,
resample) over many prompts into one tidy table; :mod:`.scoring` scores IG-Lens and its
baselines (other methods, constant and random blocks) on it, with bootstrap intervals over
prompts; :mod:`.prompts` holds the built-in prompt sets with known answers.

The counterfactual mode (``docs/study.md``): :func:`pair_study` patches clean/corrupt pairs
(:mod:`.pairs`: the built-in ``capital-pairs`` or a JSONL file) into one table,
:mod:`.pair_scoring` answers the pre-registered hypotheses H1–H4 on it
(:func:`hypotheses`), :mod:`.pair_report` writes its report.
``iglens study …`` is :mod:`.cli`, an entry point of iglens_viz's command line.

>>> s = iglens_study.study(model, tokenizer, "default", out="study/")   # doctest: +SKIP
>>> s.summary()                                                        # doctest: +SKIP
"""

from __future__ import annotations

from .counterfactual import PairStudy, pair_study
from .pair_report import write_pair_report
from .pair_scoring import PairSummary, hypotheses, pair_scores, pair_summary
from .pairs import capital_pairs, load_pairs
from .prompts import BUILTIN_SETS, StudyPrompt, builtin_set, load_study_prompts
from .run import STUDY_MODES, Study, StudyFolderError, StudyMode, study

__all__ = [
    "BUILTIN_SETS",
    "STUDY_MODES",
    "PairStudy",
    "PairSummary",
    "Study",
    "StudyFolderError",
    "StudyMode",
    "StudyPrompt",
    "builtin_set",
    "capital_pairs",
    "hypotheses",
    "load_pairs",
    "load_study_prompts",
    "pair_scores",
    "pair_study",
    "pair_summary",
    "study",
    "write_pair_report",
]
