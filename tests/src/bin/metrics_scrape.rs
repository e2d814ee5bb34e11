//! A scraper for the in-cluster tests of `tests/tests/it/deploy_in_cluster.rs`,
//! run in a pod: `GET https://<host>:<port>/metrics` as the pod's
//! ServiceAccount, the way Prometheus scrapes the generated project's
//! secure metrics (its token from
//! `/var/run/secrets/kubernetes.io/serviceaccount/token` as the bearer
//! token; the host name through the cluster DNS).
//!
//! The server's certificate is not verified (Prometheus'
//! `insecure_skip_verify`, kube-rbac-proxy's scrapers likewise): the
//! generated manager serves a self-signed certificate unless given one.
//! The TLS handshake's signatures are still checked.
//!
//! Prints `status <code>`, then on 200 the first metric sample
//! (`first metric <line>`) and, when a `METRIC_PREFIX` is given, the first
//! sample starting with it (`metric <line>`); otherwise the body. Exits 0
//! only on 200 (with the prefix's sample, when one was asked for).
//!
//! Usage: `metrics_scrape <host>:<port> [METRIC_PREFIX]`

use std::process::ExitCode;
use std::time::Duration;

use opkit_tests::metrics_client::{MetricsClient, Trust};

/// Where the kubelet mounts the pod's ServiceAccount token.
const TOKEN_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";
/// How long the whole scrape may take (DNS, TCP, TLS, the server's
/// TokenReview and SubjectAccessReview).
const TIMEOUT: Duration = Duration::from_secs(30);

/// One scrape of `target` (`host:port`) with the pod's token: the status
/// and body.
async fn scrape(target: &str) -> Result<(u16, String), String> {
    let (host, _) = target
        .rsplit_once(':')
        .ok_or_else(|| format!("{target:?} is not host:port"))?;
    let token = std::fs::read_to_string(TOKEN_PATH)
        .map_err(|e| format!("the ServiceAccount token {TOKEN_PATH}: {e}"))?;
    let addr = tokio::net::lookup_host(target)
        .await
        .map_err(|e| format!("resolving {target}: {e}"))?
        .next()
        .ok_or_else(|| format!("{target} has no address"))?;
    println!("{target} is {addr}");
    let mut client = MetricsClient::connect_named(addr, host, Trust::AnyCertificate).await?;
    client.get("/metrics", Some(token.trim())).await
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (target, prefix) = match args.as_slice() {
        [target] => (target, None),
        [target, prefix] => (target, Some(prefix.as_str())),
        _ => {
            eprintln!("usage: metrics_scrape <host>:<port> [METRIC_PREFIX]");
            return ExitCode::from(2);
        }
    };
    let (status, body) = match tokio::time::timeout(TIMEOUT, scrape(target)).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
        Err(_) => {
            eprintln!("error: no answer from {target} within {TIMEOUT:?}");
            return ExitCode::FAILURE;
        }
    };
    println!("status {status}");
    if status != 200 {
        println!("{}", body.trim_end());
        return ExitCode::FAILURE;
    }
    let mut samples = body
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'));
    match samples.next() {
        Some(first) => println!("first metric {first}"),
        None => {
            println!("no metric in the body");
            return ExitCode::FAILURE;
        }
    }
    if let Some(prefix) = prefix {
        match body.lines().find(|l| l.starts_with(prefix)) {
            Some(line) => println!("metric {line}"),
            None => {
                println!("no metric starting with {prefix}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
