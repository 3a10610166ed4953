"""`--codec auto|avc|hevc`: which video codec family a session plays, and the refusal of one the
browser cannot decode, before any session (or trial) starts.

The page filters the manifest itself (dash.js: a custom capabilities filter keeps only the
family's video representations; hls.js: levels of other families are removed) and fails with a
clear record if the family cannot play. This module asks the same question earlier, from the
media tree and a throwaway page of the same browser: `MediaSource.isTypeSupported` for the exact
codec strings the player would be given.
"""

from __future__ import annotations

import json
from pathlib import Path

from mpstream.errors import UserError

CODECS = ("auto", "avc", "hevc")
FAMILIES = {"avc1": "avc", "avc3": "avc", "hvc1": "hevc", "hev1": "hevc"}


def family(codecs: str | None) -> str | None:
    """The video codec family (avc, hevc) of an RFC 6381 codecs string; None for audio/other."""
    return FAMILIES.get(str(codecs or "").split(".")[0].lower())


def content_types(media: Path, player: str, codec: str) -> list[str]:
    """`video/mp4; codecs="…"` of every rendition of `codec`'s family `player` would play from
    the media tree (dash.js: the MPD; hls.js: the HLS renditions, transmuxed to fMP4)."""
    types: list[str] = []
    if player == "dashjs":
        from mpstream.manifests.dash import MpdError, load_mpd

        try:
            mpd = load_mpd(media / "dash" / "manifest.mpd")
        except (MpdError, OSError) as exc:
            raise UserError(f"{media}/dash/manifest.mpd cannot be read: {exc}") from None
        for aset in mpd.adaptation_sets:
            for rep in aset.representations:
                if family(rep.codecs) == codec:
                    types.append(f'{rep.mime_type}; codecs="{rep.codecs}"')
    else:
        from mpstream.manifests.presentation import read_media_record

        record = read_media_record(media)
        for rung in record.rungs:
            # The HLS tree is MPEG-TS with the rungs that have an AVC encode.
            avc = rung.codecs.get("avc")
            if rung.hls_playlist and avc and family(avc) == codec:
                types.append(f'video/mp4; codecs="{avc}"')
    return sorted(set(types))


def probe_support(browser: str, types: list[str]) -> dict[str, bool]:
    """What a blank page of headless `browser` says of each type (MediaSource.isTypeSupported)."""
    from mpstream.player.browsers import open_page

    with open_page(browser, None) as page:
        page.goto("about:blank", 30)
        return page.evaluate(
            f"Object.fromEntries({json.dumps(types)}.map((t) => "
            "[t, typeof MediaSource !== 'undefined' && MediaSource.isTypeSupported(t)]))")


def check_codec(browser: str, codec: str, media: Path, player: str) -> dict[str, bool]:
    """Refuses (UserError) a codec family the media lacks or the browser cannot decode; returns
    what the browser said of each of the family's types ({} for auto)."""
    if codec not in CODECS:
        raise UserError(f"codec {codec!r}: choose one of {', '.join(CODECS)}")
    if codec == "auto":
        return {}
    types = content_types(media, player, codec)
    if not types:
        where = "HLS renditions (MPEG-TS, AVC only)" if player == "hlsjs" else "MPD"
        hint = " (HEVC plays with --player dashjs)" if player == "hlsjs" else \
            " (encode with a ladder whose rungs list it in `codecs`)"
        raise UserError(f"--codec {codec}: the media in {media} has no {codec} rendition in its "
                        f"{where}{hint}")
    support = probe_support(browser, types)
    if not any(support.values()):
        hint = "; Firefox decodes HEVC here: --browser firefox" if codec == "hevc" else ""
        raise UserError(f"--codec {codec}: {browser} cannot decode {', '.join(types)} "
                        f"(MediaSource.isTypeSupported is false){hint}; or use --codec auto")
    return support
