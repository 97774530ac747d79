"""ONNX graphs: export from torch, casts, mixed graphs, and the float64 reference."""
