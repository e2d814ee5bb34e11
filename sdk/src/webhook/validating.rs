//! [`Validator`]: a validating admission webhook for one kind.

use std::future::Future;
use std::marker::PhantomData;

use futures::future::BoxFuture;
use kube::core::admission::AdmissionResponse;
use serde::de::DeserializeOwned;

use super::admission::{
    self, AdmissionHandler, AdmissionRequest, Operation, Verdict, Warnings, typed,
};

/// Validates objects of kind `K` as the apiserver creates, updates or
/// deletes them (controller-runtime's `CustomValidator`). Each method
/// allows (with warnings, possibly none) or refuses with [`Denied`](super::Denied),
/// whose message the client sees. Methods not overridden allow.
///
/// Register it with [`Webhooks::validating`](super::Webhooks::validating);
/// which operations reach it is set by
/// [`WebhookOptions::operations`](super::WebhookOptions::operations)
/// (create and update by default).
///
/// ```
/// use opkit::webhook::{AdmissionRequest, Denied, Validator, Verdict};
/// # use kube::CustomResource; use schemars::JsonSchema; use serde::{Deserialize, Serialize};
/// # #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
/// # #[kube(group = "cache.example.com", version = "v1", kind = "Memcached", namespaced)]
/// # pub struct MemcachedSpec { pub size: i32 }
///
/// struct SizeLimit;
///
/// impl Validator<Memcached> for SizeLimit {
///     async fn validate_create(&self, m: &Memcached, _: &AdmissionRequest) -> Verdict {
///         if m.spec.size > 10 {
///             return Err(Denied::invalid("spec.size must be at most 10"));
///         }
///         Ok(if m.spec.size > 5 { vec!["more than 5 replicas is costly".into()] } else { vec![] })
///     }
///
///     async fn validate_update(&self, old: &Memcached, new: &Memcached, req: &AdmissionRequest) -> Verdict {
///         if new.spec.size < old.spec.size / 2 {
///             return Err(Denied::new("shrink by at most half at a time"));
///         }
///         self.validate_create(new, req).await
///     }
/// }
/// ```
pub trait Validator<K>: Send + Sync + 'static {
    /// A `K` is being created.
    fn validate_create(
        &self,
        object: &K,
        request: &AdmissionRequest,
    ) -> impl Future<Output = Verdict> + Send {
        let _ = (object, request);
        async { Ok(Warnings::new()) }
    }

    /// A `K` is being updated from `old` to `new`.
    fn validate_update(
        &self,
        old: &K,
        new: &K,
        request: &AdmissionRequest,
    ) -> impl Future<Output = Verdict> + Send {
        let _ = (old, new, request);
        async { Ok(Warnings::new()) }
    }

    /// A `K` is being deleted (reaches the webhook only when `Delete` is
    /// among the [operations](super::WebhookOptions::operations)).
    fn validate_delete(
        &self,
        object: &K,
        request: &AdmissionRequest,
    ) -> impl Future<Output = Verdict> + Send {
        let _ = (object, request);
        async { Ok(Warnings::new()) }
    }
}

/// A [`Validator`] as an [`AdmissionHandler`].
pub(crate) struct ValidatingHandler<K, V> {
    validator: V,
    kind: PhantomData<fn() -> K>,
}

impl<K, V> ValidatingHandler<K, V> {
    pub(crate) fn new(validator: V) -> Self {
        Self {
            validator,
            kind: PhantomData,
        }
    }
}

impl<K, V> AdmissionHandler for ValidatingHandler<K, V>
where
    K: DeserializeOwned + Send + Sync + 'static,
    V: Validator<K>,
{
    fn admit<'a>(&'a self, request: &'a AdmissionRequest) -> BoxFuture<'a, AdmissionResponse> {
        admission::boxed(async move {
            let verdict = match request.operation {
                Operation::Create => match typed::<K>(request.object.as_ref(), "object") {
                    Ok(object) => self.validator.validate_create(&object, request).await,
                    Err(denied) => Err(denied),
                },
                Operation::Update => {
                    match (
                        typed::<K>(request.old_object.as_ref(), "oldObject"),
                        typed::<K>(request.object.as_ref(), "object"),
                    ) {
                        (Ok(old), Ok(new)) => {
                            self.validator.validate_update(&old, &new, request).await
                        }
                        (Err(denied), _) | (_, Err(denied)) => Err(denied),
                    }
                }
                Operation::Delete => match typed::<K>(request.old_object.as_ref(), "oldObject") {
                    Ok(object) => self.validator.validate_delete(&object, request).await,
                    Err(denied) => Err(denied),
                },
                Operation::Connect => Ok(Warnings::new()),
            };
            match verdict {
                Ok(warnings) => admission::allowed(request, warnings),
                Err(denied) => admission::denied(request, denied),
            }
        })
    }
}
