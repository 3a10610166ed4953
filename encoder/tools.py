"""Finding ffmpeg and ffprobe and checking that this ffmpeg has the encoders we need."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from mpstream.errors import UserError

REQUIRED_ENCODERS = {
    "libx264": "H.264 video (HLS and the DASH AVC set)",
    "libx265": "HEVC video (the DASH HEVC set)",
    "aac": "AAC audio",
}
_INSTALL_HINT = (
    "Install Debian's ffmpeg package (`apt-get install ffmpeg`, or `make setup`), which is built"
    " with libx264 and libx265."
)


@dataclass(frozen=True)
class Tools:
    ffmpeg: str
    ffprobe: str


def require_tools() -> Tools:
    """The ffmpeg and ffprobe on PATH, after checking they can encode every codec we write."""
    ffmpeg, ffprobe = shutil.which("ffmpeg"), shutil.which("ffprobe")
    if ffmpeg is None or ffprobe is None:
        missing = [name for name, path in (("ffmpeg", ffmpeg), ("ffprobe", ffprobe))
                   if path is None]
        raise UserError(f"{' and '.join(missing)} not found on PATH. {_INSTALL_HINT}")
    tools = Tools(ffmpeg=ffmpeg, ffprobe=ffprobe)
    encoders = _encoders(tools.ffmpeg)
    lacking = [f"{name} ({why})" for name, why in REQUIRED_ENCODERS.items() if name not in encoders]
    if lacking:
        raise UserError(
            f"{tools.ffmpeg} lacks the encoder(s) {', '.join(lacking)}. {_INSTALL_HINT}"
        )
    return tools


def _encoders(ffmpeg: str) -> set[str]:
    try:
        listing = subprocess.run(
            [ffmpeg, "-hide_banner", "-encoders"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise UserError(f"Could not run {ffmpeg} -encoders ({exc}). {_INSTALL_HINT}") from exc
    names = set()
    for line in listing.splitlines():
        fields = line.split()
        # Encoder lines look like " V....D libx264   libx264 H.264 / AVC ..."
        if len(fields) >= 2 and len(fields[0]) == 6 and fields[0][0] in "VAS":
            names.add(fields[1])
    return names
