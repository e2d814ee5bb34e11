//! `#[derive(Controller)]`: declare a controller's watches on the
//! reconciler type, and get both its wiring and its RBAC rules from that
//! one declaration.
//!
//! ```
//! use k8s_openapi::api::apps::v1::Deployment;
//! use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
//! use kube::CustomResource;
//! use opkit::cache::SharedCache;
//! use opkit::predicate::GenerationChanged;
//! use opkit::rbac::Verb;
//! use opkit::reconcile::{Action, Context, Error, Reconcile, Request};
//! use opkit::{Controller, ControllerWiring};
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
//! #[kube(group = "cache.example.com", version = "v1alpha1", kind = "Memcached", namespaced)]
//! pub struct MemcachedSpec {
//!     pub size: i32,
//!     /// A ConfigMap with extra settings, in the same namespace.
//!     pub settings: Option<String>,
//! }
//!
//! /// A ConfigMap change wakes every Memcached that names it.
//! fn by_settings(cm: &ConfigMap, cache: &SharedCache) -> Vec<Request> {
//!     let namespace = cm.metadata.namespace.as_deref();
//!     cache
//!         .list::<Memcached>(namespace)
//!         .unwrap_or_default()
//!         .iter()
//!         .filter(|m| m.spec.settings.is_some() && m.spec.settings == cm.metadata.name)
//!         .filter_map(|m| Request::for_object(&**m))
//!         .collect()
//! }
//!
//! #[derive(Controller)]
//! #[controller(
//!     for(Memcached, predicates(GenerationChanged)),
//!     owns(Deployment, Service),
//!     watches(ConfigMap, map = by_settings),
//!     reads(Secret),
//!     rbac(create, update, patch, delete on Deployment, Service),
//!     finalizer,
//!     events,
//!     max_concurrent_reconciles = 2,
//! )]
//! pub struct MemcachedReconciler;
//!
//! impl Reconcile for MemcachedReconciler {
//!     async fn reconcile(&self, _req: Request, _ctx: &Context) -> Result<Action, Error> {
//!         Ok(Action::done())
//!     }
//! }
//!
//! // The RBAC rules follow from the declaration:
//! let rules = MemcachedReconciler::rbac_rules();
//! assert!(rules.permits("cache.example.com", "memcacheds", Verb::Watch));
//! assert!(rules.permits("cache.example.com", "memcacheds/status", Verb::Patch));
//! assert!(rules.permits("apps", "deployments", Verb::Delete));
//! assert!(rules.permits("", "configmaps", Verb::List));
//! assert!(rules.permits("", "secrets", Verb::Watch));
//! assert!(!rules.permits("", "configmaps", Verb::Patch));
//!
//! // ... and so does the wiring, e.g. `MemcachedReconciler.add_to(&mut manager)?`:
//! # async fn wire(manager: &mut opkit::manager::Manager) -> Result<(), opkit::manager::ManagerError> {
//! MemcachedReconciler.add_to(manager)?;
//! # Ok(()) }
//! ```
//!
//! # Options
//!
//! `#[controller(...)]` may be split over several attributes. Kinds are
//! Rust types implementing `kube::Resource` (k8s-openapi types, or your
//! own from `#[derive(CustomResource)]`).
//!
//! | option | wiring ([`Controller`] method) | RBAC rules |
//! |---|---|---|
//! | `for = Kind` (required) | [`Controller::for_::<Kind>`] | `get`, `list`, `watch` on the kind; `get`, `update`, `patch` on its `status`; `update` on its `finalizers` (what setting `blockOwnerDeletion` in owner references needs) |
//! | `for(Kind, predicates(p, ..))` | [`Controller::for_with::<Kind>`]: only events passing every `p` | as `for = Kind` |
//! | `owns(Kind, ..)` | [`owns::<Kind>()`](Controller::owns): a change wakes the controller-owner; whole objects cached | `get`, `list`, `watch` |
//! | `owns(Kind, .., metadata)` | [`owns_metadata::<Kind>()`](Controller::owns_metadata): only metadata cached (`PartialObjectMeta<Kind>`) | `get`, `list`, `watch` |
//! | `owns(Kind, .., predicates(p, ..))` | [`owns_with`](Controller::owns_with) (or [`owns_metadata_with`](Controller::owns_metadata_with)) | `get`, `list`, `watch` |
//! | `watches(Kind, map = f)` | [`watches::<Kind>`](Controller::watches) with `f(&Kind, &SharedCache) -> Vec<Request>` | `get`, `list`, `watch` |
//! | `watches(Kind, map = f, predicates(p, ..))` | [`watches_with`](Controller::watches_with) | `get`, `list`, `watch` |
//! | `reads(Kind, ..)` | [`reads::<Kind>()`](Controller::reads): cached and synced before the first reconcile, no reconcile on change | `get`, `list`, `watch` |
//! | `event_filter(p, ..)` | [`with_event_filter(p)`](Controller::with_event_filter) for each: every watch | — |
//! | `rbac(verb, .. on Target, ..)` | — | the verbs on each target |
//! | `finalizer` | — | `update`, `patch` on the primary kind (adding and removing a finalizer) |
//! | `events` | — | `create`, `patch` on `events.k8s.io` `events` (what [`Context::recorder`](crate::reconcile::Context::recorder) writes) |
//! | `name = "..."` | [`name`](Controller::name) (default: the kind, lower case) | — |
//! | `max_concurrent_reconciles = N` | [`max_concurrent_reconciles`](Controller::max_concurrent_reconciles) | — |
//! | `throttle(per_second = N, burst = N)` | [`throttle(Quota::per_second(N).burst(N))`](Controller::throttle) | — |
//!
//! Predicates belong to the watch they are written in (several are all
//! required); `event_filter` applies to every watch and sees objects as
//! [`dyn HasMetadata`](crate::predicate::HasMetadata). Options of an
//! `owns(..)` clause apply to every kind in it: repeat `owns(..)` for kinds
//! with different options.
//!
//! A mapper is a function path or a closure: `map = |cm, cache| ...` gets
//! its argument types from the watched kind (see [`mapper`]); it has the
//! same signature as the builder's [`Controller::watches`]. It runs on the
//! cache's event path, so it should only read the cache, never call the
//! apiserver.
//!
//! In `rbac(...)`, verbs are RBAC's (`get`, `list`, `watch`, `create`,
//! `update`, `patch`, `delete`, `deletecollection`) and a target is a kind
//! or a string in kubectl's notation, `"resource[.group][/subresource]"`:
//! `rbac(get on "pods/log")`, `rbac(update on "deployments.apps/scale")`.
//! Repeat `rbac(...)` for different verb sets.
//!
//! A string is checked at compile time against the resources Kubernetes
//! serves out of the box (v1.36: every k8s-openapi kind, with `/status`,
//! `/finalizers` and the known subresources such as `pods/log`,
//! `deployments.apps/scale`, `serviceaccounts/token`); a typo is an error
//! with a did-you-mean (`"deploymnets.apps"` → `"deployments.apps"`).
//! Name your own kinds by their type (`on Memcached`), which is checked by
//! the compiler. For a resource unknown at build time — another
//! operator's CRD, an aggregated API — write `unchecked("...")`, taken as
//! written: `rbac(get, list on unchecked("widgets.example.com"))`.
//!
//! What the *manager* needs is not part of a controller:
//! [`Rules::leader_election`](crate::rbac::Rules::leader_election) adds the
//! Lease rules when leader election is on. An operator merges the rules of
//! all its controllers and renders them with
//! [`Rules::cluster_role`](crate::rbac::Rules::cluster_role) (what
//! `cargo opkit manifests` writes to `deploy/`).
//!
//! # Mistakes
//!
//! Misuse is a compile error pointing at the offending tokens:
//!
//! ```compile_fail
//! # use opkit::Controller;
//! # use k8s_openapi::api::core::v1::ConfigMap;
//! #[derive(Controller)]
//! #[controller(fro = ConfigMap)] // error: unknown controller option `fro`; expected one of ...
//! struct Typo;
//! ```
//!
//! ```compile_fail
//! # use opkit::Controller;
//! # use k8s_openapi::api::core::v1::ConfigMap;
//! #[derive(Controller)]
//! #[controller(for = ConfigMap, rbac(destroy on ConfigMap))] // error: unknown RBAC verb `destroy`
//! struct BadVerb;
//! ```
//!
//! ```compile_fail
//! # use opkit::Controller;
//! # use k8s_openapi::api::core::v1::ConfigMap;
//! #[derive(Controller)]
//! #[controller(for = ConfigMap, rbac(get on "deploymnets.apps"))] // error: unknown resource "deploymnets.apps": ... did you mean "deployments.apps"?
//! struct Misspelt;
//! ```
//!
//! Others: no `for`, `for` twice, `watches(Kind)` without `map = f`, a
//! mapper of the wrong signature, a kind that is not a `kube::Resource`,
//! a reconciler that does not implement [`Reconcile`],
//! `max_concurrent_reconciles = 0`. The UI tests in `tests/ui/` show each
//! message.

use crate::cache::SharedCache;
use crate::controller::Controller;
use crate::manager::{Manager, ManagerError};
use crate::rbac::Rules;
use crate::reconcile::{Reconcile, Request};

/// A reconciler whose controller is declared with `#[derive(Controller)]`:
/// it builds its [`Controller`] and knows the RBAC rules that controller
/// needs. See the [module docs](self).
pub trait ControllerWiring: Reconcile + Sized {
    /// The controller as declared.
    fn controller(self) -> Controller<Self>;

    /// The RBAC rules the declared controller needs.
    fn rbac_rules() -> Rules;

    /// Adds the declared controller to `manager`.
    fn add_to(self, manager: &mut Manager) -> Result<(), ManagerError> {
        manager.add(self.controller())
    }
}

/// Checks that `map` is a mapper of `K` objects: what the code generated
/// for `watches(Kind, map = f)` passes `f` through, so a closure gets its
/// argument types from `Kind` and a wrong signature is reported at `f`.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use opkit::reconcile::Request;
///
/// let map = opkit::derive::mapper::<ConfigMap, _>(|cm, _cache| {
///     Request::for_object(cm).into_iter().collect()
/// });
/// # let _ = map;
/// ```
pub fn mapper<K, F>(map: F) -> F
where
    F: Fn(&K, &SharedCache) -> Vec<Request> + Send + Sync + 'static,
{
    map
}
