//! Status conditions (`metav1.Condition`), as operators report them:
//! `Available`, `Progressing`, `Degraded`, ...
//!
//! Use k8s-openapi's [`Condition`] in a custom resource's status, with
//! [`schema`] for its OpenAPI schema, and [`set`] to update the list the way
//! apimachinery's `meta.SetStatusCondition` does: `lastTransitionTime`
//! changes only when the status does.
//!
//! ```
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
//! use opkit::conditions::{self, ConditionStatus};
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
//! pub struct WebStatus {
//!     #[serde(default, skip_serializing_if = "Vec::is_empty")]
//!     #[schemars(schema_with = "opkit::conditions::schema")]
//!     pub conditions: Vec<Condition>,
//! }
//!
//! let mut status = WebStatus::default();
//! let changed = conditions::set(
//!     &mut status.conditions,
//!     conditions::new("Available", ConditionStatus::True, "Ready", "3/3 replicas available")
//!         .observed_generation(Some(2)),
//! );
//! assert!(changed);
//! assert!(conditions::is_true(&status.conditions, "Available"));
//! ```

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// A condition's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionStatus {
    /// `"True"`.
    True,
    /// `"False"`.
    False,
    /// `"Unknown"`.
    Unknown,
}

impl ConditionStatus {
    /// As the API spells it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

/// A condition being built by [`new`]; becomes a [`Condition`] in [`set`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCondition {
    type_: String,
    status: ConditionStatus,
    reason: String,
    message: String,
    observed_generation: Option<i64>,
}

impl NewCondition {
    /// The `metadata.generation` the condition was computed from.
    pub fn observed_generation(mut self, generation: Option<i64>) -> Self {
        self.observed_generation = generation;
        self
    }

    fn into_condition_at(self, now: Timestamp) -> Condition {
        Condition {
            type_: self.type_,
            status: self.status.as_str().to_owned(),
            reason: self.reason,
            message: self.message,
            observed_generation: self.observed_generation,
            last_transition_time: Time(now),
        }
    }
}

/// A condition of `type_` with `status`, a CamelCase `reason` and a
/// human-readable `message`.
pub fn new(
    type_: impl Into<String>,
    status: ConditionStatus,
    reason: impl Into<String>,
    message: impl Into<String>,
) -> NewCondition {
    NewCondition {
        type_: type_.into(),
        status,
        reason: reason.into(),
        message: message.into(),
        observed_generation: None,
    }
}

/// Sets the condition of `new`'s type in `conditions`: added if absent;
/// otherwise updated, keeping `lastTransitionTime` unless the status
/// changed. Returns whether anything changed (write the status only then).
pub fn set(conditions: &mut Vec<Condition>, new: NewCondition) -> bool {
    set_at(conditions, new, Timestamp::now())
}

/// [`set`] with the time a transition is stamped with.
fn set_at(conditions: &mut Vec<Condition>, new: NewCondition, now: Timestamp) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        None => {
            conditions.push(new.into_condition_at(now));
            true
        }
        Some(existing) => {
            let mut changed = false;
            if existing.status != new.status.as_str() {
                existing.status = new.status.as_str().to_owned();
                existing.last_transition_time = Time(now);
                changed = true;
            }
            if existing.reason != new.reason {
                existing.reason = new.reason;
                changed = true;
            }
            if existing.message != new.message {
                existing.message = new.message;
                changed = true;
            }
            if existing.observed_generation != new.observed_generation {
                existing.observed_generation = new.observed_generation;
                changed = true;
            }
            changed
        }
    }
}

/// The condition of `type_`, if present.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of `type_` is present with status `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == "True")
}

/// The OpenAPI schema of a list of conditions (a list map keyed by
/// `type`), for `#[schemars(schema_with = "opkit::conditions::schema")]`
/// on a `Vec<Condition>` field of a custom resource's status.
pub fn schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "description": "The latest observations of the object's state.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["type", "status", "lastTransitionTime", "reason", "message"],
            "properties": {
                "type": {
                    "type": "string",
                    "description": "The condition's type, CamelCase (Available, Progressing, Degraded).",
                    "maxLength": 316
                },
                "status": {
                    "type": "string",
                    "enum": ["True", "False", "Unknown"]
                },
                "observedGeneration": {
                    "type": "integer",
                    "format": "int64",
                    "minimum": 0
                },
                "lastTransitionTime": {
                    "type": "string",
                    "format": "date-time"
                },
                "reason": {
                    "type": "string",
                    "description": "Why the condition last changed, CamelCase.",
                    "maxLength": 1024
                },
                "message": {
                    "type": "string",
                    "maxLength": 32768
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_with_the_status() {
        let t0 = Timestamp::from_second(1_700_000_000).unwrap();
        let t1 = Timestamp::from_second(1_700_000_060).unwrap();
        let t2 = Timestamp::from_second(1_700_000_120).unwrap();
        let mut list = Vec::new();
        assert!(set_at(
            &mut list,
            new("Available", ConditionStatus::False, "Scaling", "0/3"),
            t0
        ));
        let first = list[0].last_transition_time.clone();
        assert_eq!(first, Time(t0));
        assert!(!set_at(
            &mut list,
            new("Available", ConditionStatus::False, "Scaling", "0/3"),
            t1
        ));
        assert!(set_at(
            &mut list,
            new("Available", ConditionStatus::False, "Scaling", "1/3"),
            t1
        ));
        assert_eq!(
            list[0].last_transition_time, first,
            "same status: time kept"
        );
        assert!(set_at(
            &mut list,
            new("Available", ConditionStatus::True, "Ready", "3/3"),
            t2
        ));
        assert_ne!(list[0].last_transition_time, first);
        assert_eq!(
            list[0].last_transition_time,
            Time(t2),
            "status changed: time moved"
        );
        assert!(is_true(&list, "Available"));
        assert!(!is_true(&list, "Degraded"));
        assert_eq!(list.len(), 1);
    }
}
