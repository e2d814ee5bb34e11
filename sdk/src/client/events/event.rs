//! [`Event`]: one occurrence's fields, as the recorder publishes it.

use k8s_openapi::api::core::v1::ObjectReference;

/// Whether an event is routine or needs attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum EventType {
    /// Something expected happened (`type: Normal`).
    Normal,
    /// Something may need attention (`type: Warning`).
    Warning,
}

impl EventType {
    /// The value of the Event's `type` field.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

/// One event about an object, as [`EventRecorder::normal`] and
/// [`EventRecorder::warning`] publish it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    /// Normal or Warning.
    pub(crate) type_: EventType,
    /// Why the action was taken, UpperCamelCase (e.g. `InvalidSize`); at
    /// most 128 bytes (longer is cut).
    pub(crate) reason: String,
    /// What the controller did or failed to do (e.g. `Reconciling`,
    /// `Scaling`); at most 128 bytes (longer is cut).
    pub(crate) action: String,
    /// A human-readable description; at most 1 KiB (longer is cut).
    pub(crate) note: Option<String>,
    /// A second object involved (e.g. the Pod a Deployment scaled).
    pub(crate) related: Option<ObjectReference>,
}

impl Event {
    /// An event with a type, reason and action, without note or related object.
    pub(crate) fn new(
        type_: EventType,
        reason: impl Into<String>,
        action: impl Into<String>,
    ) -> Self {
        Self {
            type_,
            reason: reason.into(),
            action: action.into(),
            note: None,
            related: None,
        }
    }

    /// Sets the note.
    pub(crate) fn note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }
}
