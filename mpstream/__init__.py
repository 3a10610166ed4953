"""mpstream: HLS/DASH video delivery over Multipath TCP, measured."""

__version__ = "0.1.0"
