"""The DASH side of a media tree: read an MPD into plain objects (segments expanded from their
SegmentTemplate), and finish the MPD that ffmpeg's muxer wrote."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from lxml import etree

NS = "urn:mpeg:dash:schema:mpd:2011"
_Q = f"{{{NS}}}"
_DURATION = re.compile(
    r"^P(?:(?P<d>\d+(?:\.\d+)?)D)?(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)
_TEMPLATE_VAR = re.compile(r"\$(RepresentationID|Number|Time|Bandwidth)(%0(\d+)d)?\$")


class MpdError(ValueError):
    """The MPD cannot be read as the static, template-addressed MPD we produce."""


@dataclass
class Segment:
    path: Path
    start: float  # seconds
    duration: float


@dataclass
class Representation:
    id: str
    codecs: str
    bandwidth: int
    mime_type: str
    width: int | None
    height: int | None
    init: Path
    segments: list[Segment] = field(default_factory=list)


@dataclass
class AdaptationSet:
    content_type: str  # "video" or "audio"
    representations: list[Representation]

    @property
    def codec_prefixes(self) -> set[str]:
        return {r.codecs.split(".")[0] for r in self.representations}


@dataclass
class Mpd:
    path: Path
    duration: float
    adaptation_sets: list[AdaptationSet]


def parse_iso_duration(text: str) -> float:
    match = _DURATION.match(text or "")
    if not match:
        raise MpdError(f"not an ISO 8601 duration: {text!r}")
    parts = {k: float(v) if v else 0.0 for k, v in match.groupdict().items()}
    return parts["d"] * 86400 + parts["h"] * 3600 + parts["m"] * 60 + parts["s"]


def expand_template(template: str, rep_id: str, number: int, time: int, bandwidth: int) -> str:
    values = {"RepresentationID": rep_id, "Number": number, "Time": time, "Bandwidth": bandwidth}

    def substitute(match: re.Match) -> str:
        value = values[match.group(1)]
        if match.group(3) and isinstance(value, int):
            return f"{value:0{int(match.group(3))}d}"
        return str(value)

    return _TEMPLATE_VAR.sub(substitute, template).replace("$$", "$")


def load_mpd(path: Path) -> Mpd:
    try:
        root = etree.parse(str(path)).getroot()
    except (OSError, etree.XMLSyntaxError) as exc:
        raise MpdError(f"{path}: {exc}") from exc
    if root.tag != f"{_Q}MPD":
        raise MpdError(f"{path}: root element is {root.tag}, not MPD")
    if root.get("type", "static") != "static":
        raise MpdError(f"{path}: type is {root.get('type')}, expected static (video on demand)")
    duration = parse_iso_duration(root.get("mediaPresentationDuration", ""))
    periods = root.findall(f"{_Q}Period")
    if len(periods) != 1:
        raise MpdError(f"{path}: expected one Period, found {len(periods)}")
    sets = []
    for aset in periods[0].findall(f"{_Q}AdaptationSet"):
        reps = [
            _representation(path.parent, aset, rep, duration)
            for rep in aset.findall(f"{_Q}Representation")
        ]
        mime = aset.get("mimeType") or (reps[0].mime_type if reps else "")
        content = aset.get("contentType") or mime.split("/")[0]
        sets.append(AdaptationSet(content, reps))
    return Mpd(path, duration, sets)


def _representation(base: Path, aset, rep, duration: float) -> Representation:
    rep_id = rep.get("id") or ""
    template = rep.find(f"{_Q}SegmentTemplate")
    if template is None:
        template = aset.find(f"{_Q}SegmentTemplate")
    if template is None:
        raise MpdError(f"Representation {rep_id}: no SegmentTemplate")
    bandwidth = int(rep.get("bandwidth") or 0)
    timescale = int(template.get("timescale", "1"))
    number = int(template.get("startNumber", "1"))
    media = template.get("media") or ""
    times = _segment_times(template, duration, timescale)
    segments = [
        Segment(base / expand_template(media, rep_id, number + i, t, bandwidth),
                t / timescale, d / timescale)
        for i, (t, d) in enumerate(times)
    ]
    init = expand_template(template.get("initialization") or "", rep_id, 0, 0, bandwidth)
    mime = rep.get("mimeType") or aset.get("mimeType") or ""
    return Representation(
        id=rep_id,
        codecs=rep.get("codecs") or aset.get("codecs") or "",
        bandwidth=bandwidth,
        mime_type=mime,
        width=int(rep.get("width")) if rep.get("width") else None,
        height=int(rep.get("height")) if rep.get("height") else None,
        init=base / init,
        segments=segments,
    )


def _segment_times(template, duration: float, timescale: int) -> list[tuple[int, int]]:
    """(start, duration) in timescale units for every segment the template addresses."""
    timeline = template.find(f"{_Q}SegmentTimeline")
    if timeline is not None:
        times: list[tuple[int, int]] = []
        t = 0
        for s in timeline.findall(f"{_Q}S"):
            t = int(s.get("t", t))
            d = int(s.get("d"))
            for _ in range(int(s.get("r", "0")) + 1):
                times.append((t, d))
                t += d
        return times
    if template.get("duration"):
        d = int(template.get("duration"))
        total = round(duration * timescale)
        return [(t, min(d, total - t)) for t in range(0, total, d)]
    raise MpdError("SegmentTemplate has neither SegmentTimeline nor duration")


def finish_mpd(path: Path, renames: dict[str, str], codecs: dict[str, str],
               bandwidths: dict[str, int], title: str) -> None:
    """Make ffmpeg's MPD say what players need: meaningful Representation ids (the directories
    were renamed to match), complete codecs strings from the bitstream, bandwidth as the peak
    segment rate, and no bitstreamSwitching claim (rungs have their own parameter sets)."""
    tree = etree.parse(str(path))
    root = tree.getroot()
    for rep in root.iter(f"{_Q}Representation"):
        old_id = rep.get("id")
        if old_id is None:
            raise MpdError(f"{path}: a Representation without an id")
        new_id = renames[old_id]
        rep.set("id", new_id)
        rep.set("bandwidth", str(bandwidths[new_id]))
    _clean_for_players(root, codecs, title)
    tree.write(str(path), xml_declaration=True, encoding="utf-8", pretty_print=True)


def _clean_for_players(root: etree._Element, codecs: dict[str, str], title: str) -> None:
    """What finish_mpd does for a VOD MPD, for ffmpeg's live MPD: a title, no empty
    ServiceDescription, complete codecs strings, no bitstreamSwitching claim."""
    for info in root.findall(f"{_Q}ProgramInformation"):
        info.clear()
        etree.SubElement(info, f"{_Q}Title").text = title
    for empty in root.findall(f"{_Q}ServiceDescription"):
        if len(empty) == 0:
            root.remove(empty)
    for aset in root.iter(f"{_Q}AdaptationSet"):
        if "bitstreamSwitching" in aset.attrib:
            del aset.attrib["bitstreamSwitching"]
    for rep in root.iter(f"{_Q}Representation"):
        rep_id = rep.get("id")
        if rep_id is not None and rep_id in codecs:
            rep.set("codecs", codecs[rep_id])


def _write_atomically(tree: etree._ElementTree, dst: Path) -> None:
    tmp = dst.with_name(f".{dst.name}.tmp")
    tree.write(str(tmp), xml_declaration=True, encoding="utf-8", pretty_print=True)
    tmp.chmod(0o644)
    tmp.replace(dst)


@dataclass(frozen=True)
class LowLatencyTiming:
    """What a low-latency live MPD tells a player of its timing: a segment's first part is
    available `availability_offset_s` before the segment's end (the segment less one part), and
    the ServiceDescription's latency target and catch-up playback rates."""

    availability_offset_s: float
    target_s: float
    min_rate: float
    max_rate: float


def publish_live_mpd(src: Path, dst: Path, codecs: dict[str, str], title: str,
                     update_period: float, low_latency: LowLatencyTiming | None = None) -> None:
    """ffmpeg's dynamic MPD, cleaned for players, published by an atomic rename. ffmpeg asks
    for an update every 500 s (a $Number$ template needs none); a short period makes players
    notice promptly when the stream ends. A low-latency stream's timing is written from
    `low_latency`, whatever the muxer wrote (its rounding, or an ffmpeg that writes less)."""
    tree = etree.parse(str(src))
    root = tree.getroot()
    _clean_for_players(root, codecs, title)
    if root.get("type") == "dynamic":
        root.set("minimumUpdatePeriod", f"PT{update_period:g}S")
        if low_latency is not None:
            _low_latency_timing(root, low_latency)
    _write_atomically(tree, dst)


def _low_latency_timing(root: etree._Element, timing: LowLatencyTiming) -> None:
    for template in root.iter(f"{_Q}SegmentTemplate"):
        template.set("availabilityTimeOffset", f"{timing.availability_offset_s:.3f}")
        template.set("availabilityTimeComplete", "false")
    service = root.find(f"{_Q}ServiceDescription")
    if service is None:
        service = etree.Element(f"{_Q}ServiceDescription", id="0")
        period = root.find(f"{_Q}Period")
        if period is None:
            root.append(service)
        else:
            period.addprevious(service)
    latency = service.find(f"{_Q}Latency")
    if latency is None:
        latency = etree.SubElement(service, f"{_Q}Latency")
    latency.set("target", str(round(timing.target_s * 1000)))
    rate = service.find(f"{_Q}PlaybackRate")
    if rate is None:
        rate = etree.SubElement(service, f"{_Q}PlaybackRate")
    rate.set("min", f"{timing.min_rate:.2f}")
    rate.set("max", f"{timing.max_rate:.2f}")


def end_live_mpd(src: Path, dst: Path, codecs: dict[str, str], title: str,
                 first_number: int, last_number: int) -> None:
    """The MPD of a stream that has ended: static, listing only the segments still on disk
    (first_number..last_number), so it stays playable as a short on-demand presentation.
    ffmpeg's own final MPD would list every segment since the start, most of them deleted."""
    tree = etree.parse(str(src))
    root = tree.getroot()
    _clean_for_players(root, codecs, title)
    for attr in ("minimumUpdatePeriod", "availabilityStartTime", "publishTime",
                 "timeShiftBufferDepth", "suggestedPresentationDelay"):
        if attr in root.attrib:
            del root.attrib[attr]
    root.set("type", "static")
    seconds = 0.0
    for template in root.iter(f"{_Q}SegmentTemplate"):
        timescale = int(template.get("timescale", "1"))
        duration_attr = template.get("duration")
        if duration_attr is None:
            raise MpdError(f"{src}: a SegmentTemplate without a duration")
        duration = int(duration_attr)
        start = int(template.get("startNumber", "1"))
        template.set("startNumber", str(first_number))
        # Segment n's media time is (n - start) * duration; presentation time 0 is mapped
        # to the first segment that is left.
        template.set("presentationTimeOffset", str((first_number - start) * duration))
        seconds = (last_number - first_number + 1) * duration / timescale
    root.set("mediaPresentationDuration", f"PT{seconds:.3f}S")
    for utc in root.findall(f"{_Q}UTCTiming"):
        root.remove(utc)
    _write_atomically(tree, dst)


def availability_start(path: Path) -> datetime | None:
    """A dynamic MPD's availabilityStartTime (segment `startNumber` begins then); None while
    the MPD is not there, or for a static one."""
    try:
        root = etree.parse(str(path)).getroot()
    except (OSError, etree.XMLSyntaxError):
        return None
    text = root.get("availabilityStartTime")
    if text is None:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
