"""The low-latency live origin: serves a tree `mpstream live --low-latency` is writing, behind
nginx (which keeps serving every finished file itself): segments while they are written,
LL-HLS playlists made per request and held until the part asked for exists.

`index.py` keeps what the tree holds; `app.py` answers requests from it; `__main__.py` runs it
as a process of its own on a unix socket (server/stack.py starts it beside nginx)."""
