"""Check a media tree the way a player would meet it, and say exactly what is wrong.

- every playlist and the MPD parse; every segment they address exists and is not empty;
- segment durations sum to the presentation length;
- every video segment starts with a keyframe (ffprobe), so a player can switch anywhere;
- the MPD has an HEVC (hvc1) set, an AVC set and an audio set; the HLS master lists AVC + AAC;
- every codecs string is a complete RFC 6381 string equal to the one read from the bitstream.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import m3u8

from mpstream.errors import UserError
from mpstream.manifests import dash, hls
from mpstream.manifests.bitstream import init_segment_codecs, ts_video_codecs
from mpstream.manifests.codecs import CodecError, codec_family
from mpstream.manifests.ffprobe import ProbeError, segments_start_with_keyframe
from mpstream.manifests.isobmff import BoxError
from mpstream.manifests.presentation import DASH_MANIFEST, HLS_MASTER, MEDIA_JSON, read_media_record

# Allowed difference between the sum of segment durations and the presentation length:
# ffmpeg ends a presentation on the last whole frame / audio frame.
DURATION_TOLERANCE_S = 0.25
_KEYFRAME_WORKERS = 4


@dataclass
class ValidationReport:
    root: Path
    problems: list[str] = field(default_factory=list)
    playlists: int = 0
    representations: int = 0
    segments: int = 0
    keyframes_checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, where: Path | str, problem: str) -> None:
        where = Path(where)
        with contextlib.suppress(ValueError):
            where = where.relative_to(self.root)
        self.problems.append(f"{where}: {problem}")


@dataclass(frozen=True)
class KeyframeJob:
    """The segments of one representation, in order, to be probed together."""

    what: str
    init: Path | None  # fMP4 initialization segment; None for MPEG-TS
    segments: list[Path]


class InvalidMediaTree(UserError):
    """The produced tree failed validation."""


def validate_media_tree(root: Path, duration: float | None = None,
                        check_keyframes: bool = True) -> ValidationReport:
    """Validate root/hls and root/dash. `duration` is the expected presentation length; by
    default it is taken from media.json, else from the MPD."""
    root = Path(root)
    report = ValidationReport(root)
    if duration is None and (root / MEDIA_JSON).is_file():
        duration = read_media_record(root).duration
    keyframe_jobs: list[KeyframeJob] = []
    mpd_duration = _validate_dash(root / DASH_MANIFEST, duration, report, keyframe_jobs)
    if duration is None:
        duration = mpd_duration
    _validate_hls(root / HLS_MASTER, duration, report, keyframe_jobs)
    if check_keyframes:
        _check_keyframes(keyframe_jobs, report)
    return report


def require_valid(root: Path, duration: float | None = None) -> ValidationReport:
    report = validate_media_tree(root, duration)
    if not report.ok:
        shown = "; ".join(report.problems[:8])
        more = f" (and {len(report.problems) - 8} more)" if len(report.problems) > 8 else ""
        raise InvalidMediaTree(
            f"The produced media failed validation: {shown}{more}. Nothing was installed;"
            " re-run, and if it persists report it with the source and ladder used."
        )
    return report


def _near(a: float, b: float | None) -> bool:
    return b is None or abs(a - b) <= DURATION_TOLERANCE_S


def _validate_dash(path: Path, duration: float | None, report: ValidationReport,
                   jobs: list[KeyframeJob]) -> float | None:
    if not path.is_file():
        report.add(path, "missing")
        return None
    try:
        mpd = dash.load_mpd(path)
    except dash.MpdError as exc:
        report.add(path, f"does not parse: {exc}")
        return None
    if not _near(mpd.duration, duration):
        report.add(path, f"mediaPresentationDuration {mpd.duration:.3f} s,"
                         f" expected {duration:.3f} s")
    families: dict[str | None, str] = {}
    for aset in mpd.adaptation_sets:
        set_families = {codec_family(r.codecs) for r in aset.representations}
        for fam in set_families:
            families.setdefault(fam, aset.content_type)
        if len(set_families) > 1:
            report.add(path, f"an adaptation set mixes codecs {sorted(map(str, set_families))}")
        starts = None
        for rep in aset.representations:
            report.representations += 1
            where = f"{path.name} Representation {rep.id}"
            if codec_family(rep.codecs) is None:
                report.add(path, f"Representation {rep.id}: codecs {rep.codecs!r} is not a"
                                 " complete RFC 6381 string")
            _check_init(rep, where, report)
            total = sum(s.duration for s in rep.segments)
            if not rep.segments or not _near(total, mpd.duration):
                report.add(path, f"Representation {rep.id}: segments sum to {total:.3f} s,"
                                 f" presentation is {mpd.duration:.3f} s")
            for seg in rep.segments:
                report.segments += 1
                if not seg.path.is_file() or seg.path.stat().st_size == 0:
                    report.add(seg.path, f"missing or empty (listed by {where})")
            rep_starts = [round(s.start, 3) for s in rep.segments]
            if starts is not None and rep_starts != starts:
                report.add(path, f"Representation {rep.id}: segment boundaries differ from the"
                                 " other representations of its set (not switchable)")
            starts = starts if starts is not None else rep_starts
            present = [s.path for s in rep.segments if s.path.is_file()]
            if aset.content_type == "video" and rep.init.is_file() and present:
                jobs.append(KeyframeJob(where, rep.init, present))
    if families.get("hevc") != "video":
        report.add(path, "no HEVC (hvc1) video adaptation set")
    if families.get("avc") != "video":
        report.add(path, "no AVC video adaptation set")
    if families.get("aac") != "audio":
        report.add(path, "no AAC audio adaptation set")
    return mpd.duration


def _check_init(rep: dash.Representation, where: str, report: ValidationReport) -> None:
    if not rep.init.is_file():
        report.add(rep.init, f"initialization segment missing (listed by {where})")
        return
    try:
        fourcc, actual = init_segment_codecs(rep.init)
    except (CodecError, BoxError) as exc:
        report.add(rep.init, f"cannot read the decoder configuration: {exc}")
        return
    if actual != rep.codecs:
        report.add(rep.init, f"bitstream says codecs {actual!r} but {where} says {rep.codecs!r}")
    if codec_family(actual) == "hevc" and fourcc != "hvc1":
        report.add(rep.init, f"HEVC sample entry is {fourcc!r}, players expect 'hvc1'")


def _validate_hls(master_path: Path, duration: float | None, report: ValidationReport,
                  jobs: list[KeyframeJob]) -> None:
    if not master_path.is_file():
        report.add(master_path, "missing")
        return
    try:
        master = m3u8.loads(master_path.read_text(), uri=str(master_path))
    except Exception as exc:  # m3u8 raises a variety of parse errors
        report.add(master_path, f"does not parse: {exc}")
        return
    report.playlists += 1
    if not master.is_variant or not master.playlists:
        report.add(master_path, "is not a master playlist with variants")
        return
    for variant in master.playlists:
        info = variant.stream_info
        where = f"variant {variant.uri}"
        for attr in ("bandwidth", "average_bandwidth", "resolution", "codecs", "frame_rate"):
            if not getattr(info, attr, None):
                report.add(master_path, f"{where} lacks {attr.upper().replace('_', '-')}")
        codecs = (info.codecs or "").split(",")
        fams = [codec_family(c) for c in codecs]
        if sorted(map(str, fams)) != ["aac", "avc"]:
            report.add(master_path, f"{where}: CODECS {info.codecs!r} is not one complete AVC and"
                                    " one complete AAC RFC 6381 string")
        if variant.uri is None:
            report.add(master_path, f"{where} has no URI")
            continue
        _validate_media_playlist(master_path.parent / variant.uri, codecs, duration, report, jobs)


def _validate_media_playlist(path: Path, codecs: list[str], duration: float | None,
                             report: ValidationReport, jobs: list[KeyframeJob]) -> None:
    if not path.is_file():
        report.add(path, "media playlist missing")
        return
    try:
        playlist, segments = hls.load_media_playlist(path)
    except Exception as exc:
        report.add(path, f"does not parse: {exc}")
        return
    report.playlists += 1
    if playlist.is_variant or not segments:
        report.add(path, "is not a media playlist with segments")
        return
    if not playlist.is_endlist:
        report.add(path, "lacks EXT-X-ENDLIST (video on demand must end)")
    total = sum(s.duration for s in segments)
    if duration is not None and not _near(total, duration):
        report.add(path, f"segment durations sum to {total:.3f} s, expected {duration:.3f} s")
    longest = max(s.duration for s in segments)
    if playlist.target_duration is None or round(longest) > playlist.target_duration:
        report.add(path, f"EXT-X-TARGETDURATION {playlist.target_duration} < longest segment"
                         f" {longest:.3f} s")
    present = []
    for seg in segments:
        report.segments += 1
        if not seg.path.is_file() or seg.path.stat().st_size == 0:
            report.add(seg.path, f"missing or empty (listed by {path.name})")
        else:
            present.append(seg.path)
    if present:
        jobs.append(KeyframeJob(f"{path.parent.name}/{path.name}", None, present))
    if present:
        try:
            actual = ts_video_codecs(present[0])
        except CodecError as exc:
            report.add(present[0], f"cannot read the H.264 parameter sets: {exc}")
            return
        if actual not in codecs:
            report.add(path, f"bitstream says {actual!r} but the master's CODECS says {codecs}")


def _check_keyframes(jobs: list[KeyframeJob], report: ValidationReport) -> None:
    def check(job: KeyframeJob) -> list[str]:
        header = job.init.read_bytes() if job.init else b""
        try:
            keys = segments_start_with_keyframe(header, [p.read_bytes() for p in job.segments])
        except ProbeError as exc:
            return [f"{job.what}: ffprobe cannot read the segments: {exc}"]
        report.keyframes_checked += len(keys)
        problems = []
        for path, key in zip(job.segments, keys, strict=True):
            if key is None:
                problems.append(f"{job.what} {path.name}: no video packet")
            elif not key:
                problems.append(f"{job.what} {path.name}: does not start with a keyframe")
        return problems

    with ThreadPoolExecutor(_KEYFRAME_WORKERS) as pool:
        for problems in pool.map(check, jobs):
            report.problems.extend(problems)


def main(argv: list[str] | None = None) -> int:
    """`python -m mpstream.manifests.validate DIR`: validate a media tree made earlier."""
    import argparse

    parser = argparse.ArgumentParser(description="Validate an mpstream media tree.")
    parser.add_argument("root", type=Path)
    args = parser.parse_args(argv)
    report = validate_media_tree(args.root)
    for problem in report.problems:
        print(f"problem: {problem}")
    print(f"{'valid' if report.ok else 'INVALID'}: {report.playlists} playlists,"
          f" {report.representations} DASH representations, {report.segments} segments,"
          f" {report.keyframes_checked} keyframe starts checked")
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
