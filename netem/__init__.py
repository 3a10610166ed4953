"""netem part of mpstream."""
