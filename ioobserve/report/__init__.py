"""The HTML report: the analysis drawn as one self-contained page."""
