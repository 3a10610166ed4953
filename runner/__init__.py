"""runner part of mpstream."""
