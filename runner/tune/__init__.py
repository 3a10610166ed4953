"""`mpstream tune`: search.py searches deployment settings with real trials, space.py reads the
search spaces (spaces/, one TOML file each)."""
