"""What a low-latency live tree is, as `mpstream live --low-latency` describes it in its
live.json and the origin (server/origin/) reads it: the segments' and parts' timing, the
latency target, and which DASH representation each HLS media playlist is made from.

The file names are ffmpeg's (encoder/commands.py's `LiveLayout` writes them): the DASH muxer
writes `dash/<stamp>-<rep>-NNNNN.m4s` under `.tmp` while the segment is encoded, and
`dash/<stamp>-init-<rep>.m4s` once. A part has no file of its own: it is a chunk of its
segment, named `<stamp>-<rep>-NNNNN.p<K>.m4s` in the playlists and cut from the segment by the
origin.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

LIVE_JSON = "live.json"
LOW_LATENCY_KEY = "low_latency"
_PART = re.compile(r"^(?P<stamp>[^-]+)-(?P<rep>\d+)-(?P<number>\d+)(?:\.p(?P<part>\d+))?\.m4s"
                   r"(?P<tmp>\.tmp)?$")


class Rendition(BaseModel):
    """One LL-HLS media playlist (hls/<playlist>/index.m3u8) and the DASH representation whose
    segments and chunks it lists."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    playlist: str  # "360p", or "audio"
    rep: str  # the DASH Representation@id
    kind: Literal["video", "audio"]


class LowLatencyTree(BaseModel):
    """live.json's `low_latency` block, with the stream's own fields the origin needs."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    stamp: str
    segment_duration: float
    part_duration: float
    part_target: float  # the longest part (s): LL-HLS PART-TARGET
    target_latency_s: float
    window_segments: int
    renditions: tuple[Rendition, ...]

    @property
    def parts_per_segment(self) -> int:
        return round(self.segment_duration / self.part_duration)

    def rendition(self, playlist: str) -> Rendition | None:
        return next((r for r in self.renditions if r.playlist == playlist), None)

    def init_name(self, rep: str) -> str:
        return f"{self.stamp}-init-{rep}.m4s"

    def segment_name(self, rep: str, number: int) -> str:
        return f"{self.stamp}-{rep}-{number:05d}.m4s"

    def part_name(self, rep: str, number: int, part: int) -> str:
        return f"{self.stamp}-{rep}-{number:05d}.p{part}.m4s"

    def parse_name(self, name: str) -> tuple[str, int, int | None, bool] | None:
        """(rep, segment number, part or None, being written) of a segment's or a part's file
        name of this stream; None for any other name."""
        m = _PART.match(name)
        if m is None or m.group("stamp") != self.stamp:
            return None
        part = m.group("part")
        return (m.group("rep"), int(m.group("number")), None if part is None else int(part),
                m.group("tmp") is not None)


def read_live_state(tree: Path) -> dict | None:
    """A live tree's live.json (None: there is none, or it cannot be read)."""
    try:
        return json.loads((tree / LIVE_JSON).read_text())
    except (OSError, ValueError):
        return None


def read_low_latency(tree: Path) -> tuple[LowLatencyTree, str] | None:
    """The tree's low-latency description and its state (starting, running, ended); None when
    the tree is no low-latency live tree (no live.json, or one without the block)."""
    state = read_live_state(tree)
    if state is None:
        return None
    block = (state.get("extra") or {}).get(LOW_LATENCY_KEY)
    if not isinstance(block, dict):
        return None
    return LowLatencyTree.model_validate(block), str(state.get("state"))
