//! [`EventRecorder`]: publishes events without blocking; a background task
//! folds repeats and writes them.

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as KubeEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use super::event::{Event, EventType};
use super::series::{Occurrence, SeriesKey, SeriesTable};
use crate::client::error::{ClientError, EventError, Target};
use crate::host::hostname;

/// How long after an event a repeat still joins its series: client-go's 6 minutes.
pub(crate) const DEFAULT_SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);
/// Events waiting to be written before new ones are dropped (client-go's 1000).
const QUEUE_CAPACITY: usize = 1000;
/// Attempts per write when the apiserver is unavailable.
const WRITE_ATTEMPTS: u32 = 3;
/// Longest Event name.
const MAX_NAME_LEN: usize = 253;
/// Longest `reportingInstance`.
const MAX_INSTANCE_LEN: usize = 128;

enum Command {
    Record(Box<Occurrence>),
    Flush(oneshot::Sender<()>),
}

/// Options of an [`EventRecorder`]; start from [`EventRecorder::builder`].
#[derive(Clone)]
pub struct EventRecorderBuilder {
    client: kube::Client,
    controller: String,
    instance: Option<String>,
    window: Duration,
}

impl std::fmt::Debug for EventRecorderBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorderBuilder")
            .field("controller", &self.controller)
            .field("instance", &self.instance)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

impl EventRecorderBuilder {
    /// `reportingInstance`: which replica reports (default
    /// `<controller>-<hostname>` cut to 128 bytes, as client-go).
    pub fn reporting_instance(mut self, instance: impl Into<String>) -> Self {
        self.instance = Some(instance.into());
        self
    }

    /// Validates the reporter and starts the background writer on the
    /// current tokio runtime.
    pub fn build(self) -> Result<EventRecorder, EventError> {
        validate_qualified_name(&self.controller)?;
        let instance = match self.instance {
            Some(i) => i,
            None => super::series::truncate(
                format!("{}-{}", self.controller, hostname()),
                MAX_INSTANCE_LEN,
            ),
        };
        if instance.is_empty() || instance.len() > MAX_INSTANCE_LEN {
            return Err(EventError::InvalidReportingInstance { value: instance });
        }
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| EventError::NoRuntime)?;
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let writer = Writer {
            client: self.client,
            controller: self.controller.clone(),
            instance: instance.clone(),
            table: SeriesTable::new(self.window),
            last_name_nanos: 0,
        };
        runtime.spawn(writer.run(rx));
        Ok(EventRecorder {
            tx,
            controller: self.controller.into(),
            instance: instance.into(),
        })
    }
}

/// Publishes Kubernetes Events (`events.k8s.io/v1`) about the objects a
/// controller manages, with repeats folded into one Event's `series`.
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use opkit::client::EventRecorder;
///
/// # async fn example(client: kube::Client, cm: ConfigMap) -> Result<(), opkit::client::EventError> {
/// let recorder = EventRecorder::builder(client, "cache.example.com/memcached-controller")
///     .reporting_instance("memcached-operator-7d9f-x2x")
///     .build()?;
/// recorder.warning(&cm, "InvalidSize", "Reconciling", "size must be between 1 and 10");
/// recorder.normal(&cm, "Scaled", "Scaling", "scaled to 3 replicas");
/// recorder.flush().await; // only needed to observe the Events right away (tests)
/// # Ok(()) }
/// ```
///
/// # Repeats
///
/// Publishing returns at once: a background task writes the Events. An
/// event equal to one published within the *series window* (default 6
/// minutes, client-go's) — same object (`regarding`), type,
/// reason, action and note — does not create a new Event: the existing
/// one's `series` is updated instead. `series.count` is the number of
/// occurrences including the first (the first write has no `series`, the
/// second sets `count: 2`, as client-go does), and `series.lastObservedTime`
/// the time of the latest. Bursts are coalesced: five identical events
/// published at once cost one create and at most one patch.
///
/// Failures to write are logged with `tracing` and never reach the caller; an
/// event published while 1000 are waiting to be written is dropped (logged).
///
/// # RBAC
///
/// `create` and `patch` on `events` in API group `events.k8s.io`, in the
/// namespaces of the objects (`default` for cluster-scoped ones).
///
/// Cheap to clone; the background writer stops when the last clone is
/// dropped, after writing what was published.
#[derive(Debug, Clone)]
pub struct EventRecorder {
    tx: mpsc::Sender<Command>,
    controller: std::sync::Arc<str>,
    instance: std::sync::Arc<str>,
}

impl EventRecorder {
    /// A recorder reporting as `reporting_controller`, a qualified name such
    /// as `cache.example.com/memcached-controller`.
    pub fn builder(
        client: kube::Client,
        reporting_controller: impl Into<String>,
    ) -> EventRecorderBuilder {
        EventRecorderBuilder {
            client,
            controller: reporting_controller.into(),
            instance: None,
            window: DEFAULT_SERIES_WINDOW,
        }
    }

    /// The `reportingController` written on every Event.
    pub fn reporting_controller(&self) -> &str {
        &self.controller
    }

    /// The `reportingInstance` written on every Event.
    pub fn reporting_instance(&self) -> &str {
        &self.instance
    }

    /// Publishes `event` about `regarding`. Returns at once; never fails
    /// (problems are logged).
    pub(crate) fn publish<K>(&self, regarding: &K, event: Event)
    where
        K: Resource<DynamicType = ()>,
    {
        self.publish_for(regarding.object_ref(&()), event);
    }

    /// Publishes `event` about the object `regarding` refers to.
    fn publish_for(&self, regarding: ObjectReference, event: Event) {
        let occurrence = Box::new(Occurrence::new(regarding, event));
        match self.tx.try_send(Command::Record(occurrence)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(Command::Record(o))) => {
                tracing::warn!(reason = %o.event.reason, object = ?o.regarding.name, "event queue full; event dropped");
            }
            Err(_) => tracing::warn!("event recorder stopped; event dropped"),
        }
    }

    /// Publishes a `Normal` event.
    pub fn normal<K>(&self, regarding: &K, reason: &str, action: &str, note: &str)
    where
        K: Resource<DynamicType = ()>,
    {
        self.publish(
            regarding,
            Event::new(EventType::Normal, reason, action).note(note),
        );
    }

    /// Publishes a `Warning` event.
    pub fn warning<K>(&self, regarding: &K, reason: &str, action: &str, note: &str)
    where
        K: Resource<DynamicType = ()>,
    {
        self.publish(
            regarding,
            Event::new(EventType::Warning, reason, action).note(note),
        );
    }

    /// Waits until every event published before this call has been written
    /// (or its write has failed and been logged).
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Command::Flush(done)).await.is_ok() {
            let _ = wait.await;
        }
    }
}

/// `[prefix/]name`: name of 1–63 of `[A-Za-z0-9_.-]`, alphanumeric at both
/// ends; prefix a DNS subdomain. The apiserver's `IsQualifiedName`.
fn validate_qualified_name(value: &str) -> Result<(), EventError> {
    let invalid = |reason| EventError::InvalidReportingController {
        value: value.to_owned(),
        reason,
    };
    let (prefix, name) = match value.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, value),
    };
    if name.is_empty() || name.len() > 63 {
        return Err(invalid("the name part must be 1 to 63 characters"));
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !alnum(name.chars().next()) || !alnum(name.chars().last()) {
        return Err(invalid(
            "the name part must start and end with a letter or digit",
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(invalid(
            "the name part may contain only letters, digits, '-', '_' and '.'",
        ));
    }
    if let Some(prefix) = prefix {
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if prefix.is_empty() || prefix.len() > 253 || !prefix.split('.').all(label_ok) {
            return Err(invalid("the prefix must be a lowercase DNS subdomain"));
        }
    }
    Ok(())
}

/// The background task: folds occurrences into series and writes them.
struct Writer {
    client: kube::Client,
    controller: String,
    instance: String,
    table: SeriesTable,
    last_name_nanos: i128,
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        while let Some(first) = rx.recv().await {
            // Take everything queued so far: repeats in a burst cost one write.
            let mut dirty: Vec<SeriesKey> = Vec::new();
            let mut flushes = Vec::new();
            let mut next = Some(first);
            while let Some(command) = next {
                match command {
                    Command::Record(occurrence) => {
                        let key = self.table.observe(*occurrence);
                        if !dirty.contains(&key) {
                            dirty.push(key);
                        }
                    }
                    Command::Flush(done) => flushes.push(done),
                }
                next = rx.try_recv().ok();
            }
            for key in dirty {
                self.write(&key).await;
            }
            self.table.prune(tokio::time::Instant::now());
            for done in flushes {
                let _ = done.send(());
            }
        }
        tracing::debug!(controller = %self.controller, "event recorder stopped");
    }

    /// Brings the stored Event of one series up to date.
    async fn write(&mut self, key: &SeriesKey) {
        for attempt in 1..=WRITE_ATTEMPTS {
            let Some(series) = self.table.get_mut(key) else {
                return;
            };
            if !series.is_dirty() {
                return;
            }
            let count = series.count;
            let result = match series.stored.clone() {
                None => {
                    let event = self.build_event(key);
                    match event {
                        Some(event) => self.create(key, event, count).await,
                        None => return,
                    }
                }
                Some((namespace, name)) => self.patch_series(key, &namespace, &name, count).await,
            };
            match result {
                Ok(()) => return,
                Err(error) if retryable(&error) && attempt < WRITE_ATTEMPTS => {
                    tracing::debug!(%error, attempt, "writing an event failed; retrying");
                    tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
                }
                Err(error) => {
                    tracing::warn!(%error, "could not write an event; dropped");
                    return;
                }
            }
        }
    }

    /// The Event for a series that has none stored yet.
    fn build_event(&mut self, key: &SeriesKey) -> Option<KubeEvent> {
        let nanos = Timestamp::now()
            .as_nanosecond()
            .max(self.last_name_nanos + 1);
        self.last_name_nanos = nanos;
        let series = self.table.get_mut(key)?;
        let Some(object_name) = series.regarding.name.clone().filter(|n| !n.is_empty()) else {
            tracing::warn!(reason = %series.event.reason, "event about an object without a name; dropped");
            series.written = series.count;
            return None;
        };
        let suffix = format!(".{nanos:x}");
        let keep = MAX_NAME_LEN.saturating_sub(suffix.len());
        let prefix = super::series::truncate(object_name, keep);
        let namespace = series
            .regarding
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| "default".to_owned());
        Some(KubeEvent {
            metadata: ObjectMeta {
                name: Some(format!("{prefix}{suffix}")),
                namespace: Some(namespace),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(series.first_at)),
            action: Some(series.event.action.clone()),
            reason: Some(series.event.reason.clone()),
            note: series.event.note.clone(),
            type_: Some(series.event.type_.as_str().to_owned()),
            regarding: Some(series.regarding.clone()),
            related: series.event.related.clone(),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            ..KubeEvent::default()
        })
    }

    async fn create(
        &mut self,
        key: &SeriesKey,
        mut event: KubeEvent,
        count: i32,
    ) -> Result<(), ClientError> {
        let Some(series) = self.table.get_mut(key) else {
            return Ok(());
        };
        if count >= 2 {
            event.series = Some(EventSeries {
                count,
                last_observed_time: MicroTime(series.last_at),
            });
        }
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        let name = event.metadata.name.clone().unwrap_or_default();
        let target = Target::of::<KubeEvent>("create", Some(namespace.clone()), &name);
        let api: Api<KubeEvent> = Api::namespaced(self.client.clone(), &namespace);
        let created = api
            .create(&PostParams::default(), &event)
            .await
            .map_err(|e| ClientError::from_kube(e, &target))?;
        let series = self.table.get_mut(key);
        if let Some(series) = series {
            series.written = count;
            series.stored = Some((namespace, created.metadata.name.unwrap_or(name)));
        }
        Ok(())
    }

    async fn patch_series(
        &mut self,
        key: &SeriesKey,
        namespace: &str,
        name: &str,
        count: i32,
    ) -> Result<(), ClientError> {
        let Some(series) = self.table.get_mut(key) else {
            return Ok(());
        };
        let patch = json!({
            "series": { "count": count, "lastObservedTime": MicroTime(series.last_at) }
        });
        let target = Target::of::<KubeEvent>("patch", Some(namespace.to_owned()), name);
        let api: Api<KubeEvent> = Api::namespaced(self.client.clone(), namespace);
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                if let Some(series) = self.table.get_mut(key) {
                    series.written = count;
                }
                Ok(())
            }
            Err(e) => {
                let error = ClientError::from_kube(e, &target);
                if error.is_not_found() {
                    // The Event expired (Events live one hour by default):
                    // start a new one carrying the series so far.
                    if let Some(series) = self.table.get_mut(key) {
                        series.stored = None;
                    }
                    match self.build_event(key) {
                        Some(event) => self.create(key, event, count).await,
                        None => Ok(()),
                    }
                } else {
                    Err(error)
                }
            }
        }
    }
}

/// Whether a failed write may succeed if tried again soon.
fn retryable(error: &ClientError) -> bool {
    match error {
        ClientError::Request { .. } => true,
        ClientError::Api { code, .. } => *code == 429 || *code >= 500,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reporting_controller_must_be_a_qualified_name() {
        for ok in [
            "memcached",
            "cache.example.com/memcached-controller",
            "a",
            "x_y.z",
        ] {
            assert!(validate_qualified_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "Example.com/x",
            "example.com/",
            "/x",
            "a b",
            &"x".repeat(64),
        ] {
            let err = validate_qualified_name(bad).unwrap_err();
            assert!(err.to_string().contains("qualified name"), "{bad}: {err}");
        }
    }
}
