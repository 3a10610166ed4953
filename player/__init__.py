"""player part of mpstream."""
