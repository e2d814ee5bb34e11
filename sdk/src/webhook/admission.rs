//! The AdmissionReview v1 exchange (kube's `admission` types), and what a
//! validating or defaulting webhook answers: [`Denied`] or warnings.

use std::future::Future;

use futures::future::BoxFuture;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionResponse, AdmissionReview};
use serde::de::DeserializeOwned;

pub use kube::core::admission::Operation;

/// One admission request, as the apiserver sent it: the operation, the
/// user, `dry_run`, the namespace, and the objects in their raw form.
pub type AdmissionRequest = kube::core::admission::AdmissionRequest<DynamicObject>;

/// What an allowed request returns: warnings for the client (shown by
/// kubectl as `Warning: ...`; empty for none).
pub type Warnings = Vec<String>;

/// A webhook's verdict: allowed with warnings, or [`Denied`].
pub type Verdict = Result<Warnings, Denied>;

/// A refused request. The client receives the message as
/// `admission webhook "<name>" denied the request: <message>`, with the
/// HTTP status [`code`](Self::code) (403 unless told otherwise).
///
/// ```
/// use opkit::webhook::Denied;
///
/// let denied = Denied::new("spec.size must be at most 10").with_warning("size was 11");
/// assert_eq!(denied.code(), 403);
/// assert_eq!(Denied::invalid("bad").code(), 422);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    message: String,
    reason: String,
    code: u16,
    warnings: Vec<String>,
}

impl Denied {
    /// Refuses with `message` (403 Forbidden).
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            reason: "Forbidden".to_owned(),
            code: 403,
            warnings: Vec::new(),
        }
    }

    /// Refuses an invalid object with `message` (422 Invalid, as the
    /// apiserver's own validation does).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(message).with_code(422, "Invalid")
    }

    /// Refuses with another HTTP status code (at least 400) and reason.
    pub fn with_code(mut self, code: u16, reason: impl Into<String>) -> Self {
        self.code = code.max(400);
        self.reason = reason.into();
        self
    }

    /// Adds a warning to the refusal.
    pub fn with_warning(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }

    /// The message the client sees.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The HTTP status code.
    pub fn code(&self) -> u16 {
        self.code
    }
}

impl std::fmt::Display for Denied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

/// Answers one typed admission request (a validating or defaulting
/// webhook, type-erased).
pub(crate) trait AdmissionHandler: Send + Sync + 'static {
    fn admit<'a>(&'a self, request: &'a AdmissionRequest) -> BoxFuture<'a, AdmissionResponse>;
}

/// The response for an allowed request with `warnings`.
pub(crate) fn allowed(request: &AdmissionRequest, warnings: Warnings) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(request);
    if !warnings.is_empty() {
        response.warnings = Some(warnings);
    }
    response
}

/// The response for a refused request.
pub(crate) fn denied(request: &AdmissionRequest, denied: Denied) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(request).deny(denied.message);
    response.result.code = denied.code;
    response.result.reason = denied.reason;
    response.result.status = Some(kube::core::response::StatusSummary::Failure);
    if !denied.warnings.is_empty() {
        response.warnings = Some(denied.warnings);
    }
    response
}

/// Reads the request's raw object as `K`; a 400 refusal naming the type
/// when it does not fit.
pub(crate) fn typed<K: DeserializeOwned>(
    object: Option<&DynamicObject>,
    field: &str,
) -> Result<K, Denied> {
    let Some(object) = object else {
        return Err(Denied::new(format!("the admission request has no {field}"))
            .with_code(400, "BadRequest"));
    };
    serde_json::to_value(object)
        .and_then(serde_json::from_value)
        .map_err(|e| {
            Denied::new(format!(
                "the {field} does not fit {}: {e}",
                std::any::type_name::<K>()
            ))
            .with_code(400, "BadRequest")
        })
}

/// Reads an AdmissionReview, asks `handler`, and writes the review back
/// (HTTP 400 with an explanation when the body is no AdmissionReview).
pub(crate) async fn review(handler: &dyn AdmissionHandler, body: &[u8]) -> (u16, Vec<u8>) {
    let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(body) {
        Ok(review) => review,
        Err(error) => {
            tracing::warn!(%error, "webhook request is not an AdmissionReview");
            let response =
                AdmissionResponse::invalid(format!("the body is not an AdmissionReview: {error}"));
            return (400, encode(&response.into_review()));
        }
    };
    let request: AdmissionRequest = match review.try_into() {
        Ok(request) => request,
        Err(error) => {
            let response = AdmissionResponse::invalid(error);
            return (400, encode(&response.into_review()));
        }
    };
    let response = handler.admit(&request).await;
    tracing::debug!(
        uid = %request.uid,
        kind = %request.kind.kind,
        namespace = request.namespace.as_deref().unwrap_or_default(),
        name = %request.name,
        operation = ?request.operation,
        allowed = response.allowed,
        "admission reviewed"
    );
    (200, encode(&response.into_review()))
}

fn encode<T: serde::Serialize>(value: &T) -> Vec<u8> {
    // Serializing these plain structures cannot fail; an empty body makes
    // the apiserver report the call as failed rather than guess.
    serde_json::to_vec(value).unwrap_or_default()
}

/// Makes `Send` futures of the user's trait methods uniform.
pub(crate) fn boxed<'a, F>(future: F) -> BoxFuture<'a, AdmissionResponse>
where
    F: Future<Output = AdmissionResponse> + Send + 'a,
{
    Box::pin(future)
}
