//! The kernel's adapter: one implementation of the engine-facing traits
//! ([`SurfaceType`], [`Instance`], [`Watchable`]) for every typed
//! [`Surface`]. The engine, the child protocol and the receipt keep their
//! JSON; this is where it becomes typed and back:
//! - carriers arrive as names and are parsed once (a job whose carrier is
//!   none of the type's is an ERROR, never planted);
//! - settings, needles and journal entries are (de)serialised here, and
//!   an entry that does not parse as the type's own is never its own:
//!   [`Instance::owns`] refuses it before any removal;
//! - a retraction and what it takes back ([`Surface::takes_back`]) need
//!   no cleanup and count as nothing; the rest of the journal goes to
//!   [`Surface::clean`] at once;
//! - an entry is described as the type shows it, then where it lives.

use super::carrier::CarrierSet;
use super::owned::by_slot;
use super::typed::{About, Job, Journal, Surface, Want, Watch};
use super::{
    Carrier, CleanupOutcome, Control, Instance, JobScope, Notice, Persistence, PlantJob,
    PlantOutcome, RUNNER_PERSISTENCE, RecoverOutcome, RunCtx, SurfaceType, Wanted, Watchable,
};
use crate::config::{ConfigError, Options};
use crate::fault::Fault;
use crate::nonce::Nonce;
use crate::state::diff::{Before, Change};
use crate::state::snapshot::{Sink, SnapshotError, WatchCtx};
use serde_json::Value;
use std::marker::PhantomData;
use std::path::Path;

/// The engine's view of the surface type `S`: what [`super::REGISTRY`]
/// lists (`&Typed::<S>::TYPE`).
pub struct Typed<S>(PhantomData<fn() -> S>);

impl<S> Typed<S> {
    /// The registry's entry for `S`.
    pub const TYPE: Typed<S> = Typed(PhantomData);
}

/// `S`'s settings from the engine's JSON; `Invalid` for anything
/// `validate` or `control` did not make.
fn settings_of<S: Surface>(settings: &Value) -> Result<S::Settings, Fault> {
    serde_json::from_value(settings.clone())
        .map_err(|e| Fault::invalid(format!("bad {} settings ({})", S::NAME, category(&e))))
}

/// A serde error's category only: its text could quote a setting
/// (settings hold credentials) or a hostile journal entry.
fn category(e: &serde_json::Error) -> &'static str {
    match e.classify() {
        serde_json::error::Category::Io => "io",
        serde_json::error::Category::Syntax => "syntax",
        serde_json::error::Category::Data => "data",
        serde_json::error::Category::Eof => "eof",
    }
}

/// A value the kernel made from a typed one: settings, a needle, an entry.
fn json(v: &impl serde::Serialize) -> Value {
    serde_json::to_value(v).expect("typed surface values serialize")
}

/// What `S`'s settings say about themselves (`None`: they do not parse,
/// and say nothing).
fn about<S: Surface>(settings: &Value) -> Option<About<S::Carrier>> {
    settings_of::<S>(settings).ok().map(|s| S::about(&s))
}

impl<S: Surface> SurfaceType for Typed<S> {
    fn name(&self) -> &'static str {
        S::NAME
    }

    fn description(&self) -> &'static str {
        S::DESCRIPTION
    }

    fn carriers(&self) -> &'static [Carrier] {
        S::Carrier::TABLE
    }

    fn later_job_only(&self, carrier: &str) -> bool {
        S::Carrier::parse(carrier).is_some_and(|c| S::LATER_JOB_ONLY.contains(&c))
    }

    fn keys(&self) -> &'static [&'static str] {
        S::KEYS
    }

    fn scope_keys(&self) -> Vec<&'static str> {
        S::SCOPES.iter().map(|s| s.key).collect()
    }

    fn check_scope(&self, carrier: &str, key: &str, value: &str) -> Result<(), Fault> {
        match (
            S::Carrier::parse(carrier),
            S::SCOPES.iter().find(|s| s.key == key),
        ) {
            (Some(c), Some(scope)) => (scope.check)(c, value),
            _ => Err(Fault::invalid(format!(
                "carrier {carrier} cannot be scoped by `{key}`"
            ))),
        }
    }

    fn validate(&self, opts: Options<'_>) -> Result<Value, ConfigError> {
        S::validate(opts).map(|s| json(&s))
    }

    fn control(&self, settings: &Value, dir: &Path) -> Result<Control, Fault> {
        let like = serde_json::from_value::<S::Settings>(settings.clone()).ok();
        let c = S::control(like.as_ref(), dir)?;
        Ok(Control {
            settings: json(&c.settings),
            keep: c.keep,
            knobs: c.knobs,
        })
    }

    fn secret_missing(&self, settings: &Value) -> Option<String> {
        about::<S>(settings).and_then(|a| a.secret_missing)
    }

    fn warnings(&self, settings: &Value) -> Vec<String> {
        about::<S>(settings).map(|a| a.warnings).unwrap_or_default()
    }

    fn facts(&self, settings: &Value) -> Vec<(&'static str, String)> {
        about::<S>(settings).map(|a| a.facts).unwrap_or_default()
    }

    fn exposures(&self, settings: &Value, carrier: &str) -> Vec<String> {
        let Some(about) = about::<S>(settings) else {
            return vec![];
        };
        let c = S::Carrier::parse(carrier);
        let mut out: Vec<String> = about
            .exposures
            .into_iter()
            .filter(|(of, _)| of.is_none() || *of == c)
            .map(|(_, id)| id)
            .collect();
        // Every surface's beacons test whether the runner kept state.
        if carrier == RUNNER_PERSISTENCE {
            out.push("runner-persistence".into());
        }
        out
    }

    fn open(&self, settings: &Value) -> Result<Box<dyn Instance>, Fault> {
        let s = settings_of::<S>(settings)?;
        let about = S::about(&s);
        Ok(Box::new(Open {
            surface: S::open(s)?,
            about,
        }))
    }

    fn routes(&self) -> Vec<(&'static str, Vec<&'static str>)> {
        S::ROUTES
            .iter()
            .map(|r| (r.name, r.carriers.iter().map(|c| c.name()).collect()))
            .collect()
    }

    fn derive_needle(
        &self,
        carrier: &str,
        ctx: &RunCtx<'_>,
        nonce: &Nonce,
        scope: Option<&JobScope>,
    ) -> Result<Value, Fault> {
        let c = S::Carrier::parse(carrier)
            .ok_or_else(|| Fault::invalid(format!("unknown carrier {carrier}")))?;
        // runner-persistence looks for beacons of other probes, never for
        // this plant: whatever the type, its needle says only that.
        if carrier == RUNNER_PERSISTENCE {
            return Ok(serde_json::json!({ "beacons": true }));
        }
        S::derive(c, ctx, nonce, scope).map(|n| json(&n))
    }
}

/// `j` with its carrier parsed, when it is one of `S`'s.
fn job_of<S: Surface>(j: &PlantJob) -> Option<Job<S::Carrier>> {
    Some(Job {
        key: j.key.clone(),
        carrier: S::Carrier::parse(&j.carrier)?,
        nonce: j.nonce,
        scope: j.scope.clone(),
        beacon: j.beacon.clone(),
    })
}

/// An open instance of `S`, with what its settings say.
struct Open<S: Surface> {
    surface: S,
    about: About<S::Carrier>,
}

impl<S: Surface> Open<S> {
    /// `entry` as `S`'s journal entry (what a retraction takes back, for a
    /// retraction).
    fn entry(entry: &Value) -> Result<S::Entry, Fault> {
        let inner = entry.get("retract").unwrap_or(entry);
        serde_json::from_value(inner.clone()).map_err(|e| {
            Fault::invalid(format!(
                "not a {} journal entry ({})",
                S::NAME,
                category(&e)
            ))
        })
    }
}

impl<S: Surface> Instance for Open<S> {
    fn unavailable(&self, carrier: &str) -> Option<String> {
        let c = S::Carrier::parse(carrier);
        self.about
            .unavailable
            .iter()
            .find(|(of, _)| of.is_none() || *of == c)
            .map(|(_, why)| why.clone())
    }

    fn identity(&self) -> Option<String> {
        self.about.identity.clone()
    }

    fn persistence(&self) -> Option<Persistence> {
        self.about.persistence
    }

    fn plant_all(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[PlantJob],
        created: &mut dyn FnMut(Value),
    ) -> Vec<PlantOutcome> {
        by_slot(
            jobs,
            |j| {
                job_of::<S>(j).ok_or_else(|| PlantOutcome::Error {
                    reason: format!("unknown carrier {}", j.carrier),
                })
            },
            |typed| {
                let mut journal = Journal::new(created);
                self.surface
                    .plant(ctx, &typed, &mut journal)
                    .into_iter()
                    .map(|o| o.map_needle(|n| json(&n)))
                    .collect()
            },
            || PlantOutcome::Error {
                reason: "the surface reported no outcome for this carrier".into(),
            },
        )
    }

    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Wanted],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        by_slot(
            wanted,
            |w| {
                let carrier =
                    S::Carrier::parse(&w.carrier).ok_or_else(super::carrier::not_a_carrier)?;
                let needle = serde_json::from_value(w.needle.clone()).map_err(|_| {
                    RecoverOutcome::Error {
                        reason: format!(
                            "the plant's needle is not one a {} plant reports",
                            S::NAME
                        ),
                    }
                })?;
                Ok(Want {
                    key: w.key.clone(),
                    carrier,
                    needle,
                    scope: w.scope.clone(),
                })
            },
            |typed| {
                let carriers: Vec<S::Carrier> = typed.iter().map(|w| w.carrier).collect();
                let answers = self.surface.recover(ctx, &typed, notice);
                // One answer per wanted carrier is the type's contract; a
                // missing one is no look (`not_a_carrier` fills it).
                carriers
                    .into_iter()
                    .zip(answers)
                    .map(|(c, r)| super::routes::judge(S::ROUTES, c, r))
                    .collect()
            },
            super::carrier::not_a_carrier,
        )
    }

    fn find_planted(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[PlantJob],
    ) -> Result<super::Found<Value>, Fault> {
        let typed: Vec<Job<S::Carrier>> = jobs.iter().filter_map(job_of::<S>).collect();
        let found = self.surface.find(ctx, &typed)?;
        let place = &self.about.place;
        let left = found
            .left
            .into_iter()
            .map(|(what, why)| (format!("{what} {place}"), why))
            .collect();
        Ok(super::Found {
            ours: found.ours.iter().map(json).collect(),
            left,
        })
    }

    /// The type's ownership rule, for this surface; and for a name no
    /// surface is bound into, as 0.11.0 made every name
    /// ([`RunCtx::surface_tag`]): its plants stay owned, and a name bound
    /// to another surface never is.
    fn owns(&self, ctx: &RunCtx<'_>, entry: &Value) -> Result<(), Fault> {
        let entry = Self::entry(entry)?;
        self.surface.owns(ctx, &entry).or_else(|why| {
            if ctx.surface.is_empty() {
                return Err(why);
            }
            let unbound = RunCtx {
                surface: "",
                ..*ctx
            };
            self.surface.owns(&unbound, &entry).map_err(|_| why)
        })
    }

    fn cleanup_all(&self, entries: &[Value]) -> Vec<CleanupOutcome> {
        // What the journal's retractions take back, as `S` reads them.
        let taken: Vec<S::Entry> = entries
            .iter()
            .filter_map(|e| serde_json::from_value(e.get("retract")?.clone()).ok())
            .collect();
        by_slot(
            entries,
            |e| {
                if e.get("retract").is_some() {
                    return Err(CleanupOutcome::Superseded);
                }
                match serde_json::from_value::<S::Entry>(e.clone()) {
                    Ok(typed) if taken.iter().any(|t| S::takes_back(t, &typed)) => {
                        Err(CleanupOutcome::Superseded)
                    }
                    Ok(typed) => Ok(typed),
                    // (Never reached through [`super::cleanup_owned`],
                    // which asks `owns` first.)
                    Err(err) => Err(CleanupOutcome::Foreign {
                        reason: format!(
                            "not runwarden's: not a {} journal entry ({})",
                            S::NAME,
                            category(&err)
                        ),
                    }),
                }
            },
            |live| self.surface.clean(&live),
            || CleanupOutcome::Left {
                reason: "cleanup never reported this entry".into(),
            },
        )
    }

    fn describe(&self, entry: &Value) -> String {
        // A "retraction" naming more than what it takes back is shown as
        // written: by the entry it retracts, two forged ones would read
        // as one of ours.
        let forged_retraction =
            entry.get("retract").is_some() && entry.as_object().is_some_and(|o| o.len() != 1);
        match Self::entry(entry)
            .map_err(|_| ())
            .and_then(|e| if forged_retraction { Err(()) } else { Ok(e) })
        {
            Ok(e) => format!("{e} {}", self.about.place),
            Err(_) => format!(
                "{} (not a {} journal entry) {}",
                crate::escape::line(&clip(&entry.to_string())),
                S::NAME,
                self.about.place
            ),
        }
    }

    fn watch(&self) -> Result<&dyn Watchable, &'static str> {
        match S::WATCH {
            Watch::Yes { .. } => Ok(self),
            Watch::No(why) => Err(why),
        }
    }
}

/// At most 200 characters of `s`, with `…` where it was cut.
fn clip(s: &str) -> String {
    crate::escape::clip(s, 200)
}

impl<S: Surface> Watchable for Open<S> {
    fn snapshot(&self, ctx: &WatchCtx, sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
        self.surface.snapshot(ctx, sink)
    }

    fn carriers_of(&self, change: &Change, before: &Before) -> Vec<&'static str> {
        let Watch::Yes { changes, .. } = S::WATCH else {
            return vec![];
        };
        let mut out: Vec<&'static str> = changes(change, before)
            .into_iter()
            .map(CarrierSet::name)
            .collect();
        out.sort();
        out.dedup();
        out
    }

    fn unwatched(&self, carrier: &str) -> Option<&'static str> {
        let Watch::Yes { unwatched, .. } = S::WATCH else {
            return None;
        };
        let c = S::Carrier::parse(carrier)?;
        unwatched
            .iter()
            .find(|(of, _)| *of == c)
            .map(|(_, why)| *why)
    }

    fn key_of(&self, path: &Path) -> Option<Vec<String>> {
        use std::os::unix::ffi::OsStrExt;
        let rest = path.strip_prefix(self.about.root.as_ref()?).ok()?;
        Some(
            rest.components()
                .map(|c| crate::state::snapshot::component(c.as_os_str().as_bytes()))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::marker::Key;
    use crate::surface::{PlantJob, PlantOutcome, RunCtx, by_name};

    /// A job whose carrier is none of the type's is never planted: its
    /// outcome says so (moved here with the parsing, from `CarrierSet`).
    #[test]
    fn a_job_of_no_carrier_of_the_type_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let ty = by_name("filesystem").unwrap();
        let settings = serde_json::json!({ "path": dir.path(), "content-reads": true });
        let inst = ty.open(&settings).unwrap();
        let job: PlantJob = serde_json::from_value(serde_json::json!({
            "key": "k", "carrier": "file-sizes", "nonce": "00".repeat(16),
        }))
        .unwrap();
        let key = Key::new(None);
        let ctx = RunCtx {
            probe_id: "p1",
            key: &key,
            surface: "test",
        };
        let mut journal = vec![];
        assert_eq!(
            inst.plant(&ctx, &job, &mut |e| journal.push(e)),
            PlantOutcome::Error {
                reason: "unknown carrier file-sizes".into()
            }
        );
        assert!(journal.is_empty());
    }
}
