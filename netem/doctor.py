"""What the emulator adds to `mpstream doctor` (mpstream/hooks.py): the coupled congestion
controls, built and loadable or not."""

from __future__ import annotations

import os

from mpstream.doctor import Finding
from mpstream.netem import coupled


def check_coupled_cc() -> list[Finding]:
    """Whether each coupled congestion control (netem/coupled.py) is built and loads into this
    kernel. Optional: profiles with cubic, reno or bbr run without them."""
    found = []
    for cc in coupled.COUPLED:
        if os.geteuid() != 0:
            reason = coupled.machine_refusal(cc)
            found.append(Finding("kernel", f"coupled cc {cc}", False,
                                 reason or "built; loading not tried without root",
                                 coupled.BUILD_COMMAND if reason else "run as root",
                                 required=False))
            continue
        ok, detail = coupled.probe(cc)
        found.append(Finding("kernel", f"coupled cc {cc}", ok, detail,
                             f"make setup (it installs clang, libbpf-dev and bpftool and runs "
                             f"{coupled.BUILD_COMMAND})", required=False))
    return found
