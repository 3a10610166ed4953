"""Running ffmpeg: a rich progress bar fed by `-progress`, and a clean stop on errors and
Ctrl-C (the child never outlives us)."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

from mpstream.errors import UserError
from mpstream.proc import stop


class FfmpegFailed(UserError):
    """ffmpeg exited non-zero; the message carries the tail of its error output."""


def run_ffmpeg(
    argv: list[str],
    *,
    label: str,
    total_seconds: float,
    show: bool = True,
    console: Console | None = None,
    on_progress: Callable[[dict[str, str]], None] | None = None,
) -> None:
    """Run one ffmpeg command, showing how far through `total_seconds` of output it is."""
    argv = [*argv[:1], "-progress", "pipe:1", "-nostats", *argv[1:]]
    with tempfile.TemporaryFile() as stderr, _bar(show, console) as progress:
        task = progress.add_task(label, total=max(total_seconds, 1e-3), speed="")
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, text=True)
        try:
            report: dict[str, str] = {}
            assert proc.stdout is not None
            for line in proc.stdout:
                key, _, value = line.strip().partition("=")
                report[key] = value
                if key != "progress":
                    continue
                # One report block ends with progress=continue|end.
                seconds = _seconds(report.get("out_time_us"))
                progress.update(task, completed=min(seconds, total_seconds),
                                speed=report.get("speed", "").strip())
                if on_progress:
                    on_progress(dict(report))
            returncode = proc.wait()
        except BaseException:
            # Ctrl-C or an error while reading: stop ffmpeg before anything else happens.
            stop(proc, timeout=10)
            raise
        if returncode == 0:
            progress.update(task, completed=total_seconds)
            return
    raise FfmpegFailed(
        f"ffmpeg failed while {label.lower()} (exit {returncode}):"
        f" {stderr_tail(stderr)}."
        " Check that the source plays (`ffplay SOURCE`) and that the disk has space."
    )


def stderr_tail(stderr, lines: int = 6) -> str:
    """The last lines ffmpeg wrote to `stderr` (a binary temp file), on one line."""
    stderr.seek(0)
    tail = stderr.read().decode(errors="replace").strip().splitlines()[-lines:]
    return " | ".join(tail) or "no message"


def _seconds(out_time_us: str | None) -> float:
    try:
        return max(0.0, int(out_time_us or 0) / 1e6)
    except ValueError:  # "N/A" before the first frame
        return 0.0


def _bar(show: bool, console: Console | None) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[speed]}"),
        TimeRemainingColumn(),
        console=console or Console(stderr=True),
        disable=not show,
        transient=False,
    )
