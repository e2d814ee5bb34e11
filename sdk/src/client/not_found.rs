//! [`IgnoreNotFound`]: "NotFound is fine" for a request's result, as
//! controller-runtime's `client.IgnoreNotFound`.

use super::error::ClientError;

/// Turns a 404 into `Ok(None)`, keeping every other error: the usual way
/// to delete something that may be gone already, or to read something
/// that may not exist yet. Implemented for the results of `kube::Api`
/// calls (`kube::Error`, turned into a [`ClientError`]) and of the
/// [`client`](crate::client) helpers.
///
/// ```no_run
/// use k8s_openapi::api::apps::v1::Deployment;
/// use kube::api::DeleteParams;
/// use opkit::client::IgnoreNotFound;
/// use opkit::reconcile::{Context, ReconcileError};
///
/// # async fn cleanup(ctx: &Context<Deployment>) -> Result<(), ReconcileError> {
/// let deleted = ctx
///     .api::<Deployment>(Some("shop"))
///     .delete("web", &DeleteParams::default())
///     .await
///     .ignore_not_found()?;
/// if deleted.is_none() {
///     tracing::debug!("web was gone already");
/// }
/// # Ok(()) }
/// ```
pub trait IgnoreNotFound<T> {
    /// `Ok(Some(value))` on success, `Ok(None)` on a 404 Not Found, the
    /// error otherwise.
    fn ignore_not_found(self) -> Result<Option<T>, ClientError>;
}

impl<T> IgnoreNotFound<T> for Result<T, ClientError> {
    fn ignore_not_found(self) -> Result<Option<T>, ClientError> {
        match self {
            Ok(value) => Ok(Some(value)),
            Err(error) if error.is_not_found() => Ok(None),
            Err(error) => Err(error),
        }
    }
}

impl<T> IgnoreNotFound<T> for Result<T, kube::Error> {
    fn ignore_not_found(self) -> Result<Option<T>, ClientError> {
        self.map_err(ClientError::from).ignore_not_found()
    }
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    fn api_error(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Status::failure(reason, reason).with_code(code).boxed())
    }

    #[test]
    fn a_404_is_none_and_success_is_some() {
        let gone: Result<(), kube::Error> = Err(api_error(404, "NotFound"));
        assert_eq!(gone.ignore_not_found().unwrap(), None);
        let fine: Result<u8, kube::Error> = Ok(7);
        assert_eq!(fine.ignore_not_found().unwrap(), Some(7));
    }

    #[test]
    fn other_errors_are_kept() {
        let denied: Result<(), kube::Error> = Err(api_error(403, "Forbidden"));
        assert!(denied.ignore_not_found().unwrap_err().is_forbidden());
        let conflict: Result<(), kube::Error> = Err(api_error(409, "Conflict"));
        assert!(conflict.ignore_not_found().unwrap_err().is_conflict());
    }
}
