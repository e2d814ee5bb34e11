//! The answer to a `/metrics` scrape, over HTTP or HTTPS: every metric in
//! the OpenMetrics text, or a 500 when it cannot be encoded.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::metrics::{CONTENT_TYPE, Metrics};

/// The scrape's response.
pub(crate) async fn scrape(metrics: Metrics) -> Response {
    match metrics.encode() {
        Ok(text) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        Err(error) => {
            tracing::error!(%error, "cannot encode the metrics");
            (StatusCode::INTERNAL_SERVER_ERROR, error.to_string()).into_response()
        }
    }
}
