//! Sharding: one operator's objects split across N replicas, each
//! reconciling only its share, with no object ever reconciled by two
//! replicas at once.
//!
//! ```no_run
//! use opkit::shard::Sharding;
//!
//! # async fn example(client: kube::Client) -> Result<(), opkit::shard::ShardError> {
//! let shard = Sharding::new("memcached-operator")
//!     .namespace("memcached-system")
//!     .spawn(client)?;
//!
//! // Before reconciling an object, ask for a permit; hold it until done,
//! // and drop the work if the permit lapses first (a sharded Controller
//! // does both for its reconciles).
//! if let Some(permit) = shard.try_start("default/my-memcached") {
//!     tokio::select! {
//!         biased;
//!         () = permit.revoked() => { /* no longer ours: abandoned */ }
//!         () = async { /* ... reconcile default/my-memcached ... */ } => {}
//!     }
//!     drop(permit);
//! }
//!
//! // For metrics and /readyz.
//! let status = shard.status();
//! println!("active: {}, members: {:?}", status.active, status.members);
//!
//! // Graceful: stop granting permits, wait for held ones, delete the Lease.
//! shard.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! # Membership
//!
//! Each replica holds its own `coordination.k8s.io/v1` Lease named
//! `<ring>-<16 hex digits of its identity's hash>`, labelled
//! `shard.opkit.dev/ring=<ring>`, in the operator's namespace, and renews
//! it every *retry period* (four times as often while a change of the
//! member set is being acknowledged, for at most a lease duration: each
//! change needs every member's acknowledgement read in a later round, and
//! a join that overlaps a takeover would otherwise add two retry periods
//! to it). Every round a replica lists the ring's Leases
//! (a consistent read) and judges each one fresh as leader election does:
//! by when *it* last saw the Lease change, so clock skew does not matter.
//! A Lease unchanged for the *lease duration* is removed with a delete
//! conditioned on the `resourceVersion` that was judged stale, so a member
//! that renewed meanwhile is never removed. The members are the listed
//! Leases plus the replica itself; adding a replica needs no configuration.
//!
//! # Assignment
//!
//! Every replica builds the same consistent-hash ring (128 virtual nodes per
//! member, over a hash pinned in this crate) from the same member set, and
//! a key (`namespace/name`) belongs to the member whose point follows the
//! key's hash. When one of N members joins or leaves, only the keys of the
//! arcs it gains or loses move: about 1/N of them. A ring rather than
//! rendezvous hashing, because a ring gives each member contiguous hash
//! ranges, which a server-side sharded list/watch (KEP-5866
//! `shardRange`) can select; rendezvous hashing cannot be expressed as
//! ranges.
//!
//! # Dividing the cache: [`Sharding::by_namespace`]
//!
//! By default a key's ring position is `hash64("namespace/name")` and every
//! replica caches every object. With `by_namespace()` it is plain 64-bit
//! FNV-1a of the key's namespace (empty for a cluster-scoped key): exactly
//! what a Kubernetes 1.36 apiserver computes for a KEP-5866 sharded
//! list/watch (`k8s.io/apimachinery/pkg/sharding`: `HashField` is FNV-1a
//! 64 of `object.metadata.namespace` or `object.metadata.uid`, matched
//! against `[start, end)` ranges joined by `||`, gate
//! `ShardedListAndWatch`). A sharded controller's cache then lists and
//! watches its primary kind, and the owned kinds of the same scope, with
//! this replica's arcs as `shardSelector`; the selector follows the view
//! this replica is *active* on, so a replica losing keys keeps their
//! objects until every member acknowledged the new view, and the gaining
//! one relists once it may start them. Whether the server filters is read
//! from the `metadata.shardInfo` of a one-object list; on a server that
//! ignores the parameter the primary kind runs in *label mode* (below)
//! and the owned kinds are cached undivided. Each kind's cache logs once
//! which mode runs: `mode="server-side shard selector"`, `mode="label
//! selector"` or `mode="filter-at-queue"` (undivided).
//!
//! The namespace and not the uid: an owned object's namespace is its
//! owner's, so owned kinds divide with the same selector and reach the
//! owner's replica; a uid ring would leave them undivided. The cost is
//! balance per namespace (see the book's sharding chapter). The scheme is
//! part of the view id, so replicas that disagree on it (a rolling change,
//! or two Deployments sharing a ring name) never all acknowledge one view
//! and none starts a key; the permits, not the cache, keep the guarantee.
//!
//! # Label mode: dividing the cache without KEP-5866
//!
//! On a server without `ShardedListAndWatch` (before 1.36, or the gate
//! off), a `by_namespace()` ring divides a sharded controller's primary
//! kind by a label instead, with no coordinator and no webhook:
//!
//! - **The label.** Key `shard.opkit.dev/<ring>` (the ring name, already
//!   limited to 63 lowercase letters, digits and `-`, is a valid label
//!   name); value the owner's *member id*: the 16 hex digits its member
//!   Lease's name ends with (`<ring>-<16 hex>`), since an identity may be
//!   longer than a label value or hold characters one cannot.
//! - **The cache.** Each replica lists and watches the primary kind with
//!   the label selector `shard.opkit.dev/<ring>=<its id>` (joined to the
//!   cache scope's own selector). When a patch makes an object stop or
//!   start matching, the apiserver sends `DELETED` to the old owner's
//!   watch and `ADDED` to the new one's: relabelling moves an object
//!   between caches, and the selector itself never changes (no relist on
//!   a rebalance).
//! - **Who labels.** Every replica, from the first view it is active on,
//!   follows the latest view it was active on: (1) a metadata-only watch
//!   of the objects whose label names none of that view's members,
//!   `shard.opkit.dev/<ring> notin (<ids>)` (unlabelled ones match too;
//!   restarted on each new view; empty in steady state), labelling with
//!   its own id those it owns in the view; (2) on becoming active on a new
//!   view, and for every object arriving in its cache after that, moving
//!   the cached objects it does not own to their owner's id. Objects of a
//!   member that left carry an id outside the new view, so the stray watch
//!   of their new owner picks them up. Each patch is a merge patch that
//!   carries the `resourceVersion` it was judged at: on 409 the object
//!   changed, and its next event brings it back. Each batch is logged once
//!   with counts (`labelled`, `moved_out`, `conflicts`, `gone`, `failed`).
//! - **Why it is safe.** Labels only place objects in caches; permits
//!   (below) still decide who reconciles, so a stale or wrong label costs
//!   latency (the object is cached by a replica that drops its key), never
//!   an overlap. A label set from a view that is already being replaced is
//!   corrected when its holder becomes active on the next one.
//! - **What it costs.** One patch per object when it is created, and per
//!   moved object on a rebalance (each also wakes a reconcile of it, which
//!   the old owner drops); `patch` permission on the primary kind
//!   (`#[controller(finalizer)]` grants it; otherwise add
//!   `.allow::<K>(&[Verb::Patch])`). A replica asks first, once, when the
//!   kind's reflector probes the server (a SelfSubjectAccessReview; the
//!   labeller acts on the mode that probe decided): without `patch` it
//!   logs why and caches the
//!   kind undivided (`mode="filter-at-queue"`), losing nothing. Until an
//!   object is labelled, no replica caches or reconciles it. Owned kinds are not labelled: their
//!   objects would be invisible to their owner between creation and
//!   labelling, so in label mode they are cached undivided.
//!
//! # Handover: why two replicas never reconcile one key at once
//!
//! A replica reconciles a key only under a [`ShardPermit`], granted when
//! (a) the replica owns the key in its current *view* (member set), (b)
//! *every* member of that view has acknowledged it, or the key does not
//! move (below), and (c) the replica's last successful renew was *sent*
//! less than the *renew deadline* ago.
//!
//! - **Acknowledging.** Each replica writes, in its own Lease's annotation
//!   `shard.opkit.dev/view`, the id of the view it acts on. On seeing a new
//!   view it closes its gate (only keys that do not move start), waits
//!   until no permit is held for a key the new view gives to someone
//!   else, and only then writes the new id. The gate reopens only when one consistent read
//!   shows *every* member's acknowledgement of the same view, this
//!   replica's own Lease (exactly as it last wrote it) included, and this
//!   round's renew succeeded. Requiring its own acknowledgement in the
//!   read closes the join race: of two replicas that start at once and
//!   each first read an empty ring, the one whose read comes later sees
//!   the other's Lease, so neither can act on a view without the other.
//! - **Rebalancing.** Say key *k* moves from A to B. B starts *k* only after
//!   reading A's acknowledgement of the new view, which A wrote only after
//!   its last permit on *k* was dropped; and A cannot start *k* again under
//!   the new view. A later view change closes both gates again. Because
//!   reads are consistent (quorum) and every write is conditional on the
//!   Lease's `resourceVersion`, two replicas cannot both have read the
//!   other's acknowledgement of different views that give them the same key.
//! - **Only keys that move wait.** While its gate is closed, a replica
//!   still starts a key it owns in the new view *and* in every view that
//!   may be open on another replica: the last view its gate was open on,
//!   and every view it has acknowledged since (recorded before each
//!   acknowledging write is sent, since a write whose reply is lost may
//!   have been applied). A held key stays owned in all of them: a
//!   replica acknowledges no view that gives away a key it holds. Why no
//!   two replicas then hold one key: of two, take the one that last
//!   opened its gate, on view *V*. That read showed the other's
//!   acknowledgement of *V*, written after the other last opened (or in
//!   that same read), so *V* is among the other's possibly open views,
//!   and both would own the key in *V*. (A replica missing from *V*
//!   while its Lease exists has an invalid Lease, which blocks every
//!   opening; a deleted one has passed its renew deadline.) Owning the
//!   key in the new view and the last open one is not enough: a view
//!   acknowledged in between may have given the key to a replica that
//!   opened on it and still reconciles it (for instance when that
//!   replica's Lease is then edited by hand, so that the new view leaves
//!   it out while it keeps its reconciles). Keys that
//!   move wait as before; the gate counts them (`opkit_shard_paused_keys`)
//!   and the membership loop logs how many when it reopens. The model
//!   test `handover_proptests.rs` checks the rule over any interleaving
//!   of joins, leaves, crashes, edited Leases, reads, acknowledgements
//!   and starts. A replica that has not been open since it joined (or
//!   rejoined) starts nothing until it is, and one shutting down starts
//!   nothing.
//! - **Death and pauses.** A member that stops renewing (crashed, paused
//!   with SIGSTOP, partitioned) is not acknowledged by anyone's wait: the
//!   others remove its Lease once it was unchanged for the lease duration
//!   *by their clock*, which is at least the lease duration after the
//!   member *sent* its last successful renew. The member itself stops
//!   granting permits at send time + renew deadline, and its permits held
//!   then lapse (below), which is earlier because `renew_deadline <
//!   lease_duration`. A paused member that
//!   resumes finds its own renew rejected (its Lease is gone or changed:
//!   404/409), forgets its view and joins again as a new member: it starts
//!   nothing until every member has acknowledged a view that includes it.
//!
//!
//! # Reconciles in flight when a permit lapses
//!
//! A held permit *lapses* as soon as its key could no longer start: this
//! replica's renew deadline (last successful renew *sent* + renew
//! deadline) passes, the replica leaves the ring (shutdown, or it finds
//! itself removed), or a member set it reads gives the key to another
//! replica. A sharded [`Controller`](crate::controller::Controller) races
//! each reconcile against [`ShardPermit::revoked`], polling the lapse
//! first; on a lapse it drops the reconcile's future where it stands, logs
//! `shard permit lapsed; reconcile cancelled` (`controller`, `namespace`,
//! `name`, `reason`), counts it in
//! `opkit_shard_cancelled_reconciles_total{controller}`, and does not
//! retry the key (no error, no backoff, no `on_error`): the key runs again
//! only under a new permit, if this replica still owns it once active, or
//! is left to its new owner. A graceful shutdown closes the gate but lets
//! reconciles finish until the last renew's deadline.
//!
//! What is guaranteed:
//! - The lapse is read from the clock on *every* poll of the worker,
//!   before the reconcile is polled, not when a timer fires. So once the
//!   deadline has passed, the reconcile's future is never polled again:
//!   none of its code after the `.await` it was suspended at runs. This
//!   holds for a process resumed after a freeze (SIGSTOP): the worker's
//!   first poll after resuming drops the reconcile, even when the reply
//!   the reconcile awaited is already in (unit-tested on the paused
//!   clock). On resume the deadline *is* checked before the reconcile's
//!   next write.
//! - A running replica drops a reconcile at its renew deadline, at least
//!   `lease_duration − renew_deadline` (5 s with the defaults) before the
//!   others may remove its Lease and start the key; and a reconcile whose
//!   key moves as soon as it reads the new member set, before it
//!   acknowledges that set (which the new owner waits for), so a long
//!   reconcile no longer holds a handover up.
//!
//! What is not:
//! - A frozen process cannot be cancelled while frozen, and what it had
//!   handed over before freezing goes on without the worker: a request
//!   already written to its socket, or queued in the HTTP client's
//!   connection task (another task, which may run before the worker on
//!   resume), still reaches the apiserver, possibly after the key moved; a
//!   poll in progress at the instant of SIGSTOP finishes up to its next
//!   `.await`; tasks the reconcile spawned are not cancelled. Only the
//!   apiserver fences such writes: an update or replace carrying the
//!   `resourceVersion` the reconcile read fails with 409 (a merge patch or
//!   a forced apply does not).
//! - Cancellation happens at `.await` points: a reconcile busy on a
//!   thread (synchronous work) is dropped at its next `.await`.
//! - The deadline runs on the monotonic clock, which stops while the
//!   whole machine or VM is suspended: resumed, the replica believes its
//!   permits good until its next renew finds its Lease gone (then every
//!   permit lapses). Leader election shares this limit.
//! - Code holding a permit from [`ShardHandle::try_start`] itself must
//!   race [`ShardPermit::revoked`] itself; the permit does not stop it.
//!
//! Reconciles are cancelled like any future: keep them idempotent.
//!
//! # Bad input
//!
//! - **A Lease edited or made by hand.** A Lease of the ring is one
//!   labelled with it *or* named like its member Leases (`<ring>-<16 hex
//!   digits>`), so a member Lease whose label was removed is still seen.
//!   It is a member only if it is labelled with the ring and names a
//!   holder (1 to 128 bytes) whose Lease name it has. Any other one is
//!   logged once with the reason and is no member, but while it is fresh
//!   no view is complete, so no replica starts new keys: it may be a
//!   member's Lease whose holder was just edited, and that member may
//!   still be reconciling. Any edit changes the Lease's `resourceVersion`,
//!   so its replica's next renew fails with 409: the replica stops
//!   starting keys, waits until its reconciles ended, deletes the edited
//!   Lease and joins again. A Lease nobody renews is deleted once it was
//!   unchanged for the lease duration. A `leaseDurationSeconds` other than
//!   this replica's is logged and ignored: each replica judges expiry by
//!   its own lease duration.
//! - **Two operators sharing one ring name** (two Deployments in one
//!   namespace with the same `Sharding::new` name). Each member Lease
//!   lists, in the annotation `shard.opkit.dev/kinds`, the kinds its
//!   sharded controllers reconcile; a replica that finds members
//!   reconciling other kinds logs one error per distinct set, naming
//!   itself, those members and both sets. The ring stays one ring (a
//!   rolling upgrade that adds a controller looks the same, and splitting
//!   the ring there could let two replicas reconcile one object), so no
//!   object is reconciled twice, but the objects it gives to the other
//!   operator's replicas are reconciled by neither until the names differ.
//!
//! # Defaults and RBAC
//!
//! Lease duration 15 s, renew deadline 10 s, retry period 2 s (as leader
//! election). A replica needs `get`, `list`, `create`, `update` and `delete`
//! on `leases` in `coordination.k8s.io`, in the Leases' namespace
//! ([`Rules::sharding`](crate::rbac::Rules::sharding)); in label mode,
//! also `patch` on each sharded controller's primary kind.

mod config;
mod divide;
mod division;
mod error;
mod gate;
mod handle;
mod hash;
mod label;
mod labeller;
mod liveness;
mod member;
mod observe;
mod ring;
mod shares;
mod store;
mod view;

#[cfg(test)]
mod handover_proptests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

pub use config::Sharding;
pub(crate) use division::ShardSelector;
pub use error::ShardError;
pub use gate::ShardPermit;
pub use handle::{ShardHandle, ShardStatus};
pub(crate) use labeller::run as label_primary;
pub(crate) use observe::{export_metrics, readiness};
