"""A response that grows while it is sent, as the low-latency origin's segment being written:
`python -m tests.chunkedserver --host H --port P` answers every GET with chunked transfer
(no Content-Length), one chunk every `--every` seconds, the sizes of `--sizes` in turn. Each
chunk is a line (`<index> ` then padding, then a newline), so a client reading lines sees each
one as it arrives. The server prints one JSON line per chunk to stdout, flushed: the chunk's
index and the time (time.time()) it was handed to the kernel, to compare with when the client
got it. A line `{"listening": PORT}` comes first.

With `--break-after N` the response stops after N chunks without its last (zero) chunk and the
connection is reset, as the origin breaks a segment that stops growing: the client must see
a broken response, never a complete one."""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def chunk_body(index: int, size: int) -> bytes:
    head = f"{index} ".encode()
    return head + b"x" * max(0, size - len(head) - 1) + b"\n"


def say(record: dict) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def handler(sizes: list[int], chunks: int, every: float,
            break_after: int | None) -> type[BaseHTTPRequestHandler]:
    class Growing(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # As aiohttp and nginx do: a small chunk leaves at once, not after the last ACK.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            for index in range(chunks):
                if index:
                    time.sleep(every)
                body = chunk_body(index, sizes[index % len(sizes)])
                self.wfile.write(f"{len(body):x}\r\n".encode() + body + b"\r\n")
                self.wfile.flush()
                say({"chunk": index, "bytes": len(body), "written": time.time()})
                if break_after is not None and index + 1 >= break_after:
                    # SO_LINGER 0: the close sends a reset, not the end of the stream.
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               struct.pack("ii", 1, 0))
                    self.close_connection = True
                    self.rfile.close()  # the socket closes with its last file
                    self.connection.close()
                    say({"broken": index + 1})
                    return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Growing


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.chunkedserver")
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--chunks", type=int, default=6)
    parser.add_argument("--every", type=float, default=0.5)
    parser.add_argument("--sizes", default="200,100000",
                        help="bytes of each chunk, in turn (comma-separated)")
    parser.add_argument("--break-after", type=int, default=None,
                        help="reset the connection after this many chunks, unfinished")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    server = ThreadingHTTPServer((args.host, args.port), handler(sizes, args.chunks, args.every,
                                                              args.break_after))
    say({"listening": server.server_address[1]})
    server.serve_forever()


if __name__ == "__main__":
    main()
