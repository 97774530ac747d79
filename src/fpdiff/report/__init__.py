"""What every analysis's reports share: the terminal's and the HTML page's parts, JSON, JUnit, the run history, the
support page and the notebook views; each analysis's own renderers live beside its declaration (fpdiff/analyses/)."""
