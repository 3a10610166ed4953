//! TCP and MPTCP sockets for the hop's non-QUIC arms (and the gateway's relay to nginx).

use std::io;
use std::net::{IpAddr, SocketAddr};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

fn socket(addr: SocketAddr, mptcp: bool) -> io::Result<Socket> {
    let protocol = if mptcp { Some(Protocol::MPTCP) } else { None };
    Socket::new(Domain::for_address(addr), Type::STREAM, protocol).map_err(|err| {
        if mptcp {
            io::Error::new(
                err.kind(),
                format!("cannot open an MPTCP socket (is net.mptcp.enabled 1?): {err}"),
            )
        } else {
            err
        }
    })
}

/// A listener; an MPTCP one accepts plain TCP too.
pub fn listen(addr: SocketAddr, mptcp: bool) -> io::Result<TcpListener> {
    let s = socket(addr, mptcp)?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())
        .map_err(|err| io::Error::new(err.kind(), format!("cannot listen on {addr}: {err}")))?;
    s.listen(1024)?;
    s.set_nonblocking(true)?;
    TcpListener::from_std(s.into())
}

/// A connection to `addr`, from `local` when given (which, with the topology's source routing,
/// pins it to that address's path).
pub async fn connect(
    addr: SocketAddr,
    local: Option<IpAddr>,
    mptcp: bool,
) -> io::Result<TcpStream> {
    let s = socket(addr, mptcp)?;
    if let Some(ip) = local {
        s.bind(&SocketAddr::new(ip, 0).into())?;
    }
    s.set_nonblocking(true)?;
    let stream = TcpSocket::from_std_stream(s.into())
        .connect(addr)
        .await
        .map_err(|err| io::Error::new(err.kind(), format!("cannot connect to {addr}: {err}")))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// The socket's protocol as the kernel reports it (SO_PROTOCOL): IPPROTO_MPTCP (262) for
    /// an MPTCP socket, IPPROTO_TCP (6) for a plain one.
    fn protocol<S: std::os::fd::AsFd>(socket: &S) -> Protocol {
        socket2::SockRef::from(socket)
            .protocol()
            .unwrap()
            .expect("SO_PROTOCOL")
    }

    #[tokio::test]
    async fn an_mptcp_listener_takes_mptcp_and_plain_tcp() {
        let listener = listen("127.0.0.1:0".parse().unwrap(), true).unwrap();
        assert_eq!(protocol(&listener), Protocol::MPTCP);
        assert_eq!(
            protocol(&listen("127.0.0.1:0".parse().unwrap(), false).unwrap()),
            Protocol::TCP
        );
        let addr = listener.local_addr().unwrap();
        for mptcp in [true, false] {
            let (client, accepted) = tokio::join!(
                connect(addr, Some("127.0.0.1".parse().unwrap()), mptcp),
                listener.accept()
            );
            let (mut client, (mut server, _)) = (client.unwrap(), accepted.unwrap());
            let want = if mptcp {
                Protocol::MPTCP
            } else {
                Protocol::TCP
            };
            assert_eq!(
                protocol(&client),
                want,
                "the client's socket (mptcp: {mptcp})"
            );
            // An MPTCP client's connection is MPTCP at the listener's end too.
            if mptcp {
                assert_eq!(protocol(&server), Protocol::MPTCP, "the accepted socket");
            }
            client.write_all(b"ping").await.unwrap();
            let mut got = [0u8; 4];
            server.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"ping");
        }
    }

    #[tokio::test]
    async fn a_refused_connection_names_the_address() {
        let closed = {
            let l = listen("127.0.0.1:0".parse().unwrap(), false).unwrap();
            l.local_addr().unwrap()
        }; // dropped: nothing listens there now
        let err = connect(closed, None, false)
            .await
            .err()
            .expect("nothing listens");
        assert!(
            err.to_string()
                .contains(&format!("cannot connect to {closed}")),
            "{err}"
        );
        let taken = listen("127.0.0.1:0".parse().unwrap(), false).unwrap();
        let busy = taken.local_addr().unwrap();
        let err = listen(busy, false).err().expect("the port is taken");
        assert!(
            err.to_string()
                .contains(&format!("cannot listen on {busy}")),
            "{err}"
        );
    }
}
