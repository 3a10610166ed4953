"""encoder part of mpstream."""
