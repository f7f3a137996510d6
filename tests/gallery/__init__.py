"""The gallery's notebooks (gallery/): their committed form, and each run top to bottom."""
