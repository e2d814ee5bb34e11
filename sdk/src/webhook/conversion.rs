//! CRD conversion between versions, hub and spoke as kubebuilder does it:
//! one version is the [`Hub`], every other version is a [`Spoke`] that
//! converts to and from it. Any version converts to any other through the
//! hub, so N versions need N - 1 pairs of functions, not N².

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;

use kube::Resource;
use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The version every other version of a kind converts through (usually
/// the storage version). Implement it (it has no methods) on that
/// version's type.
pub trait Hub:
    Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync + 'static
{
}

/// A version of the same kind as the hub `H`, converting to and from it.
/// Metadata must come through unchanged (the apiserver refuses a
/// conversion that changes anything but labels and annotations).
///
/// ```
/// use opkit::webhook::{ConversionError, Hub, Spoke};
/// mod v1 {
/// #   use kube::CustomResource; use schemars::JsonSchema; use serde::{Deserialize, Serialize};
///     #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
///     #[kube(group = "example.com", version = "v1", kind = "Website", namespaced)]
///     pub struct WebsiteSpec { pub url: String }
/// }
/// mod v2 {
/// #   use kube::CustomResource; use schemars::JsonSchema; use serde::{Deserialize, Serialize};
///     #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
///     #[kube(group = "example.com", version = "v2", kind = "Website", namespaced)]
///     pub struct WebsiteSpec { pub host: String, pub tls: bool }
/// }
///
/// impl Hub for v2::Website {}
///
/// impl Spoke<v2::Website> for v1::Website {
///     fn to_hub(self) -> Result<v2::Website, ConversionError> {
///         let (tls, host) = match self.spec.url.split_once("://") {
///             Some((scheme, host)) => (scheme == "https", host.to_owned()),
///             None => return Err(ConversionError::new(format!("{:?} is no URL", self.spec.url))),
///         };
///         Ok(v2::Website { metadata: self.metadata, spec: v2::WebsiteSpec { host, tls } })
///     }
///
///     fn from_hub(hub: v2::Website) -> Result<Self, ConversionError> {
///         let scheme = if hub.spec.tls { "https" } else { "http" };
///         let url = format!("{scheme}://{}", hub.spec.host);
///         Ok(v1::Website { metadata: hub.metadata, spec: v1::WebsiteSpec { url } })
///     }
/// }
/// ```
pub trait Spoke<H: Hub>:
    Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// This version as the hub version.
    fn to_hub(self) -> Result<H, ConversionError>;
    /// The hub version as this version.
    fn from_hub(hub: H) -> Result<Self, ConversionError>;
}

/// Why an object could not be converted; the message goes back to the
/// apiserver (and from there to the client whose request needed it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConversionError(String);

impl ConversionError {
    /// A conversion failure explained by `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

type ToHub<H> = Arc<dyn Fn(Value) -> Result<H, ConversionError> + Send + Sync>;
type FromHub<H> = Arc<dyn Fn(H) -> Result<Value, ConversionError> + Send + Sync>;

/// The conversions of one kind: its [`Hub`] and its [`Spoke`]s. Register
/// it with [`Webhooks::conversion`](super::Webhooks::conversion).
///
/// ```no_run
/// # use opkit::webhook::{Conversion, Hub, Spoke};
/// # fn example<H: Hub, S: Spoke<H>>() {
/// let conversion = Conversion::<H>::new().spoke::<S>();
/// # }
/// ```
pub struct Conversion<H: Hub> {
    spokes: HashMap<String, (ToHub<H>, FromHub<H>)>,
    hub: PhantomData<fn() -> H>,
}

impl<H: Hub> std::fmt::Debug for Conversion<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conversion")
            .field("hub", &H::api_version(&()))
            .field("spokes", &self.spokes.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl<H: Hub> Default for Conversion<H> {
    fn default() -> Self {
        Self::new()
    }
}

impl<H: Hub> Conversion<H> {
    /// The hub alone; add its spokes with [`spoke`](Self::spoke).
    pub fn new() -> Self {
        Self {
            spokes: HashMap::new(),
            hub: PhantomData,
        }
    }

    /// Adds the spoke `S`.
    pub fn spoke<S: Spoke<H>>(mut self) -> Self {
        let to_hub: ToHub<H> = Arc::new(|value| {
            let spoke: S = serde_json::from_value(value).map_err(|e| {
                ConversionError::new(format!(
                    "cannot read the object as {}: {e}",
                    S::api_version(&())
                ))
            })?;
            spoke.to_hub()
        });
        let from_hub: FromHub<H> = Arc::new(|hub| {
            let spoke = S::from_hub(hub)?;
            serde_json::to_value(&spoke).map_err(|e| ConversionError::new(e.to_string()))
        });
        self.spokes
            .insert(S::api_version(&()).into_owned(), (to_hub, from_hub));
        self
    }
}

/// A [`Conversion`], type-erased: what the `/convert` endpoint and the
/// manifests need.
pub(crate) trait ConvertKind: Send + Sync + 'static {
    /// The kind's API group.
    fn group(&self) -> String;
    /// The kind.
    fn kind(&self) -> String;
    /// Converts one object to `desired` (an apiVersion).
    fn convert(&self, object: Value, desired: &str) -> Result<Value, ConversionError>;
}

impl<H: Hub> ConvertKind for Conversion<H> {
    fn group(&self) -> String {
        H::group(&()).into_owned()
    }

    fn kind(&self) -> String {
        H::kind(&()).into_owned()
    }

    fn convert(&self, object: Value, desired: &str) -> Result<Value, ConversionError> {
        let from = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if from == desired {
            return Ok(object);
        }
        let hub_version = H::api_version(&());
        let unknown = |version: &str| {
            let mut known: Vec<&str> = self.spokes.keys().map(String::as_str).collect();
            known.push(&hub_version);
            known.sort_unstable();
            ConversionError::new(format!(
                "no conversion for {version} {}; known versions: {}",
                H::kind(&()),
                known.join(", ")
            ))
        };
        let hub: H = if from == hub_version {
            serde_json::from_value(object).map_err(|e| {
                ConversionError::new(format!("cannot read the object as {hub_version}: {e}"))
            })?
        } else {
            let (to_hub, _) = self.spokes.get(&from).ok_or_else(|| unknown(&from))?;
            to_hub(object)?
        };
        if desired == hub_version {
            return serde_json::to_value(&hub).map_err(|e| ConversionError::new(e.to_string()));
        }
        let (_, from_hub) = self.spokes.get(desired).ok_or_else(|| unknown(desired))?;
        from_hub(hub)
    }
}

/// Answers a ConversionReview with the conversions registered, chosen by
/// each object's group and kind.
pub(crate) fn review(kinds: &[Arc<dyn ConvertKind>], body: &[u8]) -> (u16, Vec<u8>) {
    let review: ConversionReview = match serde_json::from_slice(body) {
        Ok(review) => review,
        Err(error) => {
            tracing::warn!(%error, "conversion request is not a ConversionReview");
            let response = ConversionResponse::invalid(Status::failure(
                &format!("the body is not a ConversionReview: {error}"),
                "BadRequest",
            ));
            return (400, encode(&response.into_review()));
        }
    };
    let request = match ConversionRequest::from_review(review) {
        Ok(request) => request,
        Err(error) => {
            let response =
                ConversionResponse::invalid(Status::failure(&error.to_string(), "BadRequest"));
            return (400, encode(&response.into_review()));
        }
    };
    let desired = request.desired_api_version.clone();
    let objects = request.objects.clone();
    let count = objects.len();
    let uid = request.uid.clone();
    let response = ConversionResponse::for_request(request);
    let response = match convert_all(kinds, objects, &desired) {
        Ok(converted) => response.success(converted),
        Err(error) => {
            tracing::warn!(%uid, desired, %error, "conversion failed");
            response.failure(Status::failure(&error.to_string(), "ConversionFailed"))
        }
    };
    tracing::debug!(%uid, desired, objects = count, "conversion reviewed");
    (200, encode(&response.into_review()))
}

fn convert_all(
    kinds: &[Arc<dyn ConvertKind>],
    objects: Vec<Value>,
    desired: &str,
) -> Result<Vec<Value>, ConversionError> {
    let desired_group = desired.rsplit_once('/').map_or("", |(group, _)| group);
    objects
        .into_iter()
        .map(|object| {
            let kind = object
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let converter = kinds
                .iter()
                .find(|k| k.kind() == kind && k.group() == desired_group)
                .ok_or_else(|| {
                    ConversionError::new(format!(
                        "this webhook converts no {kind} of group {desired_group:?}"
                    ))
                })?;
            converter.convert(object, desired)
        })
        .collect()
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}
