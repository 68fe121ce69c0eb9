"""The Python layer: CPython interpreters read from outside (no change to the program)."""
