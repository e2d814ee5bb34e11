//! The HTTPS accept loop shared by the webhook server and the manager's
//! secure `/metrics`: TLS handshakes (bounded), HTTP/1.1 per connection,
//! and a bounded drain of the requests in flight at shutdown.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

/// How long a client gets to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long requests in flight get at shutdown.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause after a failed `accept` (out of file descriptors, ...).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Accepts connections on `listener` and answers them with `router` over
/// TLS until `stop` is cancelled; then closes the listener and lets the
/// requests in flight finish (for up to 5 s). `server` names the server in
/// logs (`"webhook"`, `"metrics"`).
pub(crate) async fn serve(
    server: &'static str,
    listener: TcpListener,
    acceptor: TlsAcceptor,
    router: Router,
    stop: CancellationToken,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => {
                    connections.spawn(connection(
                        server,
                        acceptor.clone(),
                        tcp,
                        peer,
                        router.clone(),
                        stop.clone(),
                    ));
                }
                Err(error) => {
                    tracing::warn!(server, %error, "accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
        }
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, async {
        while connections.join_next().await.is_some() {}
    })
    .await
    .is_err()
    {
        tracing::warn!(server, "abandoning requests still in flight");
        connections.abort_all();
    }
}

/// One client connection: TLS, then HTTP/1.1 until it closes or the server
/// stops.
async fn connection(
    server: &'static str,
    acceptor: TlsAcceptor,
    tcp: TcpStream,
    peer: SocketAddr,
    router: Router,
    stop: CancellationToken,
) {
    let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => {
            tracing::debug!(server, %peer, %error, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(server, %peer, "TLS handshake timed out");
            return;
        }
    };
    let service = TowerToHyperService::new(router);
    let connection =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(server, %peer, %error, "connection ended with an error");
            }
        }
        () = stop.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}
