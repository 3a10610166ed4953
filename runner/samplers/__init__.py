"""What a trial records beside its workload: kernel.py polls the sockets (MPTCP subflows
included) with `ss`, capture.py keeps packet headers and the kernel's MPTCP counters, and
quic.py reads the QUIC hop's per-path statistics as rows of the kernel samples' shape."""
