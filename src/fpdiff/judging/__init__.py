"""The judging engine every analysis stands on: the grid of cells, running it, the float64 judge, evidence and the
rules that turn measurements into verdicts."""
