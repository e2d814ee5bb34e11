//! [`Defaulter`]: a mutating admission webhook for one kind, written as a
//! change to the typed object; the JSON patch the apiserver needs is
//! computed by comparing the object before and after.

use std::future::Future;
use std::marker::PhantomData;

use futures::future::BoxFuture;
use json_patch::{AddOperation, Patch, PatchOperation};
use kube::core::admission::AdmissionResponse;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::admission::{self, AdmissionHandler, AdmissionRequest, Denied, Operation, Verdict};

/// Sets defaults on (or otherwise changes) objects of kind `K` as they are
/// created or updated (controller-runtime's `CustomDefaulter`). Change the
/// object in place; opkit sends the apiserver a JSON patch (RFC 6902) of
/// exactly what changed. Return warnings for the client, or refuse with
/// [`Denied`].
///
/// Register it with [`Webhooks::defaulting`](super::Webhooks::defaulting).
///
/// ```
/// use opkit::webhook::{AdmissionRequest, Defaulter, Verdict};
/// # use kube::CustomResource; use schemars::JsonSchema; use serde::{Deserialize, Serialize};
/// # #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
/// # #[kube(group = "cache.example.com", version = "v1", kind = "Memcached", namespaced)]
/// # pub struct MemcachedSpec { pub size: Option<i32> }
///
/// struct DefaultSize;
///
/// impl Defaulter<Memcached> for DefaultSize {
///     async fn default(&self, m: &mut Memcached, _: &AdmissionRequest) -> Verdict {
///         if m.spec.size.is_none() {
///             m.spec.size = Some(1);
///             return Ok(vec!["spec.size defaulted to 1".into()]);
///         }
///         Ok(vec![])
///     }
/// }
/// ```
///
/// Only fields the Rust type knows can be changed; fields it does not know
/// are left as the client sent them (the patch never removes what the type
/// merely failed to read).
pub trait Defaulter<K>: Send + Sync + 'static {
    /// Changes `object` (being created, or the new state of an update).
    fn default(
        &self,
        object: &mut K,
        request: &AdmissionRequest,
    ) -> impl Future<Output = Verdict> + Send;
}

/// A [`Defaulter`] as an [`AdmissionHandler`].
pub(crate) struct DefaultingHandler<K, D> {
    defaulter: D,
    kind: PhantomData<fn() -> K>,
}

impl<K, D> DefaultingHandler<K, D> {
    pub(crate) fn new(defaulter: D) -> Self {
        Self {
            defaulter,
            kind: PhantomData,
        }
    }
}

impl<K, D> AdmissionHandler for DefaultingHandler<K, D>
where
    K: Serialize + DeserializeOwned + Send + Sync + 'static,
    D: Defaulter<K>,
{
    fn admit<'a>(&'a self, request: &'a AdmissionRequest) -> BoxFuture<'a, AdmissionResponse> {
        admission::boxed(async move {
            if !matches!(request.operation, Operation::Create | Operation::Update) {
                return admission::allowed(request, Vec::new());
            }
            match self.patch(request).await {
                Ok((patch, warnings)) => {
                    let response = admission::allowed(request, warnings);
                    if patch.0.is_empty() {
                        return response;
                    }
                    match response.with_patch(patch) {
                        Ok(response) => response,
                        Err(error) => admission::denied(
                            request,
                            Denied::new(error.to_string()).with_code(500, "InternalError"),
                        ),
                    }
                }
                Err(denied) => admission::denied(request, denied),
            }
        })
    }
}

impl<K, D> DefaultingHandler<K, D>
where
    K: Serialize + DeserializeOwned + Send + Sync + 'static,
    D: Defaulter<K>,
{
    async fn patch(
        &self,
        request: &AdmissionRequest,
    ) -> Result<(Patch, admission::Warnings), Denied> {
        let raw = request
            .object
            .as_ref()
            .map(serde_json::to_value)
            .transpose()
            .map_err(internal)?
            .unwrap_or(Value::Null);
        let mut object: K = admission::typed(request.object.as_ref(), "object")?;
        let before = serde_json::to_value(&object).map_err(internal)?;
        let warnings = self.defaulter.default(&mut object, request).await?;
        let after = serde_json::to_value(&object).map_err(internal)?;
        Ok((patch_for(&raw, &before, &after), warnings))
    }
}

fn internal(error: serde_json::Error) -> Denied {
    Denied::new(format!("cannot serialize the object: {error}")).with_code(500, "InternalError")
}

/// The patch that turns `raw` (the object as the client sent it) into
/// `raw` with the changes from `before` to `after` (the typed object as
/// read, and as changed).
///
/// The diff of `before` and `after` touches only what the defaulter
/// changed. Its `replace` operations on object members become `add` (same
/// effect, and valid when the member is absent in `raw` because the type
/// wrote a `null` the client never sent). If the result still does not
/// apply to `raw`, the patch from `raw` to `after` is used instead.
pub(crate) fn patch_for(raw: &Value, before: &Value, after: &Value) -> Patch {
    let diff = json_patch::diff(before, after);
    let ops = diff
        .0
        .into_iter()
        .map(|op| match op {
            PatchOperation::Replace(replace) if parent_is_object(after, &replace.path) => {
                PatchOperation::Add(AddOperation {
                    path: replace.path,
                    value: replace.value,
                })
            }
            other => other,
        })
        .collect::<Vec<_>>();
    let patch = Patch(ops);
    let mut check = raw.clone();
    if json_patch::patch(&mut check, &patch).is_ok() {
        return patch;
    }
    tracing::debug!("defaulting patch does not apply to the object as sent; patching from it");
    json_patch::diff(raw, after)
}

fn parent_is_object(document: &Value, path: &json_patch::jsonptr::Pointer) -> bool {
    match path.parent() {
        Some(parent) => parent.resolve(document).is_ok_and(Value::is_object),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn applied(raw: &Value, before: &Value, after: &Value) -> Value {
        let mut doc = raw.clone();
        json_patch::patch(&mut doc, &patch_for(raw, before, after)).unwrap();
        doc
    }

    #[test]
    fn sets_a_member_the_client_omitted_but_the_type_wrote_as_null() {
        let raw = json!({"spec": {"name": "a"}});
        let before = json!({"spec": {"name": "a", "size": null}});
        let after = json!({"spec": {"name": "a", "size": 3}});
        assert_eq!(
            applied(&raw, &before, &after),
            json!({"spec": {"name": "a", "size": 3}})
        );
    }

    #[test]
    fn keeps_fields_the_type_does_not_know() {
        let raw = json!({"spec": {"name": "a", "extra": true}, "metadata": {"name": "x"}});
        let before = json!({"spec": {"name": "a"}, "metadata": {"name": "x"}});
        let after = json!({"spec": {"name": "b"}, "metadata": {"name": "x", "labels": {"l": "v"}}});
        assert_eq!(
            applied(&raw, &before, &after),
            json!({"spec": {"name": "b", "extra": true}, "metadata": {"name": "x", "labels": {"l": "v"}}})
        );
    }

    #[test]
    fn no_change_no_patch() {
        let v = json!({"spec": {"items": [1, 2]}});
        assert!(patch_for(&v, &v, &v).0.is_empty());
    }

    #[test]
    fn falls_back_to_patching_from_the_raw_object() {
        // The type invented a parent (`template: {}`) the client never sent.
        let raw = json!({"spec": {}});
        let before = json!({"spec": {"template": {}}});
        let after = json!({"spec": {"template": {"image": "x"}}});
        assert_eq!(applied(&raw, &before, &after), after);
    }

    #[test]
    fn array_edits_apply() {
        let raw = json!({"spec": {"ports": [80]}});
        let after = json!({"spec": {"ports": [80, 443]}});
        assert_eq!(applied(&raw, &raw, &after), after);
    }
}
