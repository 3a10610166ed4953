"""Transports in modules of their own, one module each in this folder: a `Transport` subclass
(mpstream/transportbase.py) and `register(TheTransport())`. The registry
(mpstream/transportbase.py's TRANSPORTS) imports every module here on its first lookup, after
the built-in transports of mpstream/transport.py, so a new transport is one file in this folder
and nothing else names it."""
