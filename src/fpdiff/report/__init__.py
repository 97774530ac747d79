"""Reports of a check: terminal table and JSON."""
