"""A run's trials spread over hosts: raytrials.py hands trials to a Ray cluster (the only
module that imports Ray), local.py makes a cluster of sandboxes on this machine (`--cluster
local:N`), hosts.py starts and stops this machine's Ray node and cli.py is `mpstream cluster`.
They build on runner/process.py, which runs one trial in a process of its own."""
