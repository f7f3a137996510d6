"""Tests of iglens_viz.adapters."""
