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

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    use super::*;

    /// A connected pair on loopback: (the connecting end, the accepted end).
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (connected, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (connected.unwrap(), accepted.unwrap().0)
    }

    #[tokio::test]
    async fn both_directions_arrive_whole_and_each_close_is_passed_on() {
        let (mut client, hop_a) = pair().await;
        let (hop_b, mut server) = pair().await;
        let relay = tokio::spawn(tcp_with_tcp(hop_a, hop_b));
        let request = b"GET / HTTP/1.1\r\n\r\n".to_vec();
        let response: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();

        client.write_all(&request).await.unwrap();
        client.shutdown().await.unwrap(); // the request is all: the server must see its end
        let mut got_request = Vec::new();
        server.read_to_end(&mut got_request).await.unwrap();
        assert_eq!(got_request, request);

        server.write_all(&response).await.unwrap();
        server.shutdown().await.unwrap();
        let mut got_response = Vec::new();
        client.read_to_end(&mut got_response).await.unwrap();
        assert!(got_response == response, "the response arrived changed");

        let (up, down) = relay.await.unwrap().unwrap();
        assert_eq!((up, down), (request.len() as u64, response.len() as u64));
    }
}
