"""The transports: how a trial's client and server speak, one object each, registered by name.

`base.py` is the interface (`Transport`, `Carrier`) and the registry (`TRANSPORTS`,
`get_transport`); `pathpolicy.py` the path policies the transports carry out. Every other
module or package here is a transport plugin: a `Transport` subclass and `register(...)`, with
what only it runs (the hop's programs in hop/, mphttp's proxy in mphttp/). The registry imports
each on its first lookup, so a new transport is one module in this folder and nothing else
names it.
"""
