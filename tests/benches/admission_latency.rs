//! The cost of admission webhooks on a create, against a real
//! kube-apiserver: the same creates with no webhooks and through opkit's
//! validating and mutating webhooks (served on loopback). Prints p50 and
//! p99 of each and their ratio.
//!
//! `make bench-webhook`, or
//! `cargo bench -p opkit-tests --bench admission_latency` (`CREATES=N`,
//! default 300).

use std::time::{Duration, Instant};

use kube::api::{Api, PostParams};
use opkit::webhook::{WebhookOptions, Webhooks};
use opkit_tests::create_namespace;

#[path = "../tests/it/webhook_support/mod.rs"]
#[allow(dead_code)]
mod webhook_support;
use webhook_support::{
    Gadget, GadgetDefaults, GadgetRules, Served, gadget, plane_with_gadgets, until_mutating,
    until_validating,
};

fn creates() -> usize {
    match std::env::var("CREATES") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("CREATES must be a number of creates, not {v:?}")),
        Err(_) => 300,
    }
}

/// The latency at quantile `q` of sorted samples.
fn at(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)]
}

fn main() {
    // While the fixture waits for the control plane and the webhook
    // server, kube's client logs every refused connection at ERROR; those
    // retries are expected here, and RUST_LOG still shows them.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error,kube_client=off")),
        )
        .try_init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(measure(creates()));
}

async fn measure(creates: usize) {
    let plane = plane_with_gadgets().await;
    let admin = plane.client().expect("admin client");
    let mut rows = Vec::new();
    for (label, ns, with_webhooks) in [
        ("no webhooks", "webhook-latency-off", false),
        ("validating + mutating", "webhook-latency-on", true),
    ] {
        create_namespace(&admin, ns).await;
        let gadgets: Api<Gadget> = Api::namespaced(admin.clone(), ns);
        let served = if with_webhooks {
            let webhooks = Webhooks::new()
                .validating_with::<Gadget, _>(
                    GadgetRules::default(),
                    WebhookOptions::new().namespaces([ns]),
                )
                .defaulting_with::<Gadget, _>(
                    GadgetDefaults,
                    WebhookOptions::new().namespaces([ns]),
                );
            let served = Served::start(&webhooks).await;
            plane
                .install_webhooks("webhook-latency", &webhooks, &served.client())
                .await
                .expect("install the webhook configurations");
            until_validating(&gadgets).await;
            until_mutating(&gadgets).await;
            Some(served)
        } else {
            None
        };
        let mut took = Vec::with_capacity(creates);
        for i in 0..creates {
            let begun = Instant::now();
            gadgets
                .create(
                    &PostParams::default(),
                    &gadget(&format!("g-{i}"), Some(1), None),
                )
                .await
                .expect("create a Gadget");
            took.push(begun.elapsed());
        }
        took.sort();
        rows.push((label, at(&took, 0.5), at(&took, 0.99)));
        if let Some(served) = served {
            plane
                .uninstall_webhooks("webhook-latency")
                .await
                .expect("uninstall the webhook configurations");
            served.stop().await;
        }
    }
    println!("create latency over {creates} creates each (kube-apiserver on loopback):");
    println!("| webhooks | p50 | p99 |");
    println!("|---|---|---|");
    for (label, p50, p99) in &rows {
        println!("| {label} | {p50:.2?} | {p99:.2?} |");
    }
    if let [(_, off50, off99), (_, on50, on99)] = rows[..] {
        println!(
            "| ratio (with ÷ without) | {:.2}× | {:.2}× |",
            on50.as_secs_f64() / off50.as_secs_f64(),
            on99.as_secs_f64() / off99.as_secs_f64()
        );
    }
}
