"""Tests of iglens_viz.protocol."""
