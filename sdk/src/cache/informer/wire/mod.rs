//! The transport of lists and watches: builds the requests
//! ([`request`], on `kube_core::Request`), sends them, turns an error
//! response into an [`ApiStatus`], and hands the bytes of a successful one
//! to the decoder its `Content-Type` picks ([`decode`](crate::cache::decode)).
//! A watch body is read chunk by chunk ([`watch`]).

use http::header;
use http_body_util::BodyExt;
use kube::{Client, client::Body};

use crate::cache::{
    decode::{self, Encoding},
    error::{ApiStatus, ReflectorError},
};

pub(crate) mod request;
pub(crate) mod watch;

pub(crate) use request::{Answer, ListOptions, Target, WatchOptions};
pub(crate) use watch::WatchStream;

/// Sends a request; the body of a successful response and how it is
/// encoded. An error response is [`ReflectorError::Api`] with the status
/// from its body (JSON or protobuf), or one made from the HTTP status line
/// when the body holds none.
pub(crate) async fn send(
    client: &Client,
    req: http::Request<Body>,
) -> Result<(Body, Encoding), ReflectorError> {
    let res = client.send(req).await.map_err(ReflectorError::Transport)?;
    let status = res.status();
    let encoding = Encoding::of(res.headers().get(header::CONTENT_TYPE));
    if status.is_success() {
        return Ok((res.into_body(), encoding));
    }
    let body = res
        .into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let mut st = decode::error_status(encoding, &body).unwrap_or_else(|| ApiStatus {
        code: status.as_u16(),
        reason: status.canonical_reason().unwrap_or_default().to_string(),
        // a plain-text body ("404 page not found\n"): no blank lines in logs
        message: String::from_utf8_lossy(&body).trim().to_owned(),
    });
    st.code = status.as_u16();
    Err(ReflectorError::Api(st))
}

/// The whole body of a successful response.
pub(crate) async fn read_all(body: Body) -> Result<bytes::Bytes, ReflectorError> {
    Ok(body
        .collect()
        .await
        .map_err(ReflectorError::Transport)?
        .to_bytes())
}
