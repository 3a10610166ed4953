//! Moving bytes both ways between a TCP connection and a QUIC stream (or another TCP
//! connection), each direction as it arrives, each end's close passed on to the other: an end
//! (FIN) as an end, and a break (a reset, or an error on either side) as a break, so that a
//! response cut off mid-way never looks whole at the far end.

use std::io;

use noq::{RecvStream, SendStream, VarInt};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, copy_buf};
use tokio::net::TcpStream;

// Large enough that one read takes what a 100 Mbit/s path delivers in a few milliseconds. A
// read returns what has arrived, however little: a response that grows (a segment sent while it
// is written) is passed on chunk by chunk, not when the buffer fills.
const BUFFER: usize = 256 << 10;

/// The code a stream is reset (and stopped) with when the relay it belongs to broke.
pub const BROKEN: VarInt = VarInt::from_u32(2);

/// Copies `from` into `to` until `from` ends, then closes `to` for writing (a QUIC stream's
/// shutdown is its FIN). What was copied.
async fn one_way(from: impl AsyncRead + Unpin, mut to: impl AsyncWrite + Unpin) -> io::Result<u64> {
    let n = copy_buf(&mut BufReader::with_capacity(BUFFER, from), &mut to).await?;
    to.shutdown().await?;
    Ok(n)
}

/// Until both directions have ended: what the TCP side sent, and what it was sent. When either
/// direction fails (the TCP connection was reset, the stream was reset or its connection lost),
/// the stream is reset and stopped and the TCP connection closed with a reset.
pub async fn tcp_with_stream(
    mut tcp: TcpStream,
    mut send: SendStream,
    mut recv: RecvStream,
) -> io::Result<(u64, u64)> {
    let (rd, wr) = tcp.split();
    let relayed = tokio::try_join!(one_way(rd, &mut send), one_way(&mut recv, wr));
    if relayed.is_err() {
        let _ = send.reset(BROKEN);
        let _ = recv.stop(BROKEN);
        let _ = tcp.set_zero_linger(); // closed on return: a reset
    }
    relayed
}

/// The same between two TCP connections: when either direction fails, both are closed with a
/// reset.
pub async fn tcp_with_tcp(mut a: TcpStream, mut b: TcpStream) -> io::Result<(u64, u64)> {
    let (a_rd, a_wr) = a.split();
    let (b_rd, b_wr) = b.split();
    let relayed = tokio::try_join!(one_way(a_rd, b_wr), one_way(b_rd, a_wr));
    if relayed.is_err() {
        let _ = a.set_zero_linger();
        let _ = b.set_zero_linger();
    }
    relayed
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use noq::rustls::RootCertStore;
    use noq::rustls::pki_types::PrivatePkcs8KeyDer;
    use noq::{ClientConfig, Connection, Endpoint, ServerConfig};
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;
    use tokio::time::timeout;

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

    /// Two QUIC endpoints on loopback, connected: (the client's connection, the server's).
    async fn quic_pair() -> (Connection, Connection) {
        let issued = rcgen::generate_simple_self_signed(vec!["hop".into()]).unwrap();
        let cert = issued.cert.der().clone();
        let key = PrivatePkcs8KeyDer::from(issued.signing_key.serialize_der());
        let config = ServerConfig::with_single_cert(vec![cert.clone()], key.into()).unwrap();
        let server = Endpoint::server(config, "127.0.0.1:0".parse().unwrap()).unwrap();
        let mut roots = RootCertStore::empty();
        roots.add(cert).unwrap();
        let client = Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        client.set_default_client_config(
            ClientConfig::with_root_certificates(Arc::new(roots)).unwrap(),
        );
        let connecting = client.connect(server.local_addr().unwrap(), "hop").unwrap();
        let (to_server, from_client) =
            tokio::join!(connecting, async { server.accept().await.unwrap().await });
        (to_server.unwrap(), from_client.unwrap())
    }

    /// A client and a server (TCP) with the hop between them: one relay between two TCP
    /// connections, or (`quic`) the proxy's relay onto a QUIC stream and the gateway's off it.
    /// (the client's end, the server's end, the QUIC connections to keep open.)
    async fn through_the_hop(quic: bool) -> (TcpStream, TcpStream, Option<(Connection, Connection)>) {
        let (client, proxy_side) = pair().await;
        let (gateway_side, server) = pair().await;
        if !quic {
            tokio::spawn(tcp_with_tcp(proxy_side, gateway_side));
            return (client, server, None);
        }
        let (proxy, gateway) = quic_pair().await;
        let (send, recv) = proxy.open_bi().await.unwrap();
        tokio::spawn(tcp_with_stream(proxy_side, send, recv));
        let accepting = gateway.clone();
        tokio::spawn(async move {
            let (send, recv) = accepting.accept_bi().await.unwrap();
            tcp_with_stream(gateway_side, send, recv).await
        });
        (client, server, Some((proxy, gateway)))
    }

    const REQUEST: &[u8] = b"GET /growing HTTP/1.1\r\nHost: origin\r\n\r\n";

    /// The server has the client's request; it answers with headers and a first chunk.
    async fn request_and_first_chunk(client: &mut TcpStream, server: &mut TcpStream) -> Vec<u8> {
        client.write_all(REQUEST).await.unwrap();
        let mut got = vec![0; REQUEST.len()];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(got, REQUEST);
        let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n";
        server.write_all(head).await.unwrap();
        head.to_vec()
    }

    /// What the client reads within a second: exactly `want`, or the test fails (a relay that
    /// waited for the end of the response would hand over nothing while it grows).
    async fn arrives_now(client: &mut TcpStream, want: &[u8]) {
        let mut got = vec![0; want.len()];
        timeout(Duration::from_secs(1), client.read_exact(&mut got))
            .await
            .expect("a chunk waited in the relay")
            .unwrap();
        assert_eq!(got, want);
    }

    #[tokio::test]
    async fn a_growing_response_is_passed_on_chunk_by_chunk() {
        for quic in [false, true] {
            let (mut client, mut server, _conns) = through_the_hop(quic).await;
            let head = request_and_first_chunk(&mut client, &mut server).await;
            arrives_now(&mut client, &head).await;
            for chunk in [&b"4\r\nmore\r\n"[..], b"4\r\nlast\r\n", b"0\r\n\r\n"] {
                tokio::time::sleep(Duration::from_millis(50)).await;
                server.write_all(chunk).await.unwrap();
                arrives_now(&mut client, chunk).await;
            }
            server.shutdown().await.unwrap();
            let mut rest = Vec::new();
            timeout(Duration::from_secs(2), client.read_to_end(&mut rest))
                .await
                .unwrap()
                .unwrap();
            assert!(rest.is_empty(), "quic: {quic}");
        }
    }

    #[tokio::test]
    async fn a_response_broken_mid_way_reaches_the_client_broken() {
        // The server resets its connection after the first chunk, as the low-latency origin
        // breaks a segment that stopped growing: the client gets the chunk, then a reset, not
        // an end that would make the response look whole (were it not chunked).
        for quic in [false, true] {
            let (mut client, mut server, _conns) = through_the_hop(quic).await;
            let head = request_and_first_chunk(&mut client, &mut server).await;
            arrives_now(&mut client, &head).await;
            server.set_zero_linger().unwrap();
            drop(server);
            let mut rest = Vec::new();
            let ended = timeout(Duration::from_secs(2), client.read_to_end(&mut rest))
                .await
                .expect("the break never reached the client");
            let err = ended.expect_err(&format!("quic: {quic}: the break arrived as an end"));
            assert_eq!(err.kind(), io::ErrorKind::ConnectionReset, "quic: {quic}");
            assert!(rest.is_empty());
        }
    }
}
