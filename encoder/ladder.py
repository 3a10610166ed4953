"""Bitrate ladders are data: built-in ones live in encoder/ladders/*.toml, and a user may pass
the path of their own TOML or YAML file with the same fields."""

from __future__ import annotations

import re
import tomllib
from fractions import Fraction
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from mpstream.errors import UserError

LADDER_DIR = Path(__file__).parent / "ladders"
Codec = Literal["avc", "hevc"]
CODECS: tuple[Codec, ...] = ("avc", "hevc")


class Rung(BaseModel):
    """One step of the ladder: a resolution and the mean bitrate both codecs aim for.

    Both codecs share the nominal bitrate so that the network carries the same load whichever
    adaptation set a player picks; the HEVC set then simply looks better.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$", max_length=40)
    width: int = Field(gt=0, le=7680)
    height: int = Field(gt=0, le=4320)
    bitrate_kbps: int = Field(gt=0, le=200_000)
    codecs: tuple[Codec, ...] = CODECS

    @field_validator("width", "height")
    @classmethod
    def _even(cls, value: int) -> int:
        # 4:2:0 chroma needs even dimensions.
        if value % 2:
            raise ValueError("must be even (4:2:0 video)")
        return value

    @field_validator("codecs")
    @classmethod
    def _codecs_unique(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value or len(set(value)) != len(value):
            raise ValueError("must list avc and/or hevc, each once")
        return value

    @property
    def bitrate(self) -> int:
        return self.bitrate_kbps * 1000


class Encoding(BaseModel):
    """How hard the encoders work and how tightly the rate is capped."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    avc_preset: str = Field(default="veryfast", pattern=r"^[a-z]+$")
    hevc_preset: str = Field(default="ultrafast", pattern=r"^[a-z]+$")
    # Capped VBR: the encoder aims at the nominal mean, never exceeds peak_factor × nominal
    # over a window of buffer_seconds (the VBV), so segment sizes stay predictable.
    peak_factor: float = Field(default=1.2, ge=1.0, le=4.0)
    buffer_seconds: float = Field(default=2.0, gt=0, le=20)
    audio_bitrate_kbps: int = Field(default=128, ge=16, le=512)


class Ladder(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    encoding: Encoding = Encoding()
    rungs: tuple[Rung, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> Ladder:
        names = [r.name for r in self.rungs]
        if len(set(names)) != len(names):
            raise ValueError(f"rung names must be unique, got {names}")
        shapes = {Fraction(r.width, r.height) for r in self.rungs}
        if len(shapes) > 1:
            raise ValueError(
                "all rungs must have the same aspect ratio (a DASH adaptation set cannot mix"
                f" them), got {sorted(f'{r.width}x{r.height}' for r in self.rungs)}"
            )
        for codec in CODECS:
            if not any(codec in r.codecs for r in self.rungs):
                raise ValueError(f"at least one rung must use {codec} (the MPD needs both sets)")
        return self

    def rungs_for(self, codec: str) -> list[Rung]:
        return [r for r in self.rungs if codec in r.codecs]

    @property
    def top(self) -> Rung:
        return max(self.rungs, key=lambda r: r.width * r.height)


def builtin_ladders() -> list[str]:
    return sorted(p.stem for p in LADDER_DIR.glob("*.toml"))


def load_ladder(name_or_path: str | Path) -> Ladder:
    """A built-in ladder by name, or a ladder file (.toml, .yaml, .yml) by path."""
    text = str(name_or_path)
    path = Path(text)
    if re.fullmatch(r"[A-Za-z0-9_-]+", text) and not path.is_file():
        path = LADDER_DIR / f"{text}.toml"
        if not path.is_file():
            raise UserError(
                f"Unknown ladder '{text}'. Built-in ladders are {', '.join(builtin_ladders())};"
                " or pass the path of a ladder file (.toml or .yaml, see encoder/ladders/)."
            )
    if not path.is_file():
        raise UserError(
            f"Ladder file {path} does not exist. Pass one of {', '.join(builtin_ladders())}"
            " or the path of a .toml/.yaml ladder file."
        )
    return parse_ladder(path.read_text(errors="replace"), path)


def parse_ladder(text: str, path: Path) -> Ladder:
    try:
        data = yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else tomllib.loads(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        kind = "YAML" if path.suffix in (".yaml", ".yml") else "TOML"
        raise UserError(
            f"Ladder file {path} is not valid {kind}: {exc}. Fix the syntax"
            " (see encoder/ladders/standard.toml for a working example)."
        ) from exc
    if not isinstance(data, dict):
        raise UserError(f"Ladder file {path} must be a table with `name` and `rungs`.")
    data.setdefault("name", path.stem)
    try:
        return Ladder.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'ladder'}: {err['msg']}"
            for err in exc.errors()
        )
        raise UserError(
            f"Ladder file {path} is malformed: {problems}. Each [[rungs]] entry needs name,"
            " width, height (even) and bitrate_kbps; see encoder/ladders/standard.toml."
        ) from exc
