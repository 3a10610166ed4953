//! Moving bytes both ways between a TCP connection and a QUIC stream (or another TCP
//! connection), each direction as it arrives, each end's close passed on to the other.

use std::io;

use noq::{RecvStream, SendStream};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, copy_buf};
use tokio::net::TcpStream;

// Large enough that one read takes what a 100 Mbit/s path delivers in a few milliseconds.
const BUFFER: usize = 256 << 10;

/// Copies `from` into `to` until `from` ends, then closes `to` for writing (a QUIC stream's
/// shutdown is its FIN). What was copied.
async fn one_way(from: impl AsyncRead + Unpin, mut to: impl AsyncWrite + Unpin) -> io::Result<u64> {
    let n = copy_buf(&mut BufReader::with_capacity(BUFFER, from), &mut to).await?;
    to.shutdown().await?;
    Ok(n)
}

/// Until both directions have ended: what the TCP side sent, and what it was sent.
pub async fn tcp_with_stream(
    tcp: TcpStream,
    send: SendStream,
    recv: RecvStream,
) -> io::Result<(u64, u64)> {
    let (rd, wr) = tcp.into_split();
    tokio::try_join!(one_way(rd, send), one_way(recv, wr))
}

/// The same between two TCP connections.
pub async fn tcp_with_tcp(a: TcpStream, b: TcpStream) -> io::Result<(u64, u64)> {
    let (a_rd, a_wr) = a.into_split();
    let (b_rd, b_wr) = b.into_split();
    tokio::try_join!(one_way(a_rd, b_wr), one_way(b_rd, a_wr))
}
