"""Boards: board data, generated projects, footprint, and the model-to-board flow."""
