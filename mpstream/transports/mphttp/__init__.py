"""The `mphttp` transport (transport.py) and its client-only multipath HTTP proxy, the program
it runs on the client host (`python -m mpstream.transports.mphttp`, proxy.py)."""

from mpstream.transports.mphttp.transport import MPHTTP, MultipathHTTPProxy

__all__ = ["MPHTTP", "MultipathHTTPProxy"]
