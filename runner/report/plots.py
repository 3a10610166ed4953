"""The report's PNG figures (matplotlib, headless Agg backend)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display here; must precede pyplot
import matplotlib.pyplot as plt
import numpy as np

from mpstream.qoe.metrics import CATCHUP_RATE_OFF
from mpstream.qoe.stats import Summary, summarize

DPI = 110


def _save(fig, path: Path, *, tight: bool = True) -> Path:
    # tight_layout draws the whole figure once more to measure its labels: a figure of fixed
    # layout sets its margins itself and passes tight=False.
    if tight:
        fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _legend(ax, **where) -> None:
    # A condition whose trials all failed has an empty panel: no legend to draw.
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, **({"loc": "upper right"} | where))


def segment_rates(path: Path, groups: list[str], seg: dict[str, dict[int, list[float]]]) -> Path:
    """Per-segment download rate by segment index, mean over trials with its 95% CI band
    (as the thesis's figure 22)."""
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for g in groups:
        by_idx = seg.get(g)
        if not by_idx:
            continue
        idx = sorted(by_idx)
        sums = [summarize(by_idx[i]) for i in idx]
        mean = np.array([s.mean for s in sums])
        ax.plot(idx, mean, marker="o", ms=3, label=g)
        lo = np.array([s.ci_low if not math.isnan(s.ci_low) else s.mean for s in sums])
        hi = np.array([s.ci_high if not math.isnan(s.ci_high) else s.mean for s in sums])
        ax.fill_between(idx, lo, hi, alpha=0.2)
    ax.set_xlabel("segment index")
    ax.set_ylabel("download rate (Mbit/s)")
    ax.set_title("Per-segment download rate (mean over trials, 95% CI)")
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def _mean_series(trials: list[dict[int, dict[int, float]]], p: int) -> tuple[list[int], list]:
    """Mean over trials of a per-second series of path p; a trial with no entry in a second
    counts as zero there (it was sampled but nothing happened)."""
    bins = sorted({b for t in trials for b in t.get(p, {})})
    if not bins:
        return [], []
    xs = list(range(bins[0], bins[-1] + 1))
    return xs, [sum(t.get(p, {}).get(b, 0.0) for t in trials) / len(trials) for b in xs]


def per_path_over_time(path: Path, groups: list[str], series: dict[str, list[dict]],
                       n_paths: int, *, ylabel: str, title: str) -> Path:
    """One panel per condition, one line per path (as the thesis's figure 21)."""
    fig, axes = plt.subplots(len(groups), 1, figsize=(9, 2.4 * len(groups)), sharex=True,
                             squeeze=False)
    for ax, g in zip(axes[:, 0], groups, strict=True):
        trials = series.get(g, [])
        for p in range(n_paths):
            xs, ys = _mean_series(trials, p) if trials else ([], [])
            if xs:
                ax.plot(xs, ys, label=f"path {p}")
        if not ax.lines:
            ax.text(0.5, 0.5, "none in any trial" if trials else "no successful trial",
                    transform=ax.transAxes, ha="center", va="center", color="0.4")
        ax.set_title(g, fontsize=10)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.grid(alpha=0.3)
        _legend(ax)
    axes[-1, 0].set_xlabel("time since trial start (s)")
    fig.suptitle(title)
    return _save(fig, path)


def path_share(path: Path, groups: list[str], series: dict[str, list[dict]], n_paths: int) -> Path:
    """Share of received bytes per path over time: bytes of every trial pooled per second."""
    fig, axes = plt.subplots(len(groups), 1, figsize=(9, 2.2 * len(groups)), sharex=True,
                             squeeze=False)
    for ax, g in zip(axes[:, 0], groups, strict=True):
        trials = series.get(g, [])
        bins = sorted({b for t in trials for p in t for b in t[p]})
        if bins:
            xs = list(range(bins[0], bins[-1] + 1))
            per_path = np.array([[sum(t.get(p, {}).get(b, 0.0) for t in trials) for b in xs]
                                 for p in range(n_paths)])
            total = per_path.sum(axis=0)
            # Seconds with next to no traffic (beacons after the video is buffered) would show
            # as 0/100% spikes: they are left blank like idle seconds.
            busy = total > 0.02 * total.max()
            share = np.divide(per_path, total, out=np.zeros_like(per_path), where=busy)
            ax.stackplot(xs, share, labels=[f"path {p}" for p in range(n_paths)], alpha=0.8)
        ax.set_ylim(0, 1)
        ax.set_title(g, fontsize=10)
        ax.set_ylabel("share of bytes", fontsize=8)
        _legend(ax)
    axes[-1, 0].set_xlabel("time since trial start (s)")
    fig.suptitle("Share of received bytes per path")
    return _save(fig, path)


def metric_bars(path: Path, groups: list[str], summaries: dict, metrics: list[str],
                label: Callable[[str], tuple[str, str]]) -> Path:
    """Mean per condition with 95% CI error bars, one panel per metric."""
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 3.6), squeeze=False)
    for ax, m in zip(axes[0], metrics, strict=True):
        sums = [summaries[g][m] for g in groups]
        means = [0.0 if math.isnan(s.mean) else s.mean for s in sums]
        err = [0.0 if math.isnan(s.half_width) else s.half_width for s in sums]
        ax.bar(range(len(groups)), means, yerr=err, capsize=4, color="C0")
        ax.set_xticks(range(len(groups)), groups, rotation=30, ha="right", fontsize=8)
        name, unit = label(m)
        ax.set_title(f"{name}" + (f" ({unit})" if unit else ""), fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def _latency_axis(fig, ax, samples: list[tuple[float, float, float]]) -> None:
    """A live session's latency to live on `ax`'s right axis, its samples marked where the
    player caught up (played faster) or fell back (slower)."""
    behind = ax.twinx()
    behind.plot([t for t, _, _ in samples], [v for _, v, _ in samples], "-", lw=1.2,
                color="tab:purple", label="latency to live")
    for faster, color, what in ((True, "tab:red", "catching up (rate > 1)"),
                                (False, "tab:blue", "falling back (rate < 1)")):
        marked = [(t, v) for t, v, rate in samples if abs(rate - 1) > CATCHUP_RATE_OFF
                  and (rate > 1) == faster]
        if marked:
            behind.plot(*zip(*marked, strict=True), linestyle="none", marker=".", ms=4,
                        color=color, label=what)
    if any(abs(rate - 1) > CATCHUP_RATE_OFF for _, _, rate in samples):
        behind.legend(fontsize=7, loc="upper left")
    behind.set_ylabel("latency to live (s)", color="tab:purple")
    behind.set_ylim(bottom=0)
    fig.subplots_adjust(right=0.93)  # room for the right axis' label


def subflow_timeline(path: Path, title: str, series: dict[int, dict[str, list]],
                     segments: list[dict], n_paths: int,
                     unread: dict[float, float] | None = None,
                     held: list[tuple[float, float]] | None = None,
                     toggles: list[tuple[float, str]] | None = None,
                     live_latency: list[tuple[float, float, float]] | None = None) -> Path:
    """Three panels over the trial clock: bytes in flight (KB) and cwnd (packets) per path, and
    bytes held at the sender unsent (KB, notsent) per path beside the bytes the client held
    unread (KB, all its connections), with each segment's request (dashed) and last byte (solid)
    as vertical lines, and shaded the (poll time, interval) spans in `held`: the sender held
    data back with nothing in flight; `toggles`: the path policy's (time, what) changes of a
    metered path, as labelled green lines; `live_latency`: a live session's (time, latency to
    live, playback rate) samples, on the bottom panel's right axis, marked where it caught up."""
    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    # Fixed margins (one of these is drawn for every trial, and tight_layout's extra draw was
    # a third of each): room for the y labels' ticks of up to five digits and the x label.
    fig.subplots_adjust(left=0.085, right=0.985, top=0.96, bottom=0.065, hspace=0.1)
    for p in range(n_paths):
        s = series.get(p)
        if not s:
            continue
        order = np.argsort(s["t"])
        t = np.array(s["t"])[order]
        top.plot(t, np.array(s["inflight"])[order], ".", ms=2, label=f"path {p}")
        middle.plot(t, np.array(s["cwnd"])[order], ".", ms=2, label=f"path {p}")
        bottom.plot(t, np.array(s["notsent"])[order], ".", ms=2,
                    label=f"path {p}: held unsent at the server")
    if unread:
        bottom.plot(list(unread), list(unread.values()), "-", color="k", lw=0.8,
                    label="unread at the client")
    for n, (t_end, dt) in enumerate(held or []):
        for ax in (top, middle, bottom):
            ax.axvspan(t_end - dt, t_end, color="tab:red", alpha=0.25, lw=0,
                       label="sender held data, nothing in flight" if n == 0 and ax is top
                       else None)
    for seg in segments:
        for ax in (top, middle, bottom):
            if seg.get("request_page_s") is not None:
                ax.axvline(seg["request_page_s"], color="0.6", ls="--", lw=0.6)
            if seg.get("last_byte_s") is not None:
                ax.axvline(seg["last_byte_s"], color="0.3", lw=0.6)
    for at, what in toggles or []:
        for ax in (top, middle, bottom):
            ax.axvline(at, color="tab:green", lw=1.2)
        top.annotate(what, (at, 1), xycoords=("data", "axes fraction"), rotation=90,
                     fontsize=6, va="top", ha="right", color="tab:green")
    if live_latency:
        _latency_axis(fig, bottom, live_latency)
    top.set_ylabel("bytes in flight (KB)")
    middle.set_ylabel("cwnd (packets)")
    bottom.set_ylabel("held (KB)")
    bottom.set_xlabel("trial time (s); dashed: segment requested, solid: its last byte")
    top.set_title(title)
    _legend(top)
    _legend(bottom)
    return _save(fig, path, tight=False)


def sweep_lines(path: Path, x_name: str, points: dict[str, dict[str, dict[float, Summary]]],
                metric_names: list[tuple[str, str]], x_tick: Callable[[float], str]) -> Path:
    """A swept numeric setting (e.g. the bottleneck buffer) on the x axis, one line per value
    of the other settings (e.g. the congestion control), the mean with its 95% CI as error
    bars; one panel per metric (as the MPCC study's throughput and RTT against the buffer).
    `points`: metric -> line -> x -> Summary; `metric_names`: (metric, title) in panel order."""
    fig, axes = plt.subplots(1, len(metric_names), figsize=(4.2 * len(metric_names), 3.8),
                             squeeze=False)
    xs_all: set[float] = set()
    for ax, (metric, title) in zip(axes[0], metric_names, strict=True):
        for i, (line, by_x) in enumerate(points[metric].items()):
            xs = sorted(x for x, s in by_x.items() if not math.isnan(s.mean))
            xs_all.update(xs)
            means = [by_x[x].mean for x in xs]
            err = [0.0 if math.isnan(by_x[x].half_width) else by_x[x].half_width for x in xs]
            ax.errorbar(xs, means, yerr=err, marker="o", ms=4, capsize=3, label=line,
                        color=f"C{i % 10}")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(x_name, fontsize=8)
        ax.grid(alpha=0.3)
    for ax in axes[0]:
        ticks = sorted(xs_all)
        # Upright labels: swept values can sit close (375k beside 400k) and slanted ones overlap.
        ax.set_xticks(ticks, [x_tick(x) for x in ticks], fontsize=7, rotation=90)
    # The legend goes beside the last panel, not on one: the lines span the whole height.
    _legend(axes[0][-1], loc="center left", bbox_to_anchor=(1.02, 0.5))
    return _save(fig, path)


def capacity_and_delay(path: Path, title: str, links: dict[str, list[dict]]) -> Path:
    """The Alfalfa figure (Winstein et al., NSDI'13, figures 1 and 6) per emulated link, in its
    data direction: above, the link's capacity and the throughput it carried per 100 ms window
    (Mbit/s); below, the per-packet queueing delay (p95 per window, and its max), log scale.
    `links`: label -> the emulator's windows (netem/linkem/qdelay.h), in time order."""
    fig, axes = plt.subplots(2, len(links), figsize=(6 * len(links), 5.5), sharex="col",
                             squeeze=False)
    for col, (label, windows) in enumerate(links.items()):
        top, bottom = axes[0][col], axes[1][col]
        t0 = windows[0]["t"] if windows else 0.0
        t = [w["t"] - t0 for w in windows]
        top.fill_between(t, [w["capacity_bytes"] * 8 / w["dt_s"] / 1e6 for w in windows],
                         step="post", color="0.85", label="capacity")
        top.step(t, [w["bytes"] * 8 / w["dt_s"] / 1e6 for w in windows], where="post",
                 color="tab:blue", lw=0.8, label="throughput")
        top.set_ylabel("Mbit/s")
        top.set_title(f"{title}: {label}", fontsize=9)
        busy = [(x, w) for x, w in zip(t, windows, strict=True) if w.get("p95_ms") is not None]
        bottom.plot([x for x, _ in busy], [w["p95_ms"] for _, w in busy], ".", ms=2,
                    color="tab:red", label="p95 per 100 ms")
        bottom.plot([x for x, _ in busy], [w["max_ms"] for _, w in busy], ".", ms=1,
                    color="0.5", label="max per 100 ms")
        if busy:
            bottom.set_yscale("log")
        bottom.set_ylabel("queueing delay (ms)")
        bottom.set_xlabel("time (s)")
        _legend(top)
        _legend(bottom)
    return _save(fig, path)


def trial_phases(path: Path, keys: list[str], phases: list[dict[str, float]]) -> Path:
    """Each trial's time, a bar a trial split into its phases in order, playback hatched: what
    is not playback is the trial's overhead."""
    import matplotlib.pyplot as plt

    from mpstream.phases import ORDER

    found = {name for p in phases for name in p}
    names = [n for n in ORDER if n in found] + sorted(found - set(ORDER))
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(keys) + 1.5))
    left = [0.0] * len(keys)
    for name in names:
        widths = [p.get(name, 0.0) for p in phases]
        ax.barh(keys, widths, left=left, label=name,
                hatch="//" if name == "playback" else None,
                alpha=0.4 if name == "playback" else 0.9)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_xlabel("seconds")
    ax.set_title("Where each trial's time went")
    ax.invert_yaxis()
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, path)


def per_pair(path: Path, groups: list[str], pairs: dict[str, dict[str, dict[str, float]]],
             metrics: list[tuple[str, str]]) -> Path:
    """A run over trace pairs, pair by pair: one panel a metric (name, axis label), a marker a
    group at each pair, the pairs in their names' order (p01, p02, ...), so that a pair whose
    figures stand out shows which one to run again alone (`mpstream run --pair`)."""
    names = sorted({p for by_metric in pairs.values() for m, _ in metrics
                    for p in by_metric.get(m, {})})
    width = max(9.0, 0.42 * len(names))
    fig, axes = plt.subplots(len(metrics), 1, figsize=(width, 2.8 * len(metrics)), sharex=True,
                             squeeze=False)
    x = {p: i for i, p in enumerate(names)}
    for ax, (metric, ylabel) in zip(axes[:, 0], metrics, strict=True):
        for k, g in enumerate(groups):
            values = pairs.get(g, {}).get(metric, {})
            ax.plot([x[p] for p in sorted(values)], [values[p] for p in sorted(values)],
                    linestyle="none", marker="os^vDP*X"[k % 8], ms=5, alpha=0.8, label=g)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=7)
    axes[0, 0].set_title("Each trace pair, each condition (the mean over its rounds)")
    _legend(axes[0, 0])
    return _save(fig, path)
