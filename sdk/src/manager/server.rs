//! The HTTP servers: `/metrics`, and `/healthz` + `/readyz` (one server
//! when both are bound to the same address).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, RawQuery};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::error::ManagerError;
use super::health::Checks;
use super::scrape::scrape;
use super::secure_metrics::Secured;
use crate::metrics::Metrics;

/// What a server serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Serves {
    Metrics,
    Probes,
    Both,
}

impl Serves {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Self::Metrics => "metrics",
            Self::Probes => "health probe",
            Self::Both => "metrics and health probe",
        }
    }
}

/// A bound, not yet serving, listener.
#[derive(Debug)]
pub(crate) struct Bound {
    pub(crate) serves: Serves,
    pub(crate) listener: TcpListener,
    /// HTTPS with authentication and authorization (metrics only).
    pub(crate) secure: Option<Secured>,
}

impl Bound {
    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }
}

/// Parses an address the way controller-runtime's flags do: `"0"` (or
/// empty) turns the server off, `":8080"` means every interface.
pub(crate) fn parse_address(address: &str) -> Option<String> {
    let address = address.trim();
    if address.is_empty() || address == "0" {
        return None;
    }
    Some(match address.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => address.to_owned(),
    })
}

/// Binds `address` for `serves`.
pub(crate) async fn bind(serves: Serves, address: &str) -> Result<Bound, ManagerError> {
    let listener = TcpListener::bind(address)
        .await
        .map_err(|source| ManagerError::Bind {
            server: serves.describe(),
            address: address.to_owned(),
            source,
        })?;
    Ok(Bound {
        serves,
        listener,
        secure: None,
    })
}

/// Everything the endpoints answer from.
#[derive(Debug, Clone)]
pub(crate) struct Endpoints {
    pub(crate) metrics: Metrics,
    pub(crate) healthz: Arc<Checks>,
    pub(crate) readyz: Arc<Checks>,
}

/// Serves `bound` until `stop` is cancelled (then finishes the requests in
/// flight).
pub(crate) async fn serve(
    bound: Bound,
    endpoints: Endpoints,
    stop: CancellationToken,
) -> Result<(), ManagerError> {
    let serves = bound.serves;
    let addr = bound.local_addr();
    let https = bound.secure.is_some();
    match addr {
        Some(addr) => tracing::info!(server = serves.describe(), address = %addr, https, "serving"),
        None => tracing::info!(
            server = serves.describe(),
            https,
            "serving (address unknown)"
        ),
    }
    #[cfg(feature = "secure-metrics")]
    if let Some(secure) = bound.secure {
        secure.serve(bound.listener, endpoints.metrics, stop).await;
        return Ok(());
    }
    let router = router(serves, endpoints);
    axum::serve(bound.listener, router)
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
        .map_err(|source| ManagerError::Serve {
            server: serves.describe(),
            source,
        })
}

pub(crate) fn router(serves: Serves, endpoints: Endpoints) -> Router {
    let mut router = Router::new();
    if matches!(serves, Serves::Metrics | Serves::Both) {
        let metrics = endpoints.metrics.clone();
        router = router.route("/metrics", get(move || scrape(metrics.clone())));
    }
    if matches!(serves, Serves::Probes | Serves::Both) {
        for (endpoint, checks) in [("healthz", endpoints.healthz), ("readyz", endpoints.readyz)] {
            let all = Arc::clone(&checks);
            router = router
                .route(
                    &format!("/{endpoint}"),
                    get(move |RawQuery(query): RawQuery| {
                        let checks = Arc::clone(&all);
                        async move { probe(endpoint, &checks, None, query).await }
                    }),
                )
                .route(
                    &format!("/{endpoint}/{{check}}"),
                    get(move |Path(name): Path<String>, RawQuery(query): RawQuery| {
                        let checks = Arc::clone(&checks);
                        async move { probe(endpoint, &checks, Some(name), query).await }
                    }),
                );
        }
    }
    router
}

async fn probe(
    endpoint: &'static str,
    checks: &Checks,
    only: Option<String>,
    query: Option<String>,
) -> Response {
    if let Some(name) = &only
        && !checks.contains(name)
    {
        return (
            StatusCode::NOT_FOUND,
            format!("no {endpoint} check named {name:?}\n"),
        )
            .into_response();
    }
    let verbose = query.is_some_and(|q| {
        q.split('&')
            .any(|pair| pair == "verbose" || pair.starts_with("verbose="))
    });
    let report = checks.run(endpoint, only.as_deref(), verbose).await;
    let status = if report.healthy {
        StatusCode::OK
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        report.body,
    )
        .into_response()
}
