"""Checks the JSON that `mpstream play --json` printed: one session that started, played its
segments without errors, and whose bytes came over the emulated paths.

    python scripts/check-play-json.py RESULT.json PLAYER

Exit 0 and a one-line summary when it holds; exit 1 naming every figure that fell short.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def problems(result: dict, player: str) -> list[str]:
    found = []
    if result.get("failure"):
        found.append(f"the session failed: {result['failure']}")
    if result.get("player") != player:
        found.append(f"player is {result.get('player')!r}, not {player!r}")
    startup = result.get("startup_delay_ms")
    if not isinstance(startup, int | float) or startup <= 0:
        found.append(f"no startup delay ({startup!r}): the first frame was never rendered")
    if not result.get("codec"):
        found.append("no codec reported at startup")
    if (result.get("segments") or 0) < 2:
        found.append(f"only {result.get('segments')} segment(s) downloaded")
    if result.get("errors"):
        found.append(f"{result['errors']} player error(s)")
    if not (result.get("mean_download_rate_bps") or 0) > 0:
        found.append("no download rate measured")
    played = result.get("played_s") or 0
    if played <= 0:
        found.append(f"nothing played (played_s {played!r})")
    paths = result.get("paths") or []
    if not paths or sum(p.get("rx_bytes", 0) for p in paths) <= 0:
        found.append("the client's emulated paths carried no bytes")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    path, player = Path(argv[1]), argv[2]
    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        print(f"FAIL: {path} is not the JSON of a session: {exc}")
        return 1
    found = problems(result, player)
    if found:
        print("FAIL: " + "; ".join(found))
        return 1
    shares = " / ".join(f"{p['rx_share']:.0%}" for p in result["paths"])
    print(f"ok: {player} over {result.get('transport')}, codec {result['codec']}, startup "
          f"{result['startup_delay_ms']:.0f} ms, {result['segments']} segments, "
          f"{result.get('stall_count')} stalls, played {result['played_s']} s, "
          f"path shares {shares}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
