//! Captures the `tracing` events emitted on the current thread, for tests
//! that assert what a log line carries (level, message, fields).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};

/// One captured event.
#[derive(Debug, Clone)]
pub(crate) struct Logged {
    pub(crate) level: tracing::Level,
    pub(crate) message: String,
    pub(crate) fields: BTreeMap<String, String>,
}

impl Logged {
    /// The field `name`, as recorded (`Debug` for values logged with `?`).
    pub(crate) fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// The events captured so far.
#[derive(Clone, Default)]
pub(crate) struct Captured(Arc<Mutex<Vec<Logged>>>);

impl Captured {
    pub(crate) fn events(&self) -> Vec<Logged> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// The events whose message contains `part`.
    pub(crate) fn with_message(&self, part: &str) -> Vec<Logged> {
        self.events()
            .into_iter()
            .filter(|e| e.message.contains(part))
            .collect()
    }
}

struct Visitor<'a>(&'a mut Logged);

impl Visit for Visitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0.message = format!("{value:?}");
        } else {
            self.0
                .fields
                .insert(field.name().to_owned(), format!("{value:?}"));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.message = value.to_owned();
        } else {
            self.0
                .fields
                .insert(field.name().to_owned(), value.to_owned());
        }
    }
}

struct Layer(Captured);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Layer {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut logged = Logged {
            level: *event.metadata().level(),
            message: String::new(),
            fields: BTreeMap::new(),
        };
        event.record(&mut Visitor(&mut logged));
        if let Ok(mut all) = (self.0).0.lock() {
            all.push(logged);
        }
    }
}

/// Captures every event on this thread until the guard is dropped (use a
/// current-thread runtime, the default of `#[tokio::test]`).
pub(crate) fn capture() -> (Captured, tracing::subscriber::DefaultGuard) {
    // Callsite interest and the max level are cached process-wide: with no
    // global subscriber, a callsite first hit by another test's thread can be
    // cached as "never" and this thread's capture miss it. A global registry
    // (enabled for everything, writing nowhere) keeps every callsite live.
    static GLOBAL: std::sync::Once = std::sync::Once::new();
    GLOBAL.call_once(|| {
        let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry());
    });
    let captured = Captured::default();
    let subscriber = tracing_subscriber::registry().with(Layer(captured.clone()));
    let guard = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();
    (captured, guard)
}
