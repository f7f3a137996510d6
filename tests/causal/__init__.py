"""Tests of iglens_viz.causal."""
