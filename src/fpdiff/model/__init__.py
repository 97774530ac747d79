"""The model as a graph: shape variants, segments, mixed-precision modules, autocast."""
