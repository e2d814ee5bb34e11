//! client-go's REST client metrics, recorded by a tower layer on the
//! manager's Kubernetes client: `rest_client_requests_total{code,method,host}`
//! and `rest_client_request_duration_seconds{verb,host}` (the time until the
//! response headers arrive; for a watch, until it is open).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::time::Instant;

use super::names::{self, counter_family};

/// `code` (the HTTP status, or `<error>` when no response came), `method`
/// and `host` (client-go's labels).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    code: String,
    method: String,
    host: String,
}

/// `verb` (the HTTP method) and `host`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct LatencyLabels {
    verb: String,
    host: String,
}

fn latency_histogram() -> Histogram {
    Histogram::new(names::REST_CLIENT_REQUEST_DURATION_BUCKETS)
}

/// The two families.
#[derive(Debug, Clone)]
pub(crate) struct RestClientFamilies {
    requests: Family<RequestLabels, Counter>,
    duration: Family<LatencyLabels, Histogram, fn() -> Histogram>,
}

impl RestClientFamilies {
    /// The families, registered on `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let families = Self {
            requests: Family::default(),
            duration: Family::new_with_constructor(latency_histogram),
        };
        registry.register(
            counter_family(names::REST_CLIENT_REQUESTS_TOTAL),
            "Number of HTTP requests, partitioned by status code, method, and host",
            families.requests.clone(),
        );
        registry.register(
            names::REST_CLIENT_REQUEST_DURATION_SECONDS,
            "Request latency in seconds. Broken down by verb, and host",
            families.duration.clone(),
        );
        families
    }

    fn record(&self, method: &str, host: &str, code: String, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabels {
                code,
                method: method.to_owned(),
                host: host.to_owned(),
            })
            .inc();
        self.duration
            .get_or_create(&LatencyLabels {
                verb: method.to_owned(),
                host: host.to_owned(),
            })
            .observe(seconds);
    }
}

/// The tower layer counting and timing every request of a client to the
/// API server at `host` (`kube::client::ClientBuilder::with_layer`).
#[derive(Debug, Clone)]
pub(crate) struct RestClientLayer {
    families: RestClientFamilies,
    host: String,
}

impl RestClientLayer {
    pub(crate) fn new(families: RestClientFamilies, host: String) -> Self {
        Self { families, host }
    }
}

impl<S> tower::Layer<S> for RestClientLayer {
    type Service = RestClientService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RestClientService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of [`RestClientLayer`].
#[derive(Debug, Clone)]
pub(crate) struct RestClientService<S> {
    inner: S,
    layer: RestClientLayer,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, ReqBody, ResBody> tower::Service<Request<ReqBody>> for RestClientService<S>
where
    S: tower::Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    ResBody: 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<ResBody>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let method = req.method().as_str().to_owned();
        let layer = self.layer.clone();
        let started = Instant::now();
        let response = self.inner.call(req);
        Box::pin(async move {
            let result = response.await;
            let code = match &result {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "<error>".to_owned(),
            };
            let seconds = started.elapsed().as_secs_f64();
            layer.families.record(&method, &layer.host, code, seconds);
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::{Layer, Service, ServiceExt};

    #[tokio::test]
    async fn counts_and_times_each_request() {
        let mut registry = Registry::default();
        let families = RestClientFamilies::register(&mut registry);
        let layer = RestClientLayer::new(families, "10.0.0.1:6443".to_owned());
        let mut svc = layer.layer(tower::service_fn(|req: Request<()>| async move {
            if req.uri().path() == "/down" {
                return Err("connection refused");
            }
            let status = if req.uri().path() == "/missing" {
                404
            } else {
                200
            };
            Ok(Response::builder().status(status).body(()).unwrap())
        }));
        for (method, path) in [
            ("GET", "/a"),
            ("GET", "/b"),
            ("POST", "/missing"),
            ("GET", "/down"),
        ] {
            let req = Request::builder()
                .method(method)
                .uri(path)
                .body(())
                .unwrap();
            let _ = svc.ready().await.unwrap().call(req).await;
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            r#"rest_client_requests_total{code="200",method="GET",host="10.0.0.1:6443"} 2"#,
            r#"rest_client_requests_total{code="404",method="POST",host="10.0.0.1:6443"} 1"#,
            r#"rest_client_requests_total{code="<error>",method="GET",host="10.0.0.1:6443"} 1"#,
            r#"rest_client_request_duration_seconds_count{verb="GET",host="10.0.0.1:6443"} 3"#,
            r#"rest_client_request_duration_seconds_bucket{le="0.005",verb="POST",host="10.0.0.1:6443"} 1"#,
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
        assert!(!text.contains(".."), "{text}");
    }
}
