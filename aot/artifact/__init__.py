"""Artifacts: the model library files, metadata, the header and the entry-point ABI."""
