//! Kubernetes Events (`events.k8s.io/v1`): one occurrence's fields in
//! `event.rs`, the recorder (the public part) in `recorder.rs`, the folding
//! of repeats in `series.rs`.

mod event;
mod recorder;
mod series;

pub use recorder::{EventRecorder, EventRecorderBuilder};
