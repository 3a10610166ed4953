"""Transports in modules of their own, one module each in this folder: a `Transport` subclass
(mpstream/transportbase.py) and `register(TheTransport())`. mpstream/transport.py imports every
module here after its built-in transports, so a new transport is one file in this folder and
nothing else names it."""
