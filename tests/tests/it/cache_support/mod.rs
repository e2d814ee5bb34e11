//! Helpers shared by the `cache_*` tests: a client layer that observes the
//! real HTTP requests (LIST / WATCH / streaming-list counts per path) and can
//! cut open watch connections or refuse new ones, as a network fault would.
#![allow(dead_code)]

use std::{
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll},
};

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use kube::{
    Client,
    client::{Body, ClientBuilder, DynBody},
};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tower::{BoxError, Layer, Service};

/// What one request was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A LIST (collection GET without `watch`).
    List,
    /// A WATCH without `sendInitialEvents`.
    Watch,
    /// A streaming list (`watch` with `sendInitialEvents=true`).
    WatchList,
    /// Anything else.
    Other,
}

#[derive(Default)]
struct State {
    log: Mutex<Vec<(Kind, String)>>,
    kill: Mutex<CancellationToken>,
    block_watches: AtomicBool,
}

/// Observes and disturbs the traffic of the clients built with [`Traffic::client`].
#[derive(Clone, Default)]
pub struct Traffic {
    state: Arc<State>,
}

fn classify(req: &Request<Body>) -> Kind {
    if req.method() != http::Method::GET {
        return Kind::Other;
    }
    let q = req.uri().query().unwrap_or_default();
    let has = |p: &str| q.split('&').any(|kv| kv == p);
    if has("watch=true") || has("watch=1") {
        if has("sendInitialEvents=true") {
            Kind::WatchList
        } else {
            Kind::Watch
        }
    } else if req.uri().path().starts_with("/api") && !req.uri().path().contains("/version") {
        Kind::List
    } else {
        Kind::Other
    }
}

impl Traffic {
    /// A client (from `config`) whose requests this observes.
    pub fn client(&self, config: &kube::Config) -> Client {
        ClientBuilder::try_from(config.clone())
            .expect("client builder")
            .with_layer(self)
            .build()
    }

    /// How many requests of `kind` had a path containing `path_part`.
    pub fn count(&self, kind: Kind, path_part: &str) -> usize {
        self.state
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, p)| *k == kind && p.contains(path_part))
            .count()
    }

    /// Full (re)lists: LIST first pages plus streaming lists.
    pub fn relists(&self, path_part: &str) -> usize {
        self.state
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, p)| {
                p.contains(path_part)
                    && (*k == Kind::WatchList || (*k == Kind::List && !p.contains("continue=")))
            })
            .count()
    }

    /// Every request seen, in order.
    pub fn log(&self) -> Vec<(Kind, String)> {
        self.state.log.lock().unwrap().clone()
    }

    /// Cuts every open watch connection (their bodies fail mid-stream).
    pub fn kill_watches(&self) {
        let mut k = self.state.kill.lock().unwrap();
        k.cancel();
        *k = CancellationToken::new();
    }

    /// While on, new watch requests fail as if the connection was refused.
    pub fn block_watches(&self, on: bool) {
        self.state.block_watches.store(on, Ordering::SeqCst);
    }
}

impl<S> Layer<S> for Traffic {
    type Service = TrafficService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        TrafficService {
            inner,
            traffic: self.clone(),
        }
    }
}

/// The service of [`Traffic`].
#[derive(Clone)]
pub struct TrafficService<S> {
    inner: S,
    traffic: Traffic,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S> Service<Request<Body>> for TrafficService<S>
where
    S: Service<Request<Body>, Response = Response<Box<DynBody>>, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<KillableBody>;
    type Error = BoxError;
    type Future = BoxFuture<Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let kind = classify(&req);
        let path = req
            .uri()
            .path_and_query()
            .map(|p| p.to_string())
            .unwrap_or_default();
        self.traffic.state.log.lock().unwrap().push((kind, path));
        let is_watch = matches!(kind, Kind::Watch | Kind::WatchList);
        if is_watch && self.traffic.state.block_watches.load(Ordering::SeqCst) {
            return Box::pin(async {
                Err::<Self::Response, BoxError>("connection refused (blocked by the test)".into())
            });
        }
        let kill = is_watch.then(|| {
            self.traffic
                .state
                .kill
                .lock()
                .unwrap()
                .clone()
                .cancelled_owned()
        });
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await?;
            Ok(res.map(|inner| KillableBody {
                inner,
                kill: kill.map(Box::pin),
            }))
        })
    }
}

/// A response body that fails when the test cuts the connection.
pub struct KillableBody {
    inner: Box<DynBody>,
    kill: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
}

impl HttpBody for KillableBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(k) = self.kill.as_mut()
            && k.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Some(Err("connection cut by the test".into())));
        }
        Pin::new(&mut *self.inner).poll_frame(cx)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

// The fixtures every test module shares, under the names the `cache_*`
// modules import them by.
pub use opkit_tests::{create_namespace, eventually, init_tracing};
