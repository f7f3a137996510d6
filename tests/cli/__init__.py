"""Tests of iglens_viz.cli."""
