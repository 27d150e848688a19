//! The one trait a surface type implements: [`Surface`], over its own
//! typed settings, journal entries, needles and carrier enum.
//!
//! The kernel's adapter ([`super::adapter`]) turns every such type into the
//! engine-facing [`super::SurfaceType`], [`super::Instance`] and
//! [`super::Watchable`]: it parses carriers and needles, (de)serialises
//! settings and entries, refuses an entry that does not parse (it is never
//! the surface's own), pairs retractions, formats descriptions, and skips
//! a run A that a signal stopped. A surface type writes only what is its
//! own: how its config becomes settings, what its settings say about
//! themselves, its control, and its plant, recovery, ownership rule and
//! cleanup.

use super::carrier::CarrierSet;
use super::routes::{Recovered, Route};
use super::{CleanupOutcome, JobScope, Notice, Persistence, PlantOutcome, RunCtx};
use crate::config::{ConfigError, Options};
use crate::fault::Fault;
use crate::nonce::Nonce;
use crate::state::diff::{Before, Change};
use crate::state::snapshot::{Sink, SnapshotError, WatchCtx};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::Path;

/// What [`Surface::find`] found: the plants, as journal entries, and what
/// it saw under a plant's name that is not runwarden's (someone else's
/// object there), by name and why it stays. Cleanup removes the first and
/// lists the second: nothing found is passed over in silence.
#[derive(Debug)]
pub struct Found<E> {
    pub ours: Vec<E>,
    /// (what, shown escaped; why it is left).
    pub left: Vec<(String, String)>,
}

impl<E> From<Vec<E>> for Found<E> {
    fn from(ours: Vec<E>) -> Self {
        Found {
            ours,
            left: Vec::new(),
        }
    }
}

/// A surface type, implemented by its open instance (`Self`). The consts
/// and associated types say what the type is; the methods are what only
/// it can do. Everything else is the kernel's.
pub trait Surface: Sized + 'static {
    /// The `type:` value in the config.
    const NAME: &'static str;
    /// One line for `runwarden carriers`.
    const DESCRIPTION: &'static str;
    /// The config keys this type takes (besides `name` and `type`); any
    /// other key is an error before [`Surface::validate`] runs.
    const KEYS: &'static [&'static str];
    /// Keys a declaration of this type's channels may use to scope it,
    /// each with the check of its values.
    const SCOPES: &'static [Scope<Self::Carrier>] = &[];
    /// Carriers only a run B in a later job than run A's can read (a trace
    /// the job leaves in its own run): an in-job probe SKIPS them with
    /// [`super::LATER_JOB_ONLY`].
    const LATER_JOB_ONLY: &'static [Self::Carrier] = &[];
    /// Carriers [`Surface::plant`] plants after every other (one whose
    /// trace must come after the others', say why there).
    const PLANTED_LAST: &'static [Self::Carrier] = &[];
    /// Whether watch mode can list this type ([`Surface::snapshot`], and
    /// which carriers a change carries), or why not (every carrier is then
    /// SKIPPED in watch mode with the reason).
    const WATCH: Watch<Self::Carrier> = Watch::No("watch mode cannot list this surface type yet");
    /// Every way run B reads this type's carriers ([`Route`]): a miss it
    /// answers counts only with the look of each route of its carrier,
    /// which the kernel checks ([`super::routes::judge`]). A type that
    /// declares none has no miss that counts.
    const ROUTES: &'static [Route<Self::Carrier>] = &[];

    /// The carriers, declared with `carriers!` (`carrier.rs`).
    type Carrier: CarrierSet;
    /// What [`Surface::validate`] makes of the config, and what runs A
    /// and B receive (serialized on their standard input: it may hold
    /// credentials, and is never printed).
    type Settings: Serialize + DeserializeOwned;
    /// One journal line: what run A is about to create, journalled before
    /// the write, or what it made. Declared with `deny_unknown_fields`: a
    /// line that does not parse is never this surface's own, and cleanup
    /// leaves it alone. Shown to people with `Display` (escaped), followed
    /// by its place (`About::new`).
    type Entry: Serialize + DeserializeOwned + Clone + PartialEq + std::fmt::Display;
    /// What recovery looks for, as the plant reports it.
    type Needle: Needle;

    /// Takes this type's keys from a config entry.
    fn validate(opts: Options<'_>) -> Result<Self::Settings, ConfigError>;

    /// What `settings` say about themselves, here: where entries live (for
    /// people), the facts the report shows, the warnings `check-config`
    /// prints, the carriers they rule out and why, the exposures a channel
    /// tests, and what the instance is when two configured surfaces can
    /// name one thing. No credential in it, only its source.
    fn about(settings: &Self::Settings) -> About<Self::Carrier>;

    /// Makes a control instance under `dir` (a fresh directory the probe
    /// owns) that is known to be open. The same plant and recovery code
    /// runs on it; a PASS counts only if the control was recovered.
    /// `like` is the configured surface's settings, for a type whose
    /// control takes after them (the filesystem keeps `content-reads`);
    /// the conformance suite makes controls with none. `Broken` (or
    /// `Unreachable`) when what serves the control cannot be set up.
    fn control(like: Option<&Self::Settings>, dir: &Path)
    -> Result<Control<Self::Settings>, Fault>;

    /// Opens an instance. `Invalid` for settings it cannot take (never
    /// `Unsupported`: watch mode would take that for a surface it may
    /// skip).
    fn open(settings: Self::Settings) -> Result<Self, Fault>;

    /// Plants every job, each carrier with its own nonce; one outcome per
    /// job, in order. Every entry is journalled before the write that
    /// creates it, so cleanup finds it even if the process dies right
    /// after; a write that provably made nothing is retracted. By default
    /// one job at a time ([`Surface::plant_one`]), stopping between jobs
    /// on a signal ([`each`]); a type whose write is a round trip (a push)
    /// plants them all at once here instead.
    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Self::Carrier>],
        journal: &mut Journal<'_, Self::Entry>,
    ) -> Vec<PlantOutcome<Self::Needle>> {
        each(jobs, Self::PLANTED_LAST, |job| {
            self.plant_one(ctx, job, journal)
        })
    }

    /// Plants one job: what a type that plants one carrier at a time
    /// writes (the other writes [`Surface::plant`]).
    fn plant_one(
        &self,
        _ctx: &RunCtx<'_>,
        _job: &Job<Self::Carrier>,
        _journal: &mut Journal<'_, Self::Entry>,
    ) -> PlantOutcome<Self::Needle> {
        PlantOutcome::Error {
            reason: format!("{} plants its carriers all at once", Self::NAME),
        }
    }

    /// Looks for every wanted needle; one answer per wanted carrier, in
    /// order (a miss with the look of each route it read: [`Recovered`]).
    /// Markers that do not verify and beacons of other probes go to
    /// `notice`.
    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Self::Carrier, Self::Needle>],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<Recovered>;

    /// Whether `entry` is provably this probe's own: it has the form only
    /// a plant of `ctx.probe_id` makes (the derived name with its tag, a
    /// path that stays in the probed directory). `Invalid` for anything
    /// else. The kernel asks this of every entry (and of what a retraction
    /// takes back) before [`Surface::clean`] sees it; what a surface reads
    /// back before a removal (the marker, the planted content) it checks
    /// in `clean` itself.
    fn owns(&self, ctx: &RunCtx<'_>, entry: &Self::Entry) -> Result<(), Fault>;

    /// Whether a retraction of `taken` takes back `entry` (which then needs
    /// no cleanup): by default when they are the same entry. A type whose
    /// older journals retract in another form says how those pair.
    fn takes_back(taken: &Self::Entry, entry: &Self::Entry) -> bool {
        taken == entry
    }

    /// Removes what `entries` name (newest first, each provably ours,
    /// retractions and what they took back already set aside), each after
    /// checking it is still what was planted; one outcome per entry. By
    /// default one entry at a time ([`Surface::clean_one`]); a type whose
    /// journal holds an intent and then the fuller entry, or that removes
    /// everything in one request, cleans the journal whole here instead.
    fn clean(&self, entries: &[Self::Entry]) -> Vec<CleanupOutcome> {
        entries.iter().map(|e| self.clean_one(e)).collect()
    }

    /// Removes what one entry names: what a type that cleans one entry at
    /// a time writes (the other writes [`Surface::clean`]).
    fn clean_one(&self, _entry: &Self::Entry) -> CleanupOutcome {
        CleanupOutcome::Left {
            reason: format!("{} cleans its journal whole", Self::NAME),
        }
    }

    /// Finds what a plant of `jobs` (nonces derived from the probe id and
    /// key) left here, as journal entries: cleanup by probe id, for a plant
    /// whose receipt is lost. Only entries that carry their job's derived
    /// name or nonce; what sits under such a name and is not a plant's is
    /// [`Found::left`], which cleanup's account lists. `Unsupported` for a
    /// type that cannot look.
    fn find(
        &self,
        _ctx: &RunCtx<'_>,
        _jobs: &[Job<Self::Carrier>],
    ) -> Result<Found<Self::Entry>, Fault> {
        Err(Fault::unsupported(
            "this surface type cannot find plants by probe id; use the receipt",
        ))
    }

    /// The needle a plant of `carrier` with `nonce` would report, computed
    /// without planting: what a `recover` in a later job looks for when it
    /// has no plant receipt. By default the nonce itself, where the needle
    /// type can be one ([`Needle::of_nonce`]); `Unsupported` for a carrier
    /// whose needle depends on what the plant really stored. (Never asked
    /// for [`super::RUNNER_PERSISTENCE`], which looks for other probes'
    /// beacons: its needle is `{"beacons": true}` for every type, which a
    /// type offering it must parse.)
    fn derive(
        _carrier: Self::Carrier,
        _ctx: &RunCtx<'_>,
        nonce: &Nonce,
        _scope: Option<&JobScope>,
    ) -> Result<Self::Needle, Fault> {
        Self::Needle::of_nonce(nonce)
            .ok_or_else(|| Fault::unsupported("the needle depends on what the plant stored"))
    }

    /// Watch mode: streams everything run B's listing would see here, in
    /// [`crate::state::snapshot::key_order`], to `sink`. Only called when
    /// [`Surface::WATCH`] says the type can be listed.
    fn snapshot(&self, _ctx: &WatchCtx, _sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
        Err(SnapshotError::Unsupported(
            "watch mode cannot list this surface type".into(),
        ))
    }
}

/// A key a declaration may scope a type's channels by (`refs:`,
/// `keys:`), and the check of a value for one carrier: that the carrier
/// can be planted both inside and outside it (`Invalid` otherwise, saying
/// why).
pub struct Scope<C: 'static> {
    pub key: &'static str,
    pub check: fn(C, &str) -> Result<(), Fault>,
}

/// Whether watch mode can list a surface type.
pub enum Watch<C: 'static> {
    /// It can ([`Surface::snapshot`] lists it): `unwatched`, the carriers
    /// a snapshot cannot see, each with the reason (SKIPPED in watch
    /// mode); `changes`, the carriers a change the watched command made
    /// would carry (`Before`: what the first snapshot held).
    Yes {
        unwatched: &'static [(C, &'static str)],
        changes: fn(&Change, &Before) -> Vec<C>,
    },
    /// It cannot, and why.
    No(&'static str),
}

/// A needle type: what a plant reports and recovery looks for.
pub trait Needle: Serialize + DeserializeOwned + Clone {
    /// The needle that is the nonce itself, where this type has one (the
    /// network surfaces plant the nonce's hex form): the default
    /// [`Surface::derive`].
    fn of_nonce(_nonce: &Nonce) -> Option<Self> {
        None
    }
}

/// The nonce as its own needle (its hex form on the wire).
impl Needle for Nonce {
    fn of_nonce(nonce: &Nonce) -> Option<Nonce> {
        Some(*nonce)
    }
}

/// A needle that is the nonce itself, or (for
/// [`super::RUNNER_PERSISTENCE`], which looks for other probes' beacons)
/// `{"beacons": true}`: what a type offering runner-persistence beside
/// carriers of the nonce plants.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum NonceOrBeacons {
    Nonce(Nonce),
    Beacons { beacons: bool },
}

impl Needle for NonceOrBeacons {
    fn of_nonce(nonce: &Nonce) -> Option<NonceOrBeacons> {
        Some(NonceOrBeacons::Nonce(*nonce))
    }
}

/// One carrier to plant, parsed: see [`super::PlantJob`].
#[derive(Debug, Clone)]
pub struct Job<C> {
    /// Tells apart two plants of one carrier (inside and outside a
    /// declared scope).
    pub key: String,
    pub carrier: C,
    pub nonce: Nonce,
    pub scope: Option<JobScope>,
    /// For [`super::RUNNER_PERSISTENCE`]: the signed beacon to leave.
    pub beacon: Option<String>,
}

/// One carrier to recover, with what its plant said to look for.
#[derive(Debug, Clone)]
pub struct Want<C, N> {
    pub key: String,
    pub carrier: C,
    pub needle: N,
    /// The scope the plant was placed by, for carriers whose agreed name
    /// it changes.
    pub scope: Option<JobScope>,
}

/// Where run A journals what it creates: each line reaches the engine
/// (flushed) before the write it announces.
pub struct Journal<'a, E> {
    sink: &'a mut dyn FnMut(serde_json::Value),
    _entry: std::marker::PhantomData<fn(&E)>,
}

impl<'a, E: Serialize> Journal<'a, E> {
    /// A journal that hands each line, serialized, to `sink`.
    pub fn new(sink: &'a mut dyn FnMut(serde_json::Value)) -> Journal<'a, E> {
        Journal {
            sink,
            _entry: std::marker::PhantomData,
        }
    }

    /// Journals `entry`: before the write that creates it.
    pub fn record(&mut self, entry: &E) {
        (self.sink)(serde_json::to_value(entry).expect("entries serialize"));
    }

    /// Takes `entry` back: the write answered that it made nothing (a
    /// refusal, an error that provably created nothing, or run A removed
    /// it itself), so cleanup has nothing to do for it.
    pub fn retract(&mut self, entry: &E) {
        (self.sink)(super::retraction(
            &serde_json::to_value(entry).expect("entries serialize"),
        ));
    }
}

/// Plants `jobs` one at a time with `plant`, those of `last` carriers
/// after every other, stopping between jobs when a signal asked run A to
/// stop (the job under way is finished: a few syscalls or one request; no
/// new one starts). One outcome per job, in the jobs' order.
pub fn each<C: PartialEq, N>(
    jobs: &[Job<C>],
    last: &[C],
    mut plant: impl FnMut(&Job<C>) -> PlantOutcome<N>,
) -> Vec<PlantOutcome<N>> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| last.contains(&jobs[i].carrier));
    let mut out: Vec<Option<PlantOutcome<N>>> = jobs.iter().map(|_| None).collect();
    for i in order {
        out[i] = Some(match crate::signals::received() {
            Some(sig) => super::interrupted(sig),
            None => plant(&jobs[i]),
        });
    }
    out.into_iter().flatten().collect()
}

/// Plants `jobs` as [`each`] does, between a route's two witnesses
/// ([`super::witness`]): `witness` makes the one on each side (a type whose
/// later witness is a plant of its own makes nothing after). Nothing is
/// written for no jobs, and no write starts once a signal asked run A to
/// stop. (A witness that could not be made is found missing by run B,
/// whose misses then count for nothing: its outcome is not kept.)
pub fn between<C: PartialEq, N, J>(
    jobs: &[Job<C>],
    last: &[C],
    journal: &mut J,
    mut witness: impl FnMut(super::witness::Side, &mut J),
    mut plant: impl FnMut(&Job<C>, &mut J) -> PlantOutcome<N>,
) -> Vec<PlantOutcome<N>> {
    if let Some(sig) = crate::signals::received() {
        return jobs.iter().map(|_| super::interrupted(sig)).collect();
    }
    if jobs.is_empty() {
        return vec![];
    }
    witness(super::witness::Side::Before, journal);
    let out = each(jobs, last, |job| plant(job, journal));
    if crate::signals::received().is_none() {
        witness(super::witness::Side::After, journal);
    }
    out
}

/// A control instance: its settings, and whatever must stay alive while
/// the probe runs (a loopback service), dropped when the probe ends.
pub struct Control<S = serde_json::Value> {
    pub settings: S,
    pub keep: Option<Box<dyn std::any::Any>>,
    /// For a control served by a loopback service: what turns its route
    /// faults on and off (false for one it does not have), for the
    /// conformance suite.
    pub knobs: Option<Box<dyn Fn(crate::loopback::Knob, bool) -> bool + Send + Sync>>,
}

impl<S> Control<S> {
    /// A control served by `keep` (a loopback service) for as long as the
    /// probe runs.
    pub fn served(settings: S, keep: impl std::any::Any) -> Control<S> {
        Control {
            settings,
            keep: Some(Box::new(keep)),
            knobs: None,
        }
    }

    /// A control served by `service`, whose routes can be made to fail.
    pub fn served_with_knobs<L>(settings: S, service: crate::loopback::Service<L>) -> Control<S>
    where
        L: crate::loopback::Knobs + Send + 'static,
    {
        let knobs = Some(service.knobs());
        Control {
            knobs,
            ..Control::served(settings, service)
        }
    }

    /// A control that is only settings (a directory, a local repository).
    pub fn settings(settings: S) -> Control<S> {
        Control {
            settings,
            keep: None,
            knobs: None,
        }
    }
}

/// What a surface's settings say about themselves ([`Surface::about`]),
/// built one statement at a time. Text in it is already escaped.
pub struct About<C> {
    pub(super) place: String,
    pub(super) facts: Vec<(&'static str, String)>,
    pub(super) warnings: Vec<String>,
    pub(super) exposures: Vec<(Option<C>, String)>,
    pub(super) unavailable: Vec<(Option<C>, String)>,
    pub(super) identity: Option<String>,
    pub(super) persistence: Option<Persistence>,
    pub(super) root: Option<std::path::PathBuf>,
    /// Why a credential the config names is missing here, when it is.
    pub(super) secret_missing: Option<String>,
}

impl<C: CarrierSet> About<C> {
    /// Settings whose entries live `place` (the words after an entry's
    /// own: "in /tmp", "on the control", "of owner/repo"), escaped.
    pub fn new(place: impl Into<String>) -> About<C> {
        About {
            place: place.into(),
            facts: vec![],
            warnings: vec![],
            exposures: vec![],
            unavailable: vec![],
            identity: None,
            persistence: None,
            root: None,
            secret_missing: None,
        }
    }

    /// A credential the config names is missing here (`why` names its
    /// variable): every carrier is SKIPPED with it (a fork's pull request
    /// gets no secrets, and must not fail for it), `check-config` warns,
    /// and coverage lists the surface as a gap, since nothing of it was
    /// tested (coverage).
    pub fn secret_missing(mut self, why: impl Into<String>) -> About<C> {
        let why = why.into();
        self.unavailable.push((None, why.clone()));
        self.warnings
            .push(format!("{why}: every carrier of it will be SKIPPED"));
        self.secret_missing = Some(why);
        self
    }

    /// A fact the report shows: which credential it uses and what that
    /// credential claims, by name and claim, never its value.
    pub fn fact(mut self, name: &'static str, value: impl Into<String>) -> About<C> {
        self.facts.push((name, value.into()));
        self
    }

    /// Something that will not work here but may where the probe runs (a
    /// path that exists only on the runner): `check-config` prints it.
    pub fn warning(mut self, text: impl Into<String>) -> About<C> {
        self.warnings.push(text.into());
        self
    }

    /// What every channel of these settings tests, as coverage names the
    /// environment's exposures (docs/coverage.md): `registry:<origin>`,
    /// `path:<path>` and the like. A `permission:` exposure only where the
    /// plant writes with the job's own token to the job's own repository.
    /// (A runner-persistence channel also tests `runner-persistence`: the
    /// kernel adds it.)
    pub fn exposure(mut self, id: impl Into<String>) -> About<C> {
        self.exposures.push((None, id.into()));
        self
    }

    /// What a channel of `carrier` tests besides every channel's.
    pub fn exposure_of(mut self, carrier: C, id: impl Into<String>) -> About<C> {
        self.exposures.push((Some(carrier), id.into()));
        self
    }

    /// Every carrier is ruled out (SKIPPED), with the reason (credentials
    /// the config names are unset, say).
    pub fn unavailable(mut self, why: impl Into<String>) -> About<C> {
        self.unavailable.push((None, why.into()));
        self
    }

    /// `carrier` is ruled out (SKIPPED), with the reason (`content-reads:
    /// false`, an opt-in not given).
    pub fn unavailable_of(mut self, carrier: C, why: impl Into<String>) -> About<C> {
        self.unavailable.push((Some(carrier), why.into()));
        self
    }

    /// What the instance is, when two configured surfaces can name the
    /// same thing by different names (a directory through a bind mount or
    /// a symlink, one daemon by two spellings): the engine probes each
    /// thing once, under the first name, and says so for the others.
    pub fn identity(mut self, identity: Option<String>) -> About<C> {
        self.identity = identity;
        self
    }

    /// How long anything put here lasts, when the instance knows better
    /// than its carriers' defaults (a directory on tmpfs: until reboot).
    pub fn persistence(mut self, persistence: Option<Persistence>) -> About<C> {
        self.persistence = persistence;
        self
    }

    /// The settings name this directory of the local file system: watch
    /// mode keys runwarden's own files under it by their path (their
    /// parents' times change by its doing).
    pub fn root(mut self, dir: std::path::PathBuf) -> About<C> {
        self.root = Some(dir);
        self
    }
}
