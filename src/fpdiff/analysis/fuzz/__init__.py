"""The fuzzer: random valid graphs drawn from the ops catalog's ops, judged by check's rule against float64,
failing cells minimized and deduplicated into findings worth reading."""
