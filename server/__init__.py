"""server part of mpstream."""
