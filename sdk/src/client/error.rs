//! Typed errors of `opkit::client`: one for requests to the apiserver, one
//! for owner references (checked locally), one for the event recorder's
//! configuration.

/// What a request tried to do; fills the error when the apiserver's message
/// does not say.
#[derive(Debug, Clone, Default)]
pub(crate) struct Target {
    pub(crate) verb: &'static str,
    /// `plural` or `plural/subresource`.
    pub(crate) resource: String,
    pub(crate) group: String,
    pub(crate) namespace: Option<String>,
    pub(crate) name: String,
}

impl Target {
    /// The target of `verb` on the object `name` of type `K`.
    pub(crate) fn of<K>(verb: &'static str, namespace: Option<String>, name: &str) -> Self
    where
        K: kube::Resource<DynamicType = ()>,
    {
        Self {
            verb,
            resource: K::plural(&()).into_owned(),
            group: K::group(&()).into_owned(),
            namespace,
            name: name.to_owned(),
        }
    }

    /// The same target on a subresource (`status`).
    pub(crate) fn subresource(mut self, sub: &str) -> Self {
        self.resource = format!("{}/{sub}", self.resource);
        self
    }
}

/// A request to the apiserver failed.
///
/// ```
/// use opkit::client::ClientError;
///
/// let message = r#"configmaps "settings" is forbidden: User "alice" cannot patch resource "configmaps" in API group "" in the namespace "shop""#;
/// let status = kube::core::Status::failure(message, "Forbidden").with_code(403);
/// let err = ClientError::from(kube::Error::Api(status.boxed()));
/// assert!(matches!(&err, ClientError::Forbidden { verb, resource, .. } if verb == "patch" && resource == "configmaps"));
/// assert!(err.to_string().contains(r#"cannot patch resource "configmaps""#));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// 409: the object changed since it was read (stale `resourceVersion`),
    /// or it already exists. Retried by the helpers that say so; give up
    /// and requeue otherwise.
    #[error("conflict on {}: {message}", object(resource, name))]
    Conflict {
        /// `plural[/subresource]`.
        resource: String,
        /// The object's name.
        name: String,
        /// The apiserver's message.
        message: String,
    },
    /// 403: the operator's identity may not do this. Names the verb and the
    /// resource so the missing RBAC rule is obvious.
    #[error(
        "forbidden: cannot {verb} resource {resource:?} in API group {group:?}{}: \
         add verb {verb:?} on resource {resource:?} in apiGroup {group:?} to the operator's RBAC Role or ClusterRole \
         (apiserver: {message})", in_namespace(namespace.as_deref())
    )]
    Forbidden {
        /// The denied verb (`get`, `list`, `create`, `update`, `patch`, `delete`, ...).
        verb: String,
        /// The resource, `plural[/subresource]` (e.g. `leases`, `widgets/status`).
        resource: String,
        /// The API group (`""` for the core group).
        group: String,
        /// The namespace, or `None` at the cluster scope.
        namespace: Option<String>,
        /// The apiserver's message.
        message: String,
    },
    /// 404: the object (or its namespace) does not exist.
    #[error("{} not found{}", object(resource, name), in_namespace(namespace.as_deref()))]
    NotFound {
        /// `plural[/subresource]`.
        resource: String,
        /// The object's name.
        name: String,
        /// The namespace, or `None` at the cluster scope.
        namespace: Option<String>,
    },
    /// 422: the apiserver rejected the object (schema, validation, immutable
    /// field, a new finalizer on an object being deleted). The message names
    /// the object and the offending fields.
    #[error("{}", invalid_text(resource, name, message))]
    Invalid {
        /// `plural[/subresource]`.
        resource: String,
        /// The object's name.
        name: String,
        /// The apiserver's message, listing the offending fields.
        message: String,
    },
    /// Any other status the apiserver answered with (429, 5xx, ...).
    #[error(
        "cannot {verb} {}: the apiserver answered {code} {reason}: {message}",
        object(resource, name)
    )]
    Api {
        /// The verb that was attempted.
        verb: String,
        /// `plural[/subresource]`.
        resource: String,
        /// The object's name.
        name: String,
        /// HTTP status code.
        code: u16,
        /// The machine-readable reason.
        reason: String,
        /// The apiserver's message.
        message: String,
    },
    /// The request did not get an answer (connection, TLS, timeout) or the
    /// answer could not be read.
    #[error("cannot {verb} {}: {source}", object(resource, name))]
    Request {
        /// The verb that was attempted.
        verb: String,
        /// `plural[/subresource]`.
        resource: String,
        /// The object's name.
        name: String,
        /// The underlying error.
        #[source]
        source: Box<kube::Error>,
    },
    /// The object could not be turned into a request body.
    #[error("cannot serialize {kind} {name:?}: {source}")]
    Serialize {
        /// The object's kind.
        kind: String,
        /// The object's name.
        name: String,
        /// The serializer's error.
        #[source]
        source: serde_json::Error,
    },
    /// The object has no `metadata.name`, so it cannot be addressed.
    #[error("the {kind} has no metadata.name")]
    MissingName {
        /// The object's kind.
        kind: String,
    },
}

/// `resource "name"`, or what of it is known.
fn object(resource: &str, name: &str) -> String {
    match (resource.is_empty(), name.is_empty()) {
        (false, false) => format!("{resource} {name:?}"),
        (false, true) => resource.to_owned(),
        (true, false) => format!("{name:?}"),
        (true, true) => "the object".to_owned(),
    }
}

fn invalid_text(resource: &str, name: &str, message: &str) -> String {
    if message.is_empty() {
        format!("{} is invalid", object(resource, name))
    } else {
        message.to_owned()
    }
}

fn in_namespace(namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!(" in namespace {ns:?}"),
        _ => String::new(),
    }
}

impl ClientError {
    /// Whether this is a 409 Conflict.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Conflict { .. })
    }

    /// Whether this is a 403 Forbidden.
    pub fn is_forbidden(&self) -> bool {
        matches!(self, Self::Forbidden { .. })
    }

    /// Whether this is a 404 Not Found.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    /// Classifies a `kube::Error` from a request to `target`.
    pub(crate) fn from_kube(error: kube::Error, target: &Target) -> Self {
        let status = match error {
            kube::Error::Api(status) => status,
            source => {
                return Self::Request {
                    verb: target.verb.to_owned(),
                    resource: target.resource.clone(),
                    name: target.name.clone(),
                    source: Box::new(source),
                };
            }
        };
        let message = status.message.clone();
        if status.is_forbidden() {
            let parsed = ForbiddenMessage::parse(&message);
            return Self::Forbidden {
                verb: parsed.verb.unwrap_or(target.verb).to_owned(),
                resource: parsed
                    .resource
                    .map_or_else(|| target.resource.clone(), str::to_owned),
                group: parsed
                    .group
                    .map_or_else(|| target.group.clone(), str::to_owned),
                namespace: match parsed.namespace {
                    Some(ns) => Some(ns.to_owned()),
                    None if parsed.cluster_scope => None,
                    None => target.namespace.clone(),
                },
                message,
            };
        }
        let details = status.details.as_ref();
        let resource = details
            .map(|d| d.kind.as_str())
            .filter(|k| !k.is_empty())
            .map_or_else(|| target.resource.clone(), str::to_owned);
        let name = details
            .map(|d| d.name.as_str())
            .filter(|n| !n.is_empty())
            .map_or_else(|| target.name.clone(), str::to_owned);
        if status.is_conflict() || status.is_already_exists() {
            Self::Conflict {
                resource,
                name,
                message,
            }
        } else if status.is_not_found() {
            Self::NotFound {
                resource,
                name,
                namespace: target.namespace.clone(),
            }
        } else if status.is_invalid() {
            Self::Invalid {
                resource,
                name,
                message,
            }
        } else {
            Self::Api {
                verb: target.verb.to_owned(),
                resource,
                name,
                code: status.code,
                reason: status.reason.clone(),
                message,
            }
        }
    }
}

/// Classifies any `kube::Error`; a 403's verb and resource are read from
/// the apiserver's message (`... cannot VERB resource "R" in API group "G" ...`).
impl From<kube::Error> for ClientError {
    fn from(error: kube::Error) -> Self {
        Self::from_kube(
            error,
            &Target {
                verb: "reach",
                ..Target::default()
            },
        )
    }
}

/// The parts of the RBAC authorizer's denial message:
/// `User "u" cannot VERB resource "R" in API group "G" in the namespace "N"`
/// (or `at the cluster scope`).
#[derive(Debug, Default, PartialEq, Eq)]
struct ForbiddenMessage<'a> {
    verb: Option<&'a str>,
    resource: Option<&'a str>,
    group: Option<&'a str>,
    namespace: Option<&'a str>,
    cluster_scope: bool,
}

impl<'a> ForbiddenMessage<'a> {
    fn parse(message: &'a str) -> Self {
        let quoted_after = |marker: &str| -> Option<&'a str> {
            let start = message.find(marker)? + marker.len();
            let rest = message.get(start..)?;
            rest.find('"').and_then(|end| rest.get(..end))
        };
        let verb = message
            .find(" cannot ")
            .and_then(|i| message.get(i + " cannot ".len()..))
            .and_then(|rest| rest.split_whitespace().next());
        Self {
            verb,
            resource: quoted_after(" resource \""),
            group: quoted_after(" in API group \""),
            namespace: quoted_after(" in the namespace \""),
            cluster_scope: message.contains("at the cluster scope"),
        }
    }
}

/// The event recorder's configuration is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// `reportingController` must be a qualified name, e.g.
    /// `memcached-operator` or `cache.example.com/memcached-controller`.
    #[error(
        "reporting controller {value:?} is not a qualified name ({reason}); use e.g. \"example.com/my-controller\""
    )]
    InvalidReportingController {
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// `reportingInstance` must be 1 to 128 characters.
    #[error("reporting instance {value:?} must be 1 to 128 characters")]
    InvalidReportingInstance {
        /// The value given.
        value: String,
    },
    /// The recorder's background task needs a tokio runtime.
    #[error("an EventRecorder must be built inside a tokio runtime")]
    NoRuntime,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(Status::failure(message, reason).with_code(code).boxed())
    }

    #[test]
    fn forbidden_names_verb_resource_group_and_namespace_from_the_message() {
        let message = r#"widgets.test.opkit.dev "w" is forbidden: User "bob" cannot patch resource "widgets/status" in API group "test.opkit.dev" in the namespace "shop""#;
        let err = ClientError::from_kube(
            api(403, "Forbidden", message),
            &Target::of::<k8s_openapi::api::core::v1::ConfigMap>("update", None, "w"),
        );
        match &err {
            ClientError::Forbidden {
                verb,
                resource,
                group,
                namespace,
                ..
            } => {
                assert_eq!(verb, "patch");
                assert_eq!(resource, "widgets/status");
                assert_eq!(group, "test.opkit.dev");
                assert_eq!(namespace.as_deref(), Some("shop"));
            }
            other => panic!("{other:?}"),
        }
        let text = err.to_string();
        assert!(text.contains(r#"cannot patch resource "widgets/status" in API group "test.opkit.dev" in namespace "shop""#), "{text}");
    }

    #[test]
    fn forbidden_at_cluster_scope_and_unparseable_fall_back_to_the_target() {
        let message = r#"namespaces is forbidden: User "bob" cannot list resource "namespaces" in API group "" at the cluster scope"#;
        let err = ClientError::from(api(403, "Forbidden", message));
        assert!(
            matches!(&err, ClientError::Forbidden { verb, resource, namespace: None, .. } if verb == "list" && resource == "namespaces")
        );

        let target =
            Target::of::<k8s_openapi::api::core::v1::ConfigMap>("create", Some("ns".into()), "c");
        let err = ClientError::from_kube(api(403, "Forbidden", "denied by webhook"), &target);
        assert!(
            matches!(&err, ClientError::Forbidden { verb, resource, namespace: Some(ns), .. } if verb == "create" && resource == "configmaps" && ns == "ns")
        );
    }

    #[test]
    fn statuses_map_to_kinds() {
        let t = Target::of::<k8s_openapi::api::core::v1::ConfigMap>("update", None, "c");
        assert!(ClientError::from_kube(api(409, "Conflict", "changed"), &t).is_conflict());
        assert!(ClientError::from_kube(api(404, "NotFound", "gone"), &t).is_not_found());
        assert!(matches!(
            ClientError::from_kube(api(422, "Invalid", "bad"), &t),
            ClientError::Invalid { .. }
        ));
        assert!(matches!(
            ClientError::from_kube(api(503, "ServiceUnavailable", "later"), &t),
            ClientError::Api { code: 503, .. }
        ));
        let err = ClientError::from(kube::Error::TlsRequired);
        assert_eq!(
            err.to_string(),
            "cannot reach the object: TLS required but no TLS stack selected"
        );
        let err = ClientError::from_kube(kube::Error::TlsRequired, &t);
        assert!(
            err.to_string()
                .starts_with("cannot update configmaps \"c\": "),
            "{err}"
        );
    }
}
