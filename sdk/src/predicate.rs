//! Predicates: which watch events enqueue a reconcile.
//!
//! A [`Predicate<K>`] sees the whole event, old and new objects included, so
//! it can look at any field of the kind it filters. The built-in predicates
//! compare metadata and work for every kind. Predicates belong to a watch
//! (`for_with`, `owns_with`, `watches_with` on the
//! [`Controller`](crate::controller::Controller)); a filter for every watch
//! of a controller is its [event filter](crate::controller::Controller::with_event_filter),
//! which sees objects as [`dyn HasMetadata`](HasMetadata).
//!
//! A resync is an update whose old and new objects are the same, so
//! predicates that compare old and new (generation, labels, ...) drop
//! resyncs.
//!
//! ```
//! use k8s_openapi::api::apps::v1::Deployment;
//! use opkit::predicate::{GenerationChanged, LabelsChanged, Predicate, PredicateEvent, PredicateExt};
//!
//! // Spec or label changes, but never for objects labelled `skip=true`.
//! let filter = GenerationChanged.or(LabelsChanged).and(|e: &PredicateEvent<'_, Deployment>| {
//!     e.meta().labels.as_ref().and_then(|l| l.get("skip")).map(String::as_str) != Some("true")
//! });
//!
//! // A predicate that needs the object: only when the ready replica count changed.
//! let readiness = |e: &PredicateEvent<'_, Deployment>| match e {
//!     PredicateEvent::Update { old, new } => {
//!         let ready = |d: &Deployment| d.status.as_ref().and_then(|s| s.ready_replicas);
//!         ready(old) != ready(new)
//!     }
//!     _ => true,
//! };
//! # fn takes<P: Predicate<Deployment>>(_: P) {}
//! # takes(filter);
//! # takes(readiness);
//! ```

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::core::{Selector, SelectorExt};

/// Any object with Kubernetes metadata. Every `kube::Resource` is one; a
/// controller's [event filter](crate::controller::Controller::with_event_filter)
/// sees objects of every watched kind as `dyn HasMetadata`.
pub trait HasMetadata {
    /// The object's metadata.
    fn metadata(&self) -> &ObjectMeta;
}

impl<K: Resource> HasMetadata for K {
    fn metadata(&self) -> &ObjectMeta {
        self.meta()
    }
}

/// A watch event, as predicates see it.
#[derive(Debug)]
pub enum PredicateEvent<'a, K: ?Sized> {
    /// An object appeared (also for every object of an initial list).
    Create(&'a K),
    /// An object changed; on a resync `old` and `new` are the same.
    Update {
        /// Before.
        old: &'a K,
        /// After.
        new: &'a K,
    },
    /// An object was deleted (its last known state).
    Delete(&'a K),
}

impl<K: ?Sized> Clone for PredicateEvent<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K: ?Sized> Copy for PredicateEvent<'_, K> {}

impl<'a, K: ?Sized> PredicateEvent<'a, K> {
    /// The object the event is about (the new one for updates).
    pub fn object(&self) -> &'a K {
        match *self {
            Self::Create(o) | Self::Delete(o) => o,
            Self::Update { new, .. } => new,
        }
    }
}

impl<'a, K: ?Sized + HasMetadata> PredicateEvent<'a, K> {
    /// The metadata of the object the event is about (the new one for updates).
    pub fn meta(&self) -> &'a ObjectMeta {
        self.object().metadata()
    }

    /// The same event, seen as `dyn HasMetadata` (what event filters see).
    pub(crate) fn erased(&self) -> PredicateEvent<'a, dyn HasMetadata>
    where
        K: Sized + 'static,
    {
        match *self {
            Self::Create(o) => PredicateEvent::Create(o),
            Self::Update { old, new } => PredicateEvent::Update { old, new },
            Self::Delete(o) => PredicateEvent::Delete(o),
        }
    }

    /// Old and new metadata of an update; `None` for creates and deletes.
    fn update_meta(&self) -> Option<(&'a ObjectMeta, &'a ObjectMeta)> {
        match *self {
            Self::Update { old, new } => Some((old.metadata(), new.metadata())),
            _ => None,
        }
    }
}

/// Decides whether a watch event on objects of kind `K` should enqueue a
/// reconcile. Closures `Fn(&PredicateEvent<'_, K>) -> bool` are predicates.
pub trait Predicate<K: ?Sized>: Send + Sync + 'static {
    /// `true` to let the event through.
    fn filter(&self, event: &PredicateEvent<'_, K>) -> bool;
}

impl<K: ?Sized, F> Predicate<K> for F
where
    F: Fn(&PredicateEvent<'_, K>) -> bool + Send + Sync + 'static,
{
    fn filter(&self, event: &PredicateEvent<'_, K>) -> bool {
        self(event)
    }
}

/// Lets updates through only when `metadata.generation` changed, i.e. the
/// spec changed (status and metadata writes do not bump it). Creates and
/// deletes pass.
#[derive(Debug, Clone, Copy, Default)]
pub struct GenerationChanged;

impl<K: ?Sized + HasMetadata> Predicate<K> for GenerationChanged {
    fn filter(&self, event: &PredicateEvent<'_, K>) -> bool {
        event
            .update_meta()
            .is_none_or(|(old, new)| old.generation != new.generation)
    }
}

/// Lets updates through only when `metadata.resourceVersion` changed: drops
/// resyncs and nothing else.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResourceVersionChanged;

impl<K: ?Sized + HasMetadata> Predicate<K> for ResourceVersionChanged {
    fn filter(&self, event: &PredicateEvent<'_, K>) -> bool {
        event
            .update_meta()
            .is_none_or(|(old, new)| old.resource_version != new.resource_version)
    }
}

/// Lets updates through only when the labels changed.
#[derive(Debug, Clone, Copy, Default)]
pub struct LabelsChanged;

impl<K: ?Sized + HasMetadata> Predicate<K> for LabelsChanged {
    fn filter(&self, event: &PredicateEvent<'_, K>) -> bool {
        event
            .update_meta()
            .is_none_or(|(old, new)| old.labels != new.labels)
    }
}

/// Lets updates through only when the annotations changed.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnnotationsChanged;

impl<K: ?Sized + HasMetadata> Predicate<K> for AnnotationsChanged {
    fn filter(&self, event: &PredicateEvent<'_, K>) -> bool {
        event
            .update_meta()
            .is_none_or(|(old, new)| old.annotations != new.annotations)
    }
}

/// Lets through events for objects whose labels match a selector (for an
/// update, the new object's labels).
///
/// ```
/// use kube::core::{Expression, Selector};
/// use opkit::predicate::LabelSelector;
///
/// let web = LabelSelector::new(Selector::from_iter([("app", "web")]));
/// let not_canary = LabelSelector::new(Expression::DoesNotExist("canary".into()).into());
/// # let _ = (web, not_canary);
/// ```
#[derive(Debug, Clone)]
pub struct LabelSelector(Selector);

impl LabelSelector {
    /// A predicate matching `selector`.
    pub fn new(selector: Selector) -> Self {
        Self(selector)
    }
}

impl<K: ?Sized + HasMetadata> Predicate<K> for LabelSelector {
    fn filter(&self, event: &PredicateEvent<'_, K>) -> bool {
        let empty = Default::default();
        self.0
            .matches(event.meta().labels.as_ref().unwrap_or(&empty))
    }
}

/// Both predicates must pass. Built by [`PredicateExt::and`].
#[derive(Debug, Clone)]
pub struct And<A, B>(A, B);

impl<K: ?Sized, A: Predicate<K>, B: Predicate<K>> Predicate<K> for And<A, B> {
    fn filter(&self, event: &PredicateEvent<'_, K>) -> bool {
        self.0.filter(event) && self.1.filter(event)
    }
}

/// Either predicate may pass. Built by [`PredicateExt::or`].
#[derive(Debug, Clone)]
pub struct Or<A, B>(A, B);

impl<K: ?Sized, A: Predicate<K>, B: Predicate<K>> Predicate<K> for Or<A, B> {
    fn filter(&self, event: &PredicateEvent<'_, K>) -> bool {
        self.0.filter(event) || self.1.filter(event)
    }
}

/// The predicate must fail. Built by [`PredicateExt::not`].
#[derive(Debug, Clone)]
pub struct Not<A>(A);

impl<K: ?Sized, A: Predicate<K>> Predicate<K> for Not<A> {
    fn filter(&self, event: &PredicateEvent<'_, K>) -> bool {
        !self.0.filter(event)
    }
}

/// Both predicates must pass: `and(a, b)` is `a.and(b)`, for predicates
/// without [`PredicateExt`] (a plain closure, say).
pub fn and<A, B>(a: A, b: B) -> And<A, B> {
    And(a, b)
}

/// Combinators for predicates (of any kind).
pub trait PredicateExt: Sized {
    /// Passes when both pass.
    fn and<B>(self, other: B) -> And<Self, B> {
        And(self, other)
    }
    /// Passes when either passes.
    fn or<B>(self, other: B) -> Or<Self, B> {
        Or(self, other)
    }
    /// Passes when `self` does not.
    fn not(self) -> Not<Self> {
        Not(self)
    }
}

impl PredicateExt for GenerationChanged {}
impl PredicateExt for ResourceVersionChanged {}
impl PredicateExt for LabelsChanged {}
impl PredicateExt for AnnotationsChanged {}
impl PredicateExt for LabelSelector {}
impl<A, B> PredicateExt for And<A, B> {}
impl<A, B> PredicateExt for Or<A, B> {}
impl<A> PredicateExt for Not<A> {}

/// A predicate from a closure. A plain closure is a predicate too; this one
/// also has the [`PredicateExt`] combinators.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use opkit::predicate::{GenerationChanged, PredicateEvent, PredicateExt, from_fn};
///
/// let has_data = from_fn(|e: &PredicateEvent<'_, ConfigMap>| e.object().data.is_some());
/// let filter = has_data.or(GenerationChanged);
/// # let _ = filter;
/// ```
pub fn from_fn<K: ?Sized, F>(f: F) -> FromFn<F>
where
    F: Fn(&PredicateEvent<'_, K>) -> bool + Send + Sync + 'static,
{
    FromFn(f)
}

/// A closure as a predicate. Built by [`from_fn`].
#[derive(Debug, Clone)]
pub struct FromFn<F>(F);

impl<K: ?Sized, F> Predicate<K> for FromFn<F>
where
    F: Fn(&PredicateEvent<'_, K>) -> bool + Send + Sync + 'static,
{
    fn filter(&self, event: &PredicateEvent<'_, K>) -> bool {
        (self.0)(event)
    }
}

impl<F> PredicateExt for FromFn<F> {}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
    use std::collections::BTreeMap;

    fn deployment(generation: i64, rv: &str, labels: &[(&str, &str)]) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                generation: Some(generation),
                resource_version: Some(rv.to_owned()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect::<BTreeMap<_, _>>(),
                ),
                ..ObjectMeta::default()
            },
            ..Deployment::default()
        }
    }

    fn update<'a>(old: &'a Deployment, new: &'a Deployment) -> PredicateEvent<'a, Deployment> {
        PredicateEvent::Update { old, new }
    }

    #[test]
    fn generation_changed() {
        let a = deployment(1, "10", &[]);
        let b = deployment(2, "11", &[]);
        let status_only = deployment(1, "12", &[]);
        assert!(GenerationChanged.filter(&update(&a, &b)));
        assert!(!GenerationChanged.filter(&update(&a, &status_only)));
        assert!(!GenerationChanged.filter(&update(&a, &a)), "resync dropped");
        assert!(GenerationChanged.filter(&PredicateEvent::Create(&a)));
        assert!(GenerationChanged.filter(&PredicateEvent::Delete(&a)));
    }

    #[test]
    fn resource_version_labels_annotations_changed() {
        let a = deployment(1, "10", &[("app", "web")]);
        let relabelled = deployment(1, "11", &[("app", "db")]);
        let touched = deployment(1, "11", &[("app", "web")]);
        assert!(ResourceVersionChanged.filter(&update(&a, &touched)));
        assert!(!ResourceVersionChanged.filter(&update(&a, &a)));
        assert!(LabelsChanged.filter(&update(&a, &relabelled)));
        assert!(!LabelsChanged.filter(&update(&a, &touched)));
        let mut annotated = touched.clone();
        annotated.metadata.annotations = Some([("note".to_owned(), "x".to_owned())].into());
        assert!(AnnotationsChanged.filter(&update(&a, &annotated)));
        assert!(!AnnotationsChanged.filter(&update(&a, &touched)));
    }

    #[test]
    fn label_selector_uses_the_new_object() {
        let web = LabelSelector::new(Selector::from_iter([("app", "web")]));
        let a = deployment(1, "1", &[("app", "web")]);
        let b = deployment(1, "2", &[("app", "db")]);
        assert!(web.filter(&PredicateEvent::Create(&a)));
        assert!(!web.filter(&PredicateEvent::Create(&b)));
        assert!(!web.filter(&update(&a, &b)));
        assert!(web.filter(&update(&b, &a)));
        let no_labels = Deployment::default();
        assert!(!web.filter(&PredicateEvent::Delete(&no_labels)));
    }

    #[test]
    fn combinators_and_closures() {
        let a = deployment(1, "1", &[("app", "web")]);
        let b = deployment(2, "2", &[("app", "web")]);
        let never = from_fn(|_: &PredicateEvent<'_, Deployment>| false);
        let always = |_: &PredicateEvent<'_, Deployment>| true;
        assert!(!GenerationChanged.and(never.clone()).filter(&update(&a, &b)));
        assert!(GenerationChanged.and(always).filter(&update(&a, &b)));
        assert!(never.or(GenerationChanged).filter(&update(&a, &b)));
        assert!(LabelsChanged.or(GenerationChanged).filter(&update(&a, &b)));
        assert!(
            !LabelsChanged
                .or(ResourceVersionChanged)
                .filter(&update(&a, &a))
        );
        assert!(<Not<GenerationChanged> as Predicate<Deployment>>::filter(
            &GenerationChanged.not(),
            &update(&a, &a)
        ));
    }

    #[test]
    fn predicates_can_read_the_object() {
        let ready = |n: i32| {
            let mut d = deployment(1, "1", &[]);
            d.status = Some(DeploymentStatus {
                ready_replicas: Some(n),
                ..DeploymentStatus::default()
            });
            d
        };
        let readiness_changed = |e: &PredicateEvent<'_, Deployment>| match e {
            PredicateEvent::Update { old, new } => {
                let r = |d: &Deployment| d.status.as_ref().and_then(|s| s.ready_replicas);
                r(old) != r(new)
            }
            _ => true,
        };
        let (one, two) = (ready(1), ready(2));
        assert!(readiness_changed.filter(&update(&one, &two)));
        assert!(!readiness_changed.filter(&update(&one, &one)));
        // Same generation: GenerationChanged alone would drop this status change.
        assert!(!GenerationChanged.filter(&update(&one, &two)));
    }

    #[test]
    fn event_filters_see_any_kind_through_its_metadata() {
        let a = deployment(1, "1", &[("app", "web")]);
        let b = deployment(2, "2", &[("app", "web")]);
        let typed = update(&a, &b);
        let erased: PredicateEvent<'_, dyn HasMetadata> = typed.erased();
        assert!(GenerationChanged.filter(&erased));
        assert_eq!(erased.meta().generation, Some(2));
        let web = LabelSelector::new(Selector::from_iter([("app", "web")]));
        assert!(web.filter(&erased));
    }
}
