"""Tests of iglens_viz.views."""
