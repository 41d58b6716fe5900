"""The compilation pipeline: the pass manager and the one ordered list of passes."""
