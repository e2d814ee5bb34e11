//! The table of recent events, keyed by what makes two events "the same",
//! that turns repeats into a growing `series.count`.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

use super::event::{Event, EventType};

/// Most series remembered; the least recently seen are forgotten first.
pub(crate) const MAX_SERIES: usize = 4096;
/// Longest reason and action the apiserver accepts.
pub(crate) const MAX_REASON_LEN: usize = 128;
/// Longest note the apiserver accepts.
pub(crate) const MAX_NOTE_LEN: usize = 1024;

/// An object reference as a hashable key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct RefKey([Option<String>; 6]);

impl From<&ObjectReference> for RefKey {
    fn from(r: &ObjectReference) -> Self {
        Self([
            r.api_version.clone(),
            r.kind.clone(),
            r.namespace.clone(),
            r.name.clone(),
            r.uid.clone(),
            r.field_path.clone(),
        ])
    }
}

/// What makes two events the same: object, related object, type, reason,
/// action and note.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct SeriesKey {
    regarding: RefKey,
    related: Option<RefKey>,
    type_: EventType,
    reason: String,
    action: String,
    note: Option<String>,
}

/// `s` cut to at most `max` bytes, on a character boundary.
pub(crate) fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// One published event, as the table sees it.
#[derive(Debug, Clone)]
pub(crate) struct Occurrence {
    pub(crate) regarding: ObjectReference,
    pub(crate) event: Event,
    /// Wall-clock time, for the Event's timestamps.
    pub(crate) at: Timestamp,
    /// Monotonic time, for the window.
    pub(crate) seen: Instant,
}

impl Occurrence {
    /// An occurrence with the event's fields cut to the apiserver's limits.
    pub(crate) fn new(regarding: ObjectReference, mut event: Event) -> Self {
        event.reason = truncate(event.reason, MAX_REASON_LEN);
        event.action = truncate(event.action, MAX_REASON_LEN);
        event.note = event.note.map(|n| truncate(n, MAX_NOTE_LEN));
        Self {
            regarding,
            event,
            at: Timestamp::now(),
            seen: Instant::now(),
        }
    }

    fn key(&self) -> SeriesKey {
        SeriesKey {
            regarding: RefKey::from(&self.regarding),
            related: self.event.related.as_ref().map(RefKey::from),
            type_: self.event.type_,
            reason: self.event.reason.clone(),
            action: self.event.action.clone(),
            note: self.event.note.clone(),
        }
    }
}

/// The occurrences of one event within the window, and what of them has
/// been written.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    pub(crate) regarding: ObjectReference,
    pub(crate) event: Event,
    /// Time of the first occurrence: the Event's `eventTime`.
    pub(crate) first_at: Timestamp,
    /// Time of the latest occurrence: `series.lastObservedTime`.
    pub(crate) last_at: Timestamp,
    last_seen: Instant,
    /// Occurrences so far.
    pub(crate) count: i32,
    /// The count the stored Event shows (0: not created yet).
    pub(crate) written: i32,
    /// The stored Event's namespace and name, once created.
    pub(crate) stored: Option<(String, String)>,
}

impl Series {
    /// Whether the stored Event lags behind the occurrences.
    pub(crate) fn is_dirty(&self) -> bool {
        self.count > self.written
    }
}

/// Recent series by key.
#[derive(Debug)]
pub(crate) struct SeriesTable {
    window: Duration,
    series: HashMap<SeriesKey, Series>,
}

impl SeriesTable {
    pub(crate) fn new(window: Duration) -> Self {
        Self {
            window,
            series: HashMap::new(),
        }
    }

    /// Counts an occurrence: a repeat within the window grows its series,
    /// anything else starts a new one. Returns the series' key.
    pub(crate) fn observe(&mut self, occurrence: Occurrence) -> SeriesKey {
        let key = occurrence.key();
        let window = self.window;
        match self.series.get_mut(&key) {
            Some(series)
                if occurrence.seen.saturating_duration_since(series.last_seen) <= window =>
            {
                series.count = series.count.saturating_add(1);
                series.last_at = occurrence.at;
                series.last_seen = occurrence.seen;
            }
            _ => {
                self.series.insert(
                    key.clone(),
                    Series {
                        regarding: occurrence.regarding,
                        event: occurrence.event,
                        first_at: occurrence.at,
                        last_at: occurrence.at,
                        last_seen: occurrence.seen,
                        count: 1,
                        written: 0,
                        stored: None,
                    },
                );
            }
        }
        key
    }

    pub(crate) fn get_mut(&mut self, key: &SeriesKey) -> Option<&mut Series> {
        self.series.get_mut(key)
    }

    /// Forgets series not seen within the window (their stored Events stay),
    /// and the least recently seen beyond [`MAX_SERIES`].
    pub(crate) fn prune(&mut self, now: Instant) {
        let window = self.window;
        self.series
            .retain(|_, s| now.saturating_duration_since(s.last_seen) <= window || s.is_dirty());
        if self.series.len() > MAX_SERIES {
            let mut by_age: Vec<(Instant, SeriesKey)> = self
                .series
                .iter()
                .map(|(k, s)| (s.last_seen, k.clone()))
                .collect();
            by_age.sort_by_key(|(seen, _)| *seen);
            let excess = self.series.len() - MAX_SERIES;
            for (_, key) in by_age.into_iter().take(excess) {
                self.series.remove(&key);
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.series.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some("ns".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..ObjectReference::default()
        }
    }

    fn warning(reason: &str) -> Event {
        Event::new(EventType::Warning, reason, "Reconciling").note("boom")
    }

    #[tokio::test(start_paused = true)]
    async fn repeats_within_the_window_grow_one_series() {
        let mut table = SeriesTable::new(Duration::from_secs(60));
        let first = table.observe(Occurrence::new(pod("a"), warning("Failed")));
        for _ in 0..4 {
            tokio::time::advance(Duration::from_secs(10)).await;
            assert_eq!(
                table.observe(Occurrence::new(pod("a"), warning("Failed"))),
                first
            );
        }
        assert_eq!(table.get_mut(&first).unwrap().count, 5);

        // Anything different is another series.
        let other_reason = table.observe(Occurrence::new(pod("a"), warning("Other")));
        let other_object = table.observe(Occurrence::new(pod("b"), warning("Failed")));
        let other_note = table.observe(Occurrence::new(pod("a"), warning("Failed").note("bang")));
        let other_type = table.observe(Occurrence::new(
            pod("a"),
            Event::new(EventType::Normal, "Failed", "Reconciling").note("boom"),
        ));
        for key in [&other_reason, &other_object, &other_note, &other_type] {
            assert_ne!(key, &first);
            assert_eq!(table.get_mut(key).unwrap().count, 1);
        }
        assert_eq!(table.len(), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn after_the_window_a_repeat_starts_a_new_series() {
        let mut table = SeriesTable::new(Duration::from_secs(60));
        let key = table.observe(Occurrence::new(pod("a"), warning("Failed")));
        table.get_mut(&key).unwrap().written = 1;
        table.get_mut(&key).unwrap().stored = Some(("ns".into(), "a.1".into()));
        tokio::time::advance(Duration::from_secs(61)).await;
        table.observe(Occurrence::new(pod("a"), warning("Failed")));
        let series = table.get_mut(&key).unwrap();
        assert_eq!(
            (series.count, series.written, series.stored.clone()),
            (1, 0, None)
        );

        tokio::time::advance(Duration::from_secs(61)).await;
        // Unwritten series are kept; written ones are forgotten.
        table.prune(Instant::now());
        assert_eq!(table.len(), 1);
        table.get_mut(&key).unwrap().written = 1;
        table.prune(Instant::now());
        assert_eq!(table.len(), 0);
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        assert_eq!(truncate("héllo".into(), 2), "h");
        assert_eq!(truncate("abc".into(), 5), "abc");
        let long = Occurrence::new(
            pod("a"),
            Event::new(EventType::Normal, "R".repeat(200), "A").note("n".repeat(2000)),
        );
        assert_eq!(long.event.reason.len(), MAX_REASON_LEN);
        assert_eq!(long.event.note.unwrap().len(), MAX_NOTE_LEN);
    }
}
