"""Network I/O as the recording names it: the object-storage requests that HTTP carries."""
