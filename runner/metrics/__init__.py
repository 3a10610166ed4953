"""A trial's figures, computed from its raw data: metric.py is where each figure is declared
(its label and unit), common.py computes those every trial has whatever its workload (per
path, per link, fairness), evidence.py those of each video segment. A workload computes its own
(runner/workloads/); the report (runner/report/) reads them all."""
