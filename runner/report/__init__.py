"""The report of a run folder (`mpstream report`, the run pages of `mpstream serve`, the docs'
summaries): analysis.py reads the trials once and computes every figure; build.py writes the
report from it through csvfiles.py, figures.py (drawn with plots.py) and htmlpage.py; table.py
prints its tables; reference.py holds the published figures set beside ours; summary.py writes a
run's summary for docs/data/; runfolders.py and runpages.py show a results folder's runs in the
browser. Nothing here runs a trial."""
