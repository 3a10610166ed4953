"""QoE: one definition of every figure derived from a session's events.

- metrics: startup delay and its parts, stalls (also after a given time), rebuffer ratio,
  played time, switches, time-weighted bitrate, per-segment download rate, download share.
- scores: standard QoE scores of a session with their inputs (Yin QoE_lin, Clae, Duanmu, Yu)
  and the ITU-T P.1203 mode-0 input.
- stats: mean, sd and Student-t confidence intervals across sessions or trials.

The collector (server/) and the runner (runner/) both call these; docs/qoe.md states them.
"""
