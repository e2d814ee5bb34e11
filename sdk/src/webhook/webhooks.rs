//! [`Webhooks`]: the set of webhooks one server answers, each with its
//! path and the options its configuration is generated with.

use std::sync::Arc;

use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::admission::{AdmissionHandler, Operation};
use super::conversion::{Conversion, ConvertKind, Hub};
use super::defaulting::{Defaulter, DefaultingHandler};
use super::error::WebhookError;
use super::validating::{ValidatingHandler, Validator};

/// The path of the conversion endpoint (one for every kind: each object
/// in a ConversionReview names its kind).
pub const CONVERSION_PATH: &str = "/convert";

/// What the apiserver does when it cannot get an answer from the webhook
/// (down, unreachable, or slower than the
/// [timeout](WebhookOptions::timeout_seconds)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailurePolicy {
    /// Refuse the request (the default, as for kubebuilder's markers).
    #[default]
    Fail,
    /// Let the request through as if the webhook had allowed it.
    Ignore,
}

impl FailurePolicy {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Fail => "Fail",
            Self::Ignore => "Ignore",
        }
    }
}

/// How one admission webhook is registered: its name and path, which
/// operations reach it, and the apiserver's failure policy and timeout.
///
/// ```
/// use opkit::webhook::{FailurePolicy, Operation, WebhookOptions};
///
/// let options = WebhookOptions::new()
///     .operations([Operation::Create, Operation::Update, Operation::Delete])
///     .failure_policy(FailurePolicy::Ignore)
///     .timeout_seconds(5);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookOptions {
    pub(crate) name: Option<String>,
    pub(crate) path: Option<String>,
    pub(crate) operations: Option<Vec<Operation>>,
    pub(crate) failure_policy: FailurePolicy,
    pub(crate) timeout_seconds: i32,
    pub(crate) namespaces: Option<Vec<String>>,
}

impl Default for WebhookOptions {
    fn default() -> Self {
        Self {
            name: None,
            path: None,
            operations: None,
            failure_policy: FailurePolicy::Fail,
            timeout_seconds: 10,
            namespaces: None,
        }
    }
}

impl WebhookOptions {
    /// The defaults: kubebuilder's name and path, create and update,
    /// failure policy `Fail`, a 10 s timeout, every namespace.
    pub fn new() -> Self {
        Self::default()
    }

    /// The webhook's name in its configuration (a fully qualified name,
    /// at least three dot-separated parts). Default
    /// `v<kind>-<version>.<group>` (`m...` when mutating).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The path it is served on. Default kubebuilder's
    /// `/validate-<group with dashes>-<version>-<kind>` (`/mutate-...`).
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// The operations that reach it (default create and update).
    pub fn operations(mut self, operations: impl IntoIterator<Item = Operation>) -> Self {
        self.operations = Some(operations.into_iter().collect());
        self
    }

    /// What the apiserver does when the webhook does not answer in time
    /// (default [`FailurePolicy::Fail`]).
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.failure_policy = policy;
        self
    }

    /// How long the apiserver waits for an answer, 1 to 30 seconds
    /// (default 10).
    pub fn timeout_seconds(mut self, seconds: i32) -> Self {
        self.timeout_seconds = seconds.clamp(1, 30);
        self
    }

    /// Only objects in these namespaces reach the webhook (a
    /// `namespaceSelector` on `kubernetes.io/metadata.name`); default all.
    pub fn namespaces<S: Into<String>>(mut self, namespaces: impl IntoIterator<Item = S>) -> Self {
        self.namespaces = Some(namespaces.into_iter().map(Into::into).collect());
        self
    }
}

/// Validating or mutating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AdmissionType {
    Validating,
    Mutating,
}

/// One registered admission webhook.
#[derive(Clone)]
pub(crate) struct AdmissionEntry {
    pub(crate) admission_type: AdmissionType,
    pub(crate) name: String,
    pub(crate) path: String,
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) plural: String,
    pub(crate) options: WebhookOptions,
    pub(crate) handler: Arc<dyn AdmissionHandler>,
}

impl AdmissionEntry {
    pub(crate) fn operations(&self) -> Vec<Operation> {
        self.options
            .operations
            .clone()
            .unwrap_or_else(|| vec![Operation::Create, Operation::Update])
    }
}

/// The webhooks a [`WebhookServer`](super::WebhookServer) answers, and the
/// source of their manifests (`ValidatingWebhookConfiguration`,
/// `MutatingWebhookConfiguration`, a CRD's conversion stanza): one
/// declaration for both, as the RBAC rules come from `#[derive(Controller)]`.
///
/// ```no_run
/// # use opkit::webhook::*;
/// # fn example<K, V: Validator<K>, D: Defaulter<K>, H: Hub, S: Spoke<H>>(v: V, d: D)
/// # where K: kube::Resource<DynamicType = ()> + serde::Serialize + serde::de::DeserializeOwned + Send + Sync + 'static {
/// let webhooks = Webhooks::new()
///     .validating::<K, _>(v)
///     .defaulting_with::<K, _>(d, WebhookOptions::new().failure_policy(FailurePolicy::Ignore))
///     .conversion(Conversion::<H>::new().spoke::<S>());
/// # }
/// ```
#[derive(Clone, Default)]
pub struct Webhooks {
    pub(crate) admission: Vec<AdmissionEntry>,
    pub(crate) conversions: Vec<Arc<dyn ConvertKind>>,
}

impl std::fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhooks")
            .field("paths", &self.paths())
            .finish()
    }
}

impl Webhooks {
    /// No webhooks yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a validating webhook for `K` with the default
    /// [options](WebhookOptions).
    pub fn validating<K, V>(self, validator: V) -> Self
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        V: Validator<K>,
    {
        self.validating_with::<K, V>(validator, WebhookOptions::default())
    }

    /// Adds a validating webhook for `K` with `options`.
    pub fn validating_with<K, V>(mut self, validator: V, options: WebhookOptions) -> Self
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
        V: Validator<K>,
    {
        let handler = Arc::new(ValidatingHandler::<K, V>::new(validator));
        self.admission
            .push(entry::<K>(AdmissionType::Validating, options, handler));
        self
    }

    /// Adds a mutating (defaulting) webhook for `K` with the default
    /// [options](WebhookOptions).
    pub fn defaulting<K, D>(self, defaulter: D) -> Self
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync + 'static,
        D: Defaulter<K>,
    {
        self.defaulting_with::<K, D>(defaulter, WebhookOptions::default())
    }

    /// Adds a mutating (defaulting) webhook for `K` with `options`.
    pub fn defaulting_with<K, D>(mut self, defaulter: D, options: WebhookOptions) -> Self
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync + 'static,
        D: Defaulter<K>,
    {
        let handler = Arc::new(DefaultingHandler::<K, D>::new(defaulter));
        self.admission
            .push(entry::<K>(AdmissionType::Mutating, options, handler));
        self
    }

    /// Adds the conversions of a kind, served on [`CONVERSION_PATH`].
    pub fn conversion<H: Hub>(mut self, conversion: Conversion<H>) -> Self {
        self.conversions.push(Arc::new(conversion));
        self
    }

    /// Every path served, in registration order (the conversion path last).
    pub(crate) fn paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = self.admission.iter().map(|e| e.path.clone()).collect();
        if !self.conversions.is_empty() {
            paths.push(CONVERSION_PATH.to_owned());
        }
        paths
    }

    /// Whether conversions are registered for `group`/`kind`.
    pub fn converts(&self, group: &str, kind: &str) -> bool {
        self.conversions
            .iter()
            .any(|c| c.group() == group && c.kind() == kind)
    }

    /// Fails if two webhooks share a path.
    pub(crate) fn check_paths(&self) -> Result<(), WebhookError> {
        let mut seen = std::collections::HashSet::new();
        for path in self.paths() {
            if !seen.insert(path.clone()) {
                return Err(WebhookError::DuplicatePath { path });
            }
        }
        Ok(())
    }
}

fn entry<K: Resource<DynamicType = ()>>(
    admission_type: AdmissionType,
    options: WebhookOptions,
    handler: Arc<dyn AdmissionHandler>,
) -> AdmissionEntry {
    let group = K::group(&()).into_owned();
    let version = K::version(&()).into_owned();
    let kind = K::kind(&()).to_ascii_lowercase();
    let (letter, verb) = match admission_type {
        AdmissionType::Validating => ("v", "validate"),
        AdmissionType::Mutating => ("m", "mutate"),
    };
    let path = options
        .path
        .clone()
        .unwrap_or_else(|| format!("/{verb}-{}-{version}-{kind}", group.replace('.', "-")));
    let name = options.name.clone().unwrap_or_else(|| {
        let domain = if group.contains('.') {
            group.clone()
        } else if group.is_empty() {
            "core.opkit.dev".to_owned()
        } else {
            format!("{group}.opkit.dev")
        };
        format!("{letter}{kind}-{version}.{domain}")
    });
    AdmissionEntry {
        admission_type,
        name,
        path,
        group,
        version,
        plural: K::plural(&()).into_owned(),
        options,
        handler,
    }
}
