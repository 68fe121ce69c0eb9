"""Context tables that turn kernel ids into names: processes, files."""
