"""The media a video scenario plays: an existing tree, or one encoded once and cached.

Encoded trees are cached under media/cache/<hash of the encoding request>/, so a second run of
the same scenario (or a resumed one) does not encode again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from mpstream.errors import UserError
from mpstream.paths import MEDIA_CACHE
from mpstream.runner.scenario import MediaSpec

CACHE_DIR = MEDIA_CACHE


def _ladder_ref(ladder: str, base_dir: Path) -> str:
    local = base_dir / ladder
    return str(local.resolve()) if local.is_file() else ladder


def cache_key(spec: MediaSpec, base_dir: Path) -> str:
    ladder = _ladder_ref(spec.ladder, base_dir)
    ladder_text = Path(ladder).read_text() if Path(ladder).is_file() else ladder
    request = {
        "source": spec.source,
        "ladder": ladder_text,
        "segment_duration": spec.segment_duration,
        "duration": spec.duration,
    }
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()[:16]


def existing_tree(spec: MediaSpec, base_dir: Path) -> Path | None:
    """The media tree `dir` names (None: the spec encodes one); UserError when it is none."""
    if spec.dir is None:
        return None
    media = spec.dir if spec.dir.is_absolute() else (base_dir / spec.dir)
    if not (media / "media.json").is_file():
        raise UserError(f"media.dir {media} is not a media tree (no media.json); make one "
                        "with `mpstream encode` or give media.source instead")
    return media.resolve()


def prepare_media(spec: MediaSpec, base_dir: Path, *, progress: bool = True,
                  cache_dir: Path = CACHE_DIR) -> Path:
    tree = existing_tree(spec, base_dir)
    if tree is not None:
        return tree
    out = cache_dir / cache_key(spec, base_dir)
    if (out / "media.json").is_file():
        return out
    from mpstream.encoder.pipeline import encode_media

    assert spec.source is not None  # MediaSpec's validator: no dir means a source
    encode_media(
        spec.source,
        _ladder_ref(spec.ladder, base_dir),
        spec.segment_duration,
        spec.duration,
        out,
        progress=progress,
    )
    return out
