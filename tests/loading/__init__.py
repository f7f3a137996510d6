"""Tests of iglens_viz.loading."""
