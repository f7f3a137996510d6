"""Tests of iglens_viz.export."""
