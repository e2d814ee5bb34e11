//! Kubernetes Events (`events.k8s.io/v1`) about the objects a controller
//! manages, with repeats folded into one Event's `series`.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use opkit::client::{Event, EventRecorder, EventType};
//!
//! # async fn example(client: kube::Client, cm: ConfigMap) -> Result<(), opkit::client::EventError> {
//! let recorder = EventRecorder::builder(client, "cache.example.com/memcached-controller")
//!     .reporting_instance("memcached-operator-7d9f-x2x")
//!     .build()?;
//! recorder.warning(&cm, "InvalidSize", "Reconciling", "size must be between 1 and 10");
//! recorder.publish(
//!     &cm,
//!     Event::new(EventType::Normal, "Scaled", "Scaling").note("scaled to 3 replicas"),
//! );
//! recorder.flush().await; // only needed to observe the Events right away (tests)
//! # Ok(()) }
//! ```
//!
//! # Repeats
//!
//! Publishing returns at once: a background task writes the Events. An
//! event equal to one published within the *series window* (default 6
//! minutes, client-go's) — same object (`regarding`), `related`, type,
//! reason, action and note — does not create a new Event: the existing
//! one's `series` is updated instead. `series.count` is the number of
//! occurrences including the first (the first write has no `series`, the
//! second sets `count: 2`, as client-go does), and `series.lastObservedTime`
//! the time of the latest. Bursts are coalesced: five identical events
//! published at once cost one create and at most one patch.
//!
//! Failures to write are logged with `tracing` and never reach the caller; an
//! event published while 1000 are waiting to be written is dropped (logged).
//!
//! # RBAC
//!
//! `create` and `patch` on `events` in API group `events.k8s.io`, in the
//! namespaces of the objects (`default` for cluster-scoped ones).

mod recorder;
mod series;

pub use recorder::{DEFAULT_SERIES_WINDOW, EventRecorder, EventRecorderBuilder};

use k8s_openapi::api::core::v1::ObjectReference;

/// Whether an event is routine or needs attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something expected happened (`type: Normal`).
    Normal,
    /// Something may need attention (`type: Warning`).
    Warning,
}

impl EventType {
    /// The value of the Event's `type` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

/// One event about an object, to [`publish`](EventRecorder::publish).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Normal or Warning.
    pub type_: EventType,
    /// Why the action was taken, UpperCamelCase (e.g. `InvalidSize`); at
    /// most 128 bytes (longer is cut).
    pub reason: String,
    /// What the controller did or failed to do (e.g. `Reconciling`,
    /// `Scaling`); at most 128 bytes (longer is cut).
    pub action: String,
    /// A human-readable description; at most 1 KiB (longer is cut).
    pub note: Option<String>,
    /// A second object involved (e.g. the Pod a Deployment scaled).
    pub related: Option<ObjectReference>,
}

impl Event {
    /// An event with a type, reason and action, without note or related object.
    pub fn new(type_: EventType, reason: impl Into<String>, action: impl Into<String>) -> Self {
        Self {
            type_,
            reason: reason.into(),
            action: action.into(),
            note: None,
            related: None,
        }
    }

    /// Sets the note.
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }

    /// Sets the related object.
    pub fn related(mut self, related: ObjectReference) -> Self {
        self.related = Some(related);
        self
    }
}
