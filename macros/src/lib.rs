//! Derive macros for opkit. Use them through the `opkit` crate, which
//! re-exports them (`opkit::Controller`); this crate holds no runtime code.
//!
//! The attribute reference, with examples that compile, is in the
//! documentation of `opkit::derive`.
#![deny(missing_docs)]
#![warn(clippy::unwrap_used)]

mod attr;
mod builtin_resources;
mod expand;
mod resource_check;

use proc_macro::TokenStream;
use syn::{DeriveInput, parse_macro_input};

/// Declares a controller on a reconciler type: the kind it reconciles, the
/// kinds it owns or watches, predicates and options. Implements
/// `opkit::derive::ControllerWiring`, which builds the
/// `opkit::controller::Controller` and lists the RBAC rules it needs.
///
/// ```text
/// #[derive(Controller)]
/// #[controller(
///     for = Memcached,                        // the primary kind (required)
///     owns(Deployment, Service),              // children with a controller reference
///     index(Memcached, "config", config_of), // fn(&Memcached) -> Vec<String>
///     watches(ConfigMap, by_index = "config"), // the Memcacheds whose index lists it
///     watches(Secret, map = by_secret),       // fn(&Secret, &Store<Memcached>) -> Vec<Request>
///     event_filter(GenerationChanged),        // filter every watch
///     rbac(create, patch, delete on Deployment, Service),
///     status, finalizer, events,              // write the status and finalizers; record Events
///     name = "memcached", max_concurrent_reconciles = 2,
///     throttle(per_second = 50, burst = 10),
/// )]
/// struct MemcachedReconciler;
/// ```
///
/// See `opkit::derive` for every option, the RBAC rules each yields, and
/// the compile errors misuse gives.
#[proc_macro_derive(Controller, attributes(controller))]
pub fn derive_controller(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand::controller(&input) {
        Ok(wiring) => wiring.into(),
        // The error, and a placeholder wiring so that code using it
        // (`add_to`, `rbac_rules`) compiles: the attribute's error is the
        // only one reported, not a cascade of `no method named add_to`.
        Err(error) => {
            let mut out = error.into_compile_error();
            out.extend(expand::placeholder(&input));
            out.into()
        }
    }
}
