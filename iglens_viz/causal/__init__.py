"""tmp"""
from .ablation import AblationResult, ablate
