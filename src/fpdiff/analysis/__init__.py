"""The analyses over the grid: check, ranges, locate, plan; each a package the API hands on."""
