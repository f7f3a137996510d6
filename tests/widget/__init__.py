"""Tests of iglens_viz.widget."""
