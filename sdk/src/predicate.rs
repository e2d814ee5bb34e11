//! Predicates: which watch events enqueue a reconcile.
//!
//! A predicate looks at object metadata, so the same predicate works for any
//! kind and can filter every watch of a controller at once. A resync is an
//! update whose old and new objects are the same, so predicates that compare
//! old and new (generation, labels, ...) drop resyncs.
//!
//! ```
//! use opkit::predicate::{GenerationChanged, LabelsChanged, Predicate, PredicateExt, from_fn};
//!
//! // Reconcile on spec changes or label changes, but never for objects
//! // marked `skip=true`.
//! let filter = GenerationChanged
//!     .or(LabelsChanged)
//!     .and(from_fn(|e| {
//!         e.object().labels.as_ref().and_then(|l| l.get("skip")).map(String::as_str) != Some("true")
//!     }));
//! # let _ = filter;
//! ```

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{Selector, SelectorExt};

/// A watch event, as predicates see it.
#[derive(Debug, Clone, Copy)]
pub enum PredicateEvent<'a> {
    /// An object appeared (also for every object of an initial list).
    Create(&'a ObjectMeta),
    /// An object changed; on a resync `old` and `new` are the same.
    Update {
        /// Before.
        old: &'a ObjectMeta,
        /// After.
        new: &'a ObjectMeta,
    },
    /// An object was deleted (its last known state).
    Delete(&'a ObjectMeta),
}

impl<'a> PredicateEvent<'a> {
    /// The object the event is about (the new one for updates).
    pub fn object(&self) -> &'a ObjectMeta {
        match *self {
            Self::Create(m) | Self::Delete(m) => m,
            Self::Update { new, .. } => new,
        }
    }
}

/// Decides whether a watch event should enqueue a reconcile.
pub trait Predicate: Send + Sync + 'static {
    /// `true` to let the event through.
    fn filter(&self, event: &PredicateEvent<'_>) -> bool;
}

impl<F> Predicate for F
where
    F: Fn(&PredicateEvent<'_>) -> bool + Send + Sync + 'static,
{
    fn filter(&self, event: &PredicateEvent<'_>) -> bool {
        self(event)
    }
}

/// A predicate from a closure (a plain closure is a predicate too; this
/// helps type inference).
pub fn from_fn<F>(f: F) -> F
where
    F: Fn(&PredicateEvent<'_>) -> bool + Send + Sync + 'static,
{
    f
}

/// Lets updates through only when `metadata.generation` changed, i.e. the
/// spec changed (status and metadata writes do not bump it). Creates and
/// deletes pass.
#[derive(Debug, Clone, Copy, Default)]
pub struct GenerationChanged;

impl Predicate for GenerationChanged {
    fn filter(&self, event: &PredicateEvent<'_>) -> bool {
        match event {
            PredicateEvent::Update { old, new } => old.generation != new.generation,
            _ => true,
        }
    }
}

/// Lets updates through only when `metadata.resourceVersion` changed: drops
/// resyncs and nothing else.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResourceVersionChanged;

impl Predicate for ResourceVersionChanged {
    fn filter(&self, event: &PredicateEvent<'_>) -> bool {
        match event {
            PredicateEvent::Update { old, new } => old.resource_version != new.resource_version,
            _ => true,
        }
    }
}

/// Lets updates through only when the labels changed.
#[derive(Debug, Clone, Copy, Default)]
pub struct LabelsChanged;

impl Predicate for LabelsChanged {
    fn filter(&self, event: &PredicateEvent<'_>) -> bool {
        match event {
            PredicateEvent::Update { old, new } => old.labels != new.labels,
            _ => true,
        }
    }
}

/// Lets updates through only when the annotations changed.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnnotationsChanged;

impl Predicate for AnnotationsChanged {
    fn filter(&self, event: &PredicateEvent<'_>) -> bool {
        match event {
            PredicateEvent::Update { old, new } => old.annotations != new.annotations,
            _ => true,
        }
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

impl Predicate for LabelSelector {
    fn filter(&self, event: &PredicateEvent<'_>) -> bool {
        let empty = Default::default();
        self.0
            .matches(event.object().labels.as_ref().unwrap_or(&empty))
    }
}

/// Both predicates must pass. Built by [`PredicateExt::and`].
#[derive(Debug, Clone)]
pub struct And<A, B>(A, B);

impl<A: Predicate, B: Predicate> Predicate for And<A, B> {
    fn filter(&self, event: &PredicateEvent<'_>) -> bool {
        self.0.filter(event) && self.1.filter(event)
    }
}

/// Either predicate may pass. Built by [`PredicateExt::or`].
#[derive(Debug, Clone)]
pub struct Or<A, B>(A, B);

impl<A: Predicate, B: Predicate> Predicate for Or<A, B> {
    fn filter(&self, event: &PredicateEvent<'_>) -> bool {
        self.0.filter(event) || self.1.filter(event)
    }
}

/// The predicate must fail. Built by [`PredicateExt::not`].
#[derive(Debug, Clone)]
pub struct Not<A>(A);

impl<A: Predicate> Predicate for Not<A> {
    fn filter(&self, event: &PredicateEvent<'_>) -> bool {
        !self.0.filter(event)
    }
}

/// Combinators for every [`Predicate`].
pub trait PredicateExt: Predicate + Sized {
    /// Passes when both pass.
    fn and<B: Predicate>(self, other: B) -> And<Self, B> {
        And(self, other)
    }
    /// Passes when either passes.
    fn or<B: Predicate>(self, other: B) -> Or<Self, B> {
        Or(self, other)
    }
    /// Passes when `self` does not.
    fn not(self) -> Not<Self> {
        Not(self)
    }
}

impl<P: Predicate> PredicateExt for P {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn meta(generation: i64, rv: &str, labels: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            generation: Some(generation),
            resource_version: Some(rv.to_owned()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..ObjectMeta::default()
        }
    }

    fn update<'a>(old: &'a ObjectMeta, new: &'a ObjectMeta) -> PredicateEvent<'a> {
        PredicateEvent::Update { old, new }
    }

    #[test]
    fn generation_changed() {
        let a = meta(1, "10", &[]);
        let b = meta(2, "11", &[]);
        let status_only = meta(1, "12", &[]);
        assert!(GenerationChanged.filter(&update(&a, &b)));
        assert!(!GenerationChanged.filter(&update(&a, &status_only)));
        assert!(!GenerationChanged.filter(&update(&a, &a)), "resync dropped");
        assert!(GenerationChanged.filter(&PredicateEvent::Create(&a)));
        assert!(GenerationChanged.filter(&PredicateEvent::Delete(&a)));
    }

    #[test]
    fn resource_version_labels_annotations_changed() {
        let a = meta(1, "10", &[("app", "web")]);
        let relabelled = meta(1, "11", &[("app", "db")]);
        let touched = meta(1, "11", &[("app", "web")]);
        assert!(ResourceVersionChanged.filter(&update(&a, &touched)));
        assert!(!ResourceVersionChanged.filter(&update(&a, &a)));
        assert!(LabelsChanged.filter(&update(&a, &relabelled)));
        assert!(!LabelsChanged.filter(&update(&a, &touched)));
        let mut annotated = touched.clone();
        annotated.annotations = Some([("note".to_owned(), "x".to_owned())].into());
        assert!(AnnotationsChanged.filter(&update(&a, &annotated)));
        assert!(!AnnotationsChanged.filter(&update(&a, &touched)));
    }

    #[test]
    fn label_selector_uses_the_new_object() {
        let web = LabelSelector::new(Selector::from_iter([("app", "web")]));
        let a = meta(1, "1", &[("app", "web")]);
        let b = meta(1, "2", &[("app", "db")]);
        assert!(web.filter(&PredicateEvent::Create(&a)));
        assert!(!web.filter(&PredicateEvent::Create(&b)));
        assert!(!web.filter(&update(&a, &b)));
        assert!(web.filter(&update(&b, &a)));
        let no_labels = ObjectMeta::default();
        assert!(!web.filter(&PredicateEvent::Delete(&no_labels)));
    }

    #[test]
    fn combinators_and_closures() {
        let a = meta(1, "1", &[("app", "web")]);
        let b = meta(2, "2", &[("app", "web")]);
        let never = from_fn(|_| false);
        let always = from_fn(|_| true);
        assert!(!GenerationChanged.and(never).filter(&update(&a, &b)));
        assert!(GenerationChanged.and(always).filter(&update(&a, &b)));
        assert!(LabelsChanged.or(GenerationChanged).filter(&update(&a, &b)));
        assert!(
            !LabelsChanged
                .or(ResourceVersionChanged)
                .filter(&update(&a, &a))
        );
        assert!(GenerationChanged.not().filter(&update(&a, &a)));
    }
}
