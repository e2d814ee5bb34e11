//! The client layer that records this process's writes for
//! read-your-own-writes: it reads the answer of every successful
//! create / update / patch / apply / delete (and their `status` forms) of a
//! kind the cache watches, and hands the object's new resourceVersion (or
//! its deletion) to the [`WriteTracker`].

use std::sync::Arc;

use http::{Method, Request, Response};
use kube::client::Body;
use serde::Deserialize;

use super::tracker::{WriteKey, WriteTracker, Written};

/// A client whose writes are recorded in `tracker`; everything else
/// (reads, watches, errors) passes through untouched.
pub(crate) fn recording_client(inner: kube::Client, tracker: Arc<WriteTracker>) -> kube::Client {
    let default_namespace = inner.default_namespace().to_owned();
    let service = tower::service_fn(move |request: Request<Body>| {
        let inner = inner.clone();
        let tracker = Arc::clone(&tracker);
        async move {
            let target = WriteTarget::of(&request);
            let response = inner.send(request).await?;
            match target {
                Some(target)
                    if response.status().is_success()
                        && tracker.is_watched(&target.api_version, &target.plural) =>
                {
                    record(response, target, &tracker).await
                }
                _ => Ok(response),
            }
        }
    });
    kube::Client::new(service, default_namespace)
}

/// Reads the answer, records it, and hands the same bytes on.
async fn record(
    response: Response<Body>,
    target: WriteTarget,
    tracker: &WriteTracker,
) -> Result<Response<Body>, kube::Error> {
    let (parts, body) = response.into_parts();
    let bytes = body.collect_bytes().await?;
    match serde_json::from_slice::<Answer>(&bytes) {
        Ok(answer) => {
            if let Some((key, written)) = answer.into_record(target) {
                tracker.record(key, written);
            }
        }
        Err(error) => {
            tracing::debug!(%error, plural = %target.plural, "write answer not understood; not recorded for read-your-writes");
        }
    }
    Ok(Response::from_parts(parts, Body::from(bytes)))
}

/// What a write request targets, from its method and path.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct WriteTarget {
    api_version: String,
    plural: String,
    namespace: Option<String>,
    name: Option<String>,
    delete: bool,
}

impl WriteTarget {
    /// `None` for reads, dry runs, collection deletes and subresources
    /// other than `status`.
    pub(crate) fn of<B>(request: &Request<B>) -> Option<Self> {
        let method = request.method();
        let delete = *method == Method::DELETE;
        if !(delete
            || *method == Method::POST
            || *method == Method::PUT
            || *method == Method::PATCH)
        {
            return None;
        }
        let uri = request.uri();
        if uri
            .query()
            .is_some_and(|q| q.split('&').any(|p| p.starts_with("dryRun=")))
        {
            return None;
        }
        let segments: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
        let (api_version, rest) = match segments.as_slice() {
            ["api", version, rest @ ..] => ((*version).to_owned(), rest),
            ["apis", group, version, rest @ ..] => (format!("{group}/{version}"), rest),
            _ => return None,
        };
        // namespaces/{ns}/{plural}... is namespaced, unless it is the
        // Namespace itself (namespaces/{name}[/status|finalize]).
        let (namespace, rest) = match rest {
            ["namespaces", ns, plural, rest @ ..]
                if *plural != "status" && *plural != "finalize" =>
            {
                (Some((*ns).to_owned()), {
                    let mut r = vec![*plural];
                    r.extend_from_slice(rest);
                    r
                })
            }
            other => (None, other.to_vec()),
        };
        let (plural, name) = match rest.as_slice() {
            [plural] => (*plural, None),
            [plural, name] => (*plural, Some(*name)),
            [plural, name, "status"] => (*plural, Some(*name)),
            _ => return None,
        };
        if name.is_none() && *method != Method::POST {
            return None; // deletecollection
        }
        Some(Self {
            api_version,
            plural: plural.to_owned(),
            namespace,
            name: name.map(str::to_owned),
            delete,
        })
    }
}

/// The fields of a write's answer that matter here (an object, or a
/// `Status` for some deletes).
#[derive(Deserialize, Debug, Default)]
#[serde(default)]
struct Answer {
    kind: Option<String>,
    metadata: AnswerMeta,
    details: Option<StatusDetails>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(default, rename_all = "camelCase")]
struct AnswerMeta {
    name: Option<String>,
    namespace: Option<String>,
    resource_version: Option<String>,
    uid: Option<String>,
    deletion_timestamp: Option<serde_json::Value>,
    finalizers: Option<Vec<String>>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(default)]
struct StatusDetails {
    name: Option<String>,
    uid: Option<String>,
}

impl Answer {
    fn into_record(self, target: WriteTarget) -> Option<(WriteKey, Written)> {
        let WriteTarget {
            api_version,
            plural,
            namespace,
            name,
            delete,
        } = target;
        if self.kind.as_deref() == Some("Status") {
            let details = self.details.unwrap_or_default();
            let name = name.or(details.name)?;
            if !delete {
                return None;
            }
            let key = WriteKey {
                api_version,
                plural,
                namespace,
                name,
            };
            return Some((key, Written::Deleted { uid: details.uid }));
        }
        let meta = self.metadata;
        let key = WriteKey {
            api_version,
            plural,
            namespace: meta.namespace.or(namespace),
            name: meta.name.or(name)?,
        };
        let being_deleted = meta.deletion_timestamp.is_some_and(|t| !t.is_null());
        let finalizers_left = meta.finalizers.is_some_and(|f| !f.is_empty());
        // A delete answered with the object as it was (no deletionTimestamp)
        // removed it. An object being deleted without finalizers left may
        // vanish any moment: absent counts as caught up.
        let written = if delete && !being_deleted {
            Written::Deleted { uid: meta.uid }
        } else {
            Written::Object {
                resource_version: meta.resource_version?,
                uid: meta.uid,
                vanishing: being_deleted && !finalizers_left,
            }
        };
        Some((key, written))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target(method: Method, uri: &str) -> Option<WriteTarget> {
        WriteTarget::of(&Request::builder().method(method).uri(uri).body(()).unwrap())
    }

    fn answer(value: serde_json::Value) -> Answer {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn write_paths_name_the_object() {
        let t = target(
            Method::PATCH,
            "/api/v1/namespaces/ns/configmaps/a?fieldManager=x",
        )
        .unwrap();
        assert_eq!(
            (
                t.api_version.as_str(),
                t.plural.as_str(),
                t.namespace.as_deref(),
                t.name.as_deref()
            ),
            ("v1", "configmaps", Some("ns"), Some("a"))
        );
        let t = target(
            Method::PUT,
            "/apis/apps/v1/namespaces/ns/deployments/web/status",
        )
        .unwrap();
        assert_eq!(
            (t.api_version.as_str(), t.name.as_deref()),
            ("apps/v1", Some("web"))
        );
        let t = target(Method::POST, "/apis/ctl.opkit.dev/v1/gadgets").unwrap();
        assert_eq!((t.namespace, t.name), (None, None));
        let t = target(Method::DELETE, "/api/v1/namespaces/prod").unwrap();
        assert_eq!(
            (t.plural.as_str(), t.namespace, t.name.as_deref(), t.delete),
            ("namespaces", None, Some("prod"), true)
        );
        let t = target(Method::PUT, "/api/v1/namespaces/prod/status").unwrap();
        assert_eq!(
            (t.plural.as_str(), t.name.as_deref()),
            ("namespaces", Some("prod"))
        );
    }

    #[test]
    fn reads_dry_runs_collections_and_other_subresources_are_not_recorded() {
        assert!(target(Method::GET, "/api/v1/namespaces/ns/configmaps/a").is_none());
        assert!(target(Method::POST, "/api/v1/namespaces/ns/configmaps?dryRun=All").is_none());
        assert!(target(Method::DELETE, "/api/v1/namespaces/ns/configmaps").is_none());
        assert!(
            target(
                Method::PATCH,
                "/apis/apps/v1/namespaces/ns/deployments/web/scale"
            )
            .is_none()
        );
        assert!(target(Method::POST, "/api/v1/namespaces/ns/pods/p/eviction").is_none());
    }

    #[test]
    fn answers_become_records() {
        let t = || target(Method::PATCH, "/api/v1/namespaces/ns/configmaps/a").unwrap();
        let (key, written) = answer(json!({"kind": "ConfigMap", "metadata": {
            "name": "a", "namespace": "ns", "resourceVersion": "12", "uid": "u"}}))
        .into_record(t())
        .unwrap();
        assert_eq!(key.name, "a");
        assert_eq!(
            written,
            Written::Object {
                resource_version: "12".into(),
                uid: Some("u".into()),
                vanishing: false
            }
        );
        // The last finalizer removed from an object being deleted: it may vanish.
        let (_, written) = answer(json!({"kind": "ConfigMap", "metadata": {
            "name": "a", "resourceVersion": "13", "uid": "u",
            "deletionTimestamp": "2026-01-01T00:00:00Z"}}))
        .into_record(t())
        .unwrap();
        assert_eq!(
            written,
            Written::Object {
                resource_version: "13".into(),
                uid: Some("u".into()),
                vanishing: true
            }
        );
    }

    #[test]
    fn delete_answers_become_deletions_unless_finalizers_hold_the_object() {
        let del = || target(Method::DELETE, "/api/v1/namespaces/ns/configmaps/a").unwrap();
        let (_, written) = answer(json!({"kind": "Status", "status": "Success",
            "details": {"name": "a", "uid": "u"}}))
        .into_record(del())
        .unwrap();
        assert_eq!(
            written,
            Written::Deleted {
                uid: Some("u".into())
            }
        );
        let (_, written) = answer(json!({"kind": "ConfigMap", "metadata": {
            "name": "a", "resourceVersion": "12", "uid": "u"}}))
        .into_record(del())
        .unwrap();
        assert_eq!(
            written,
            Written::Deleted {
                uid: Some("u".into())
            }
        );
        let (_, written) = answer(json!({"kind": "ConfigMap", "metadata": {
            "name": "a", "resourceVersion": "14", "uid": "u", "finalizers": ["x"],
            "deletionTimestamp": "2026-01-01T00:00:00Z"}}))
        .into_record(del())
        .unwrap();
        assert_eq!(
            written,
            Written::Object {
                resource_version: "14".into(),
                uid: Some("u".into()),
                vanishing: false
            }
        );
    }
}
