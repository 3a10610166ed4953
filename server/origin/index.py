"""What a low-latency tree holds at this moment, per DASH representation: its complete
segments and the segment being written, each with the chunks (parts) written so far. A scan of
the dash/ folder brings it up to date, and `update` with the names of the files that changed
(which the origin's watch is told of) does so at less cost; the LL-HLS playlists and every held
request are answered from it."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from mpstream.manifests.cmaf import Chunk, read_chunks, track_timescale
from mpstream.manifests.dash import availability_start
from mpstream.manifests.isobmff import BoxError
from mpstream.manifests.llhls import MediaPlaylist, Part, Segment
from mpstream.manifests.lltree import LowLatencyTree, Rendition
from mpstream.server.origin.clock import StreamClock

# The HLS specification's limits for a blocking reload: a request more than this many segments
# past the last one, or this many parts past the last part, is answered 400 at once.
ADVANCE_SEGMENTS = 2
ADVANCE_PARTS = 3


@dataclass
class SegmentState:
    number: int
    size: int = 0  # bytes written so far (complete: all of them)
    parsed: int = 0  # where the next chunk begins
    chunks: list[Chunk] = field(default_factory=list)
    complete: bool = False


@dataclass
class RepState:
    rep: str
    timescale: int | None = None
    segments: dict[int, SegmentState] = field(default_factory=dict)

    def open_number(self) -> int | None:
        """The segment being written: the first incomplete one after the last complete."""
        done = [n for n, s in self.segments.items() if s.complete]
        growing = [n for n, s in self.segments.items()
                   if not s.complete and (not done or n > max(done))]
        if growing:
            return min(growing)
        return max(done) + 1 if done else None


class StreamIndex:
    """The segments and chunks of every representation of one low-latency tree."""

    def __init__(self, root: Path, tree: LowLatencyTree):
        self.root, self.tree = root, tree
        self.dash = root / "dash"
        self.reps: dict[str, RepState] = {r.rep: RepState(r.rep) for r in tree.renditions}
        self.start: datetime | None = None  # availabilityStartTime: segment 1 begins then
        self.ended = False
        self.clock = StreamClock(tree.part_target, 2 * tree.segment_duration)

    # --- scanning --------------------------------------------------------------------------

    def scan(self) -> bool:
        """Reads what ffmpeg wrote since the last scan; True when anything changed (anything a
        playlist is made from: the origin keeps each playlist until then)."""
        changed = False
        if self.start is None:
            self.start = availability_start(self.dash / "ffmpeg.mpd")
            changed = self.start is not None
        seen: dict[tuple[str, int], bool] = {}
        try:
            entries = list(os.scandir(self.dash))
        except FileNotFoundError:
            return False
        for entry in entries:
            parsed = self.tree.parse_name(entry.name)
            if parsed is None or parsed[2] is not None or parsed[0] not in self.reps:
                continue
            rep, number, _, writing = parsed
            # A segment renamed between the listing and now shows up once, complete.
            seen[(rep, number)] = seen.get((rep, number), True) and writing
        for (rep, number), writing in seen.items():
            changed |= self._update(self.reps[rep], number, writing)
        for state in self.reps.values():
            gone = [n for n in state.segments if (state.rep, n) not in seen]
            for n in gone:
                del state.segments[n]
            changed |= bool(gone)
        return changed

    def update(self, names: Iterable[str]) -> bool:
        """Brings the segments named (files of dash/ that changed: a segment's final name or
        its .tmp) up to date with the disk as it is now; True when anything changed. What the
        disk holds decides, not what happened to the file: a segment renamed into place is
        complete, one whose files are both gone is forgotten."""
        changed = False
        if self.start is None:
            self.start = availability_start(self.dash / "ffmpeg.mpd")
            changed = self.start is not None
        segments = set()
        for name in names:
            parsed = self.tree.parse_name(name)
            if parsed is not None and parsed[2] is None and parsed[0] in self.reps:
                segments.add(parsed[:2])
        for rep, number in sorted(segments):
            state = self.reps[rep]
            final, being_written = self.path_of(rep, number)
            if final.exists() or being_written.exists():
                changed |= self._update(state, number, writing=not final.exists())
            elif state.segments.pop(number, None) is not None:
                changed = True
        return changed

    def _update(self, rep: RepState, number: int, writing: bool) -> bool:
        seg = rep.segments.get(number)
        new = seg is None  # a segment begun: the one being written is another
        if seg is None:
            seg = rep.segments[number] = SegmentState(number)
        if seg.complete:
            return False
        if rep.timescale is None:
            try:
                rep.timescale = track_timescale((self.dash / self.tree.init_name(rep.rep))
                                                .read_bytes())
            except (OSError, BoxError):
                return new
        name = self.tree.segment_name(rep.rep, number)
        path = self.dash / (f"{name}.tmp" if writing else name)
        try:
            size = path.stat().st_size
            if size > seg.parsed:
                with path.open("rb") as f:
                    f.seek(seg.parsed)
                    data = f.read(size - seg.parsed)
                chunks, rest = read_chunks(data)
                seg.chunks += [Chunk(c.offset + seg.parsed, c.size, c.ticks) for c in chunks]
                seg.parsed += rest
                if chunks:
                    self._chunk_seen(rep, seg)
        except (FileNotFoundError, BoxError):
            return new  # renamed or removed meanwhile: the next scan sees it
        grew = size != seg.size
        seg.size = size
        if not writing:
            seg.complete = True
        return new or grew or not writing

    def _chunk_seen(self, rep: RepState, seg: SegmentState) -> None:
        """Tells the clock when the segment's last chunk was due: its last frame's time."""
        if self.start is None or rep.timescale is None:
            return
        media_s = ((seg.number - 1) * self.tree.segment_duration
                   + sum(c.ticks for c in seg.chunks) / rep.timescale)
        self.clock.chunk_written(self.start.timestamp() + media_s)

    # --- what it holds ---------------------------------------------------------------------

    def segment(self, rep: str, number: int) -> SegmentState | None:
        state = self.reps.get(rep)
        return state.segments.get(number) if state else None

    def open_number(self, rep: str) -> int | None:
        state = self.reps.get(rep)
        return state.open_number() if state else None

    def path_of(self, rep: str, number: int) -> list[Path]:
        """Where a segment's bytes are: its final name, or the name it is written under."""
        name = self.tree.segment_name(rep, number)
        return [self.dash / name, self.dash / f"{name}.tmp"]

    def playlist(self, rendition: Rendition) -> MediaPlaylist | None:
        """The rendition's LL-HLS media playlist now; None before its first segment begins."""
        state = self.reps[rendition.rep]
        open_number = state.open_number()
        if open_number is None or state.timescale is None or self.start is None:
            return None
        tree = self.tree
        done = sorted(n for n, s in state.segments.items() if s.complete)
        segments = tuple(self._segment(state, n) for n in done[-tree.window_segments:])
        growing = state.segments.get(open_number)
        parts = self._parts(state, growing) if growing else ()
        ahead = ((open_number, len(parts)) if len(parts) < tree.parts_per_segment
                 else (open_number + 1, 0))
        return MediaPlaylist(
            map_uri=_dash_uri(tree.init_name(state.rep)),
            target_duration=tree.segment_duration, part_target=tree.part_target,
            part_hold_back=max(tree.target_latency_s, 3 * tree.part_target),
            segments=segments, open_msn=open_number, open_parts=parts,
            preload_hint=_dash_uri(tree.part_name(state.rep, *ahead)), ended=self.ended)

    def _segment(self, state: RepState, number: int) -> Segment:
        seg = state.segments[number]
        parts = self._parts(state, seg)
        assert self.start is not None
        starts = self.start + timedelta(seconds=(number - 1) * self.tree.segment_duration)
        return Segment(msn=number, uri=_dash_uri(self.tree.segment_name(state.rep, number)),
                       duration=sum(p.duration for p in parts), starts_at=starts, parts=parts)

    def _parts(self, state: RepState, seg: SegmentState) -> tuple[Part, ...]:
        scale = state.timescale or 1
        return tuple(Part(uri=_dash_uri(self.tree.part_name(state.rep, seg.number, k)),
                          duration=chunk.ticks / scale, independent=k == 0)
                     for k, chunk in enumerate(seg.chunks))


def reload_answer(playlist: MediaPlaylist, msn: int, part: int | None) -> str:
    """What a blocking reload for (msn, part) gets from this playlist: "ready" (it lists that
    segment or part), "wait" (not yet), or "refuse" (too far ahead: 400 at once)."""
    if playlist.lists(msn, part):
        return "ready"
    last_complete = playlist.open_msn - 1
    if msn > last_complete + ADVANCE_SEGMENTS:
        return "refuse"
    if part is not None and msn == playlist.open_msn and \
            part >= len(playlist.open_parts) + ADVANCE_PARTS:
        return "refuse"
    return "wait"


def _dash_uri(name: str) -> str:
    """A DASH file's URI as an HLS media playlist (hls/<rendition>/index.m3u8) names it."""
    return f"../../dash/{name}"

