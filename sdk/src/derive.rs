//! `#[derive(Controller)]`: declare a controller's watches on the
//! reconciler type, and get both its wiring and its RBAC rules from that
//! one declaration.
//!
//! ```
//! use k8s_openapi::api::apps::v1::Deployment;
//! use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
//! use kube::CustomResource;
//! use opkit::cache::Store;
//! use opkit::predicate::GenerationChanged;
//! use opkit::rbac::Verb;
//! use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
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
//! /// The ConfigMap a Memcached names: its index values.
//! fn settings_of(m: &Memcached) -> Vec<String> {
//!     m.spec.settings.iter().cloned().collect()
//! }
//!
//! /// A Secret change wakes the Memcached of the same name (a mapper gets
//! /// the primary kind's store, typed).
//! fn same_name(secret: &Secret, memcacheds: &Store<Memcached>) -> Vec<Request> {
//!     let name = secret.metadata.name.as_deref().unwrap_or_default();
//!     memcacheds
//!         .get(secret.metadata.namespace.as_deref(), name)
//!         .and_then(|m| Request::for_object(&*m))
//!         .into_iter()
//!         .collect()
//! }
//!
//! #[derive(Controller)]
//! #[controller(
//!     for(Memcached, predicates(GenerationChanged)),
//!     owns(Deployment, Service),
//!     index(Memcached, "settings", settings_of),
//!     // a ConfigMap change wakes every Memcached whose "settings" index lists it
//!     watches(ConfigMap, by_index = "settings"),
//!     watches(Secret, map = same_name),
//!     rbac(create, update, patch, delete on Deployment, Service),
//!     status,
//!     finalizer,
//!     events,
//!     max_concurrent_reconciles = 2,
//! )]
//! pub struct MemcachedReconciler;
//!
//! impl Reconcile for MemcachedReconciler {
//!     type Object = Memcached; // must be the `for` kind: a mismatch does not compile
//!
//!     async fn reconcile(&self, _req: Request, _ctx: &Context<Memcached>) -> Result<Action, ReconcileError> {
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
//! // Least privilege: nothing the declaration did not ask for.
//! # #[derive(Controller)]
//! # #[controller(for = Memcached)]
//! # struct ReadOnly;
//! # impl Reconcile for ReadOnly {
//! #     type Object = Memcached;
//! #     async fn reconcile(&self, _: Request, _: &Context<Memcached>) -> Result<Action, ReconcileError> { Ok(Action::done()) }
//! # }
//! let read_only = ReadOnly::rbac_rules(); // #[controller(for = Memcached)]
//! assert!(!read_only.permits("cache.example.com", "memcacheds/status", Verb::Patch));
//! assert!(!read_only.permits("cache.example.com", "memcacheds/finalizers", Verb::Update));
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
//! | `for = Kind` (required; the reconciler's [`Reconcile::Object`], checked at compile time) | [`Controller::new`] | `get`, `list`, `watch` on the kind (and `update` on its `finalizers` when it owns children: what setting `blockOwnerDeletion` in their controller reference needs) |
//! | `for(Kind, predicates(p, ..))` | [`Controller::with_predicate`]: only events passing every `p` | as `for = Kind` |
//! | `owns(Kind, ..)` | [`owns::<Kind>()`](Controller::owns): a change wakes the controller-owner; whole objects cached | `get`, `list`, `watch` |
//! | `owns(Kind, .., metadata)` | [`owns_metadata::<Kind>()`](Controller::owns_metadata): only metadata cached (`PartialObjectMeta<Kind>`) | `get`, `list`, `watch` |
//! | `owns(Kind, project = View)` | [`owns_projected::<Kind, View>()`](Controller::owns_projected): each object cached as its projection (`Projected<Kind, View>`, see [`Projection`](crate::cache::Projection)), mapped once per event | `get`, `list`, `watch` |
//! | `owns(Kind, .., predicates(p, ..))` | [`owns_with`](Controller::owns_with) (or [`owns_metadata_with`](Controller::owns_metadata_with)) | `get`, `list`, `watch` |
//! | `watches(Kind, map = f)` | [`watches::<Kind>`](Controller::watches) with `f(&Kind, &Store<Primary>) -> Vec<Request>` | `get`, `list`, `watch` |
//! | `watches(Kind, by_index = "name")` | [`watches_by_index::<Kind>("name")`](Controller::watches_by_index): the primaries in the changed object's namespace (any, when one kind is cluster-scoped) whose index lists its name; for a reference across namespaces, use `map = f` with [`Store::by_index`](crate::cache::Store::by_index) | `get`, `list`, `watch` |
//! | `watches(Kind, map = f, predicates(p, ..))` (or `by_index = ..`) | [`watches_with`](Controller::watches_with) ([`watches_by_index_with`](Controller::watches_by_index_with)) | `get`, `list`, `watch` |
//! | `index(Kind, "name", f)` | [`index::<Kind>("name", f)`](Controller::index) with `f(&Kind) -> Vec<String>`; read with [`Context::by_index`](crate::reconcile::Context::by_index), or in a mapper with [`Store::by_index`](crate::cache::Store::by_index) on the primary kind's store | — (the kind must be watched or read) |
//! | `reads(Kind, ..)` | [`reads::<Kind>()`](Controller::reads): cached and synced before the first reconcile, no reconcile on change | `get`, `list`, `watch` |
//! | `event_filter(p, ..)` | [`with_event_filter(p)`](Controller::with_event_filter) for each: every watch | — |
//! | `rbac(verb, .. on Target, ..)` | — | the verbs on each target |
//! | `status` | — | `get`, `update`, `patch` on the primary kind's `status` (writing it) |
//! | `finalizer` | — | `update`, `patch` on the primary kind and `update` on its `finalizers` (adding and removing a finalizer) |
//! | `events` | — | `create`, `patch` on `events.k8s.io` `events` (what [`Context::recorder`](crate::reconcile::Context::recorder) writes) |
//! | `name = "..."` | [`name`](Controller::name) (default: the kind, lower case) | — |
//! | `field_manager = "..."` | [`field_manager`](Controller::field_manager) of [`Context::apply`](crate::reconcile::Context::apply) (default: the name) | — |
//! | `max_concurrent_reconciles = N` | [`max_concurrent_reconciles`](Controller::max_concurrent_reconciles) | — |
//! | `throttle(per_second = N, burst = N)` | [`throttle(Quota::per_second(N).burst(N))`](Controller::throttle) | — |
//! | `multicluster` (feature `multicluster`) | `multicluster()`: the controller runs in every cluster of the manager's cluster provider (see `opkit::multicluster`); the reconciler does not change | — (the rules are what each member's credentials must allow) |
//! | `watches_hub(Kind, map = f)` (feature `multicluster`; with `multicluster` only) | `watches_hub::<Kind>(f)` with `f(&Kind) -> Vec<ClusterRequest>`: hub objects mapped to requests, each queued in the member it names (every hub object mapped again when a member is engaged) | `get`, `list`, `watch` (in the hub) |
//! | `watches_members(Kind, map = f)` (feature `multicluster`; without `multicluster` only) | `watches_members::<Kind>(f)` with `f(&ClusterName, &Kind) -> Vec<Request>`: on a hub controller, the objects of every engaged member mapped (with the member's name) to its own requests | `get`, `list`, `watch` (what each member's credentials must allow) |
//!
//! Predicates belong to the watch they are written in (several are all
//! required); `event_filter` applies to every watch and sees objects as
//! [`dyn HasMetadata`](crate::predicate::HasMetadata). Options of an
//! `owns(..)` clause apply to every kind in it: repeat `owns(..)` for kinds
//! with different options.
//!
//! A mapper is a function path or a closure: `map = |cm, store| ...` gets
//! its argument types from the watched and the primary kind (see
//! [`mapper`]); it has the same signature as the builder's
//! [`Controller::watches`]. It runs on the
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
//! Others: no `for`, `for` twice, `watches(Kind)` without `map = f`,
//! `watches_hub(..)` without `multicluster` (or `watches_members(..)` with
//! it), a
//! mapper of the wrong signature, a kind that is not a `kube::Resource`,
//! a reconciler that does not implement [`Reconcile`],
//! `max_concurrent_reconciles = 0`. The UI tests in `tests/ui/` show each
//! message.

use crate::cache::Store;
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

/// Support for the code `#[derive(Controller)]` generates, not an API to
/// call (hidden from the docs): checks that `map` is a mapper of `K`
/// objects for a controller of `P`:
/// what the code generated for `watches(Kind, map = f)` passes `f`
/// through, so a closure gets its argument types from `Kind` and the
/// primary kind, and a wrong signature is reported at `f`.
///
/// ```
/// use k8s_openapi::api::apps::v1::Deployment;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use opkit::reconcile::Request;
///
/// let map = opkit::derive::mapper::<ConfigMap, Deployment, _>(|cm, deployments| {
///     let name = cm.metadata.name.as_deref().unwrap_or_default();
///     deployments
///         .get(cm.metadata.namespace.as_deref(), name)
///         .and_then(|d| Request::for_object(&*d))
///         .into_iter()
///         .collect()
/// });
/// # let _ = map;
/// ```
#[doc(hidden)]
pub fn mapper<K, P, F>(map: F) -> F
where
    F: Fn(&K, &Store<P>) -> Vec<Request> + Send + Sync + 'static,
{
    map
}

/// Support for the derive's generated code (hidden from the docs): checks
/// that `values` is an index function of `K` objects: what the
/// code generated for `index(Kind, "name", f)` passes `f` through.
#[doc(hidden)]
pub fn index_values<K, F>(values: F) -> F
where
    F: Fn(&K) -> Vec<String> + Send + Sync + 'static,
{
    values
}

/// Support for the derive's generated code (hidden from the docs):
/// compiles only if `R`'s [`Reconcile::Object`] is `K`: what the code
/// generated for `#[controller(for = K)]` calls, so a `for` kind that
/// disagrees with the reconciler's kind is a compile error at `K`.
#[doc(hidden)]
pub fn primary_kind_is<R, K>()
where
    R: Reconcile<Object = K>,
{
}
