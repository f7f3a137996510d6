"""Tests of iglens_viz.lenses."""
