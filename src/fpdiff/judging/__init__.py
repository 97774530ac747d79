"""The judging engine every analysis that judges cells stands on: the grid of cells, running it, the float64 judge,
evidence and the rules that turn measurements into verdicts, one Cell type with its revisions."""
