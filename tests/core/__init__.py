"""Tests of iglens_viz.core."""
