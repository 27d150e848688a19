//! A watch's findings: one per carrier of each surface, from the changes
//! attributed to it, and one per kind of canary, from its reads. The
//! verdicts themselves are `crate::verdict::decide_watch`.

use super::{Seen, Watch, shown};
use crate::plan::Location;
use crate::report::{CANARY_TYPE, Canaries, Cleanup, Finding, Leftover, Observation};
use crate::state::diff::{Change, ChangeKind};
use crate::state::snapshot::SnapshotError;
use crate::surface::{self, Persistence, SurfaceType, Watchable};
use crate::verdict::{self, Control, Watched};
use crate::watch::canary;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One carrier's changes being gathered.
#[derive(Default)]
struct Tally {
    inside: usize,
    outside: usize,
    observed: Vec<Observation>,
    omitted: u64,
}

/// Changed attributes for people: the change time goes with every other
/// change, so it is named only when it changed alone.
fn attrs_shown(attrs: &[String]) -> String {
    let rest: Vec<&str> = attrs
        .iter()
        .map(String::as_str)
        .filter(|a| *a != "ctime")
        .collect();
    if rest.is_empty() {
        attrs.join(", ")
    } else {
        rest.join(", ")
    }
}

fn observation(c: &Change) -> Observation {
    let e = c.entry();
    let change = match &c.kind {
        ChangeKind::Created => "created".to_string(),
        ChangeKind::Removed => "removed".to_string(),
        ChangeKind::Changed(attrs) => format!("changed: {}", attrs_shown(attrs)),
        ChangeKind::Renamed(attrs) => {
            let from = c.before.as_ref().map(|b| b.shown()).unwrap_or_default();
            match attrs_shown(attrs).as_str() {
                "" | "ctime" => format!("renamed from {from}"),
                a => format!("renamed from {from}, changed: {a}"),
            }
        }
    };
    Observation {
        entry: e.shown(),
        change,
        at: match c.kind {
            ChangeKind::Removed => None,
            _ => e.at.clone(),
        },
        pid: None,
    }
}

/// The names a change had, for a declared scope: a rename is inside only
/// if both its names are.
fn names(c: &Change) -> Vec<&str> {
    [c.before.as_ref(), c.after.as_ref()]
        .into_iter()
        .flatten()
        .map(|e| e.key.first().map(String::as_str).unwrap_or(""))
        .collect()
}

fn listed(l: &[(PathBuf, String)]) -> Vec<Leftover> {
    l.iter()
        .map(|(p, why)| Leftover {
            surface: CANARY_TYPE.into(),
            control: false,
            entry: shown(p),
            reason: why.clone(),
        })
        .collect()
}

fn canary_finding(
    kind: canary::Kind,
    (verdict, detail): (crate::verdict::Verdict, String),
    observed: Vec<Observation>,
) -> Finding {
    Finding {
        channel: format!("{CANARY_TYPE}:{}", kind.as_str()),
        surface: CANARY_TYPE.into(),
        surface_type: CANARY_TYPE.into(),
        carrier: kind.as_str().into(),
        verdict,
        persistence: Persistence::Transient,
        declared: false,
        control: Control::NotRun,
        detail,
        location: None,
        declared_at: None,
        declared_reason: None,
        scope: None,
        observed,
        observed_omitted: 0,
    }
}

impl Watch<'_> {
    /// The canaries' findings and record; the paths placed. Every canary
    /// is removed here (if it is still the one placed).
    pub(super) fn canary_findings(
        &mut self,
        findings: &mut Vec<Finding>,
        cleanup: &mut Cleanup,
    ) -> (Canaries, Vec<PathBuf>) {
        let mut record = Canaries::default();
        let Some(mut armed) = self.armed.take() else {
            if !self.specs.is_empty() {
                let why = self
                    .arm_failure
                    .clone()
                    .unwrap_or_else(|| "no canary was placed".into());
                for kind in canary::Kind::ALL {
                    findings.push(canary_finding(
                        *kind,
                        verdict::decide_watch(&Watched::Broken(format!(
                            "the canaries could not be armed: {why}"
                        ))),
                        vec![],
                    ));
                }
            }
            return (record, vec![]);
        };
        let detector = armed.detector();
        record.detector = Some(detector.as_str().into());
        let placed: Vec<PathBuf> = armed.paths().iter().map(|p| p.to_path_buf()).collect();
        record.placed = placed.iter().map(|p| shown(p)).collect();
        record.skipped = listed(armed.skipped());
        let reads = armed.collect();
        let left = armed.disarm();
        let gone = reads
            .as_ref()
            .map_or(0, |r| r.iter().filter(|r| r.how == canary::REMOVED).count());
        cleanup.removed = (placed.len() - left.len()) as u64;
        cleanup.already_gone = gone as u64;
        cleanup.deleted = cleanup.removed.saturating_sub(gone as u64);
        cleanup.left = listed(&left);
        for kind in canary::Kind::ALL {
            if !self.specs.iter().any(|s| s.kind == *kind) {
                continue;
            }
            let of_kind: Vec<&PathBuf> = self
                .specs
                .iter()
                .filter(|s| s.kind == *kind && placed.contains(&s.path))
                .map(|s| &s.path)
                .collect();
            let (decision, observed) = match (&reads, of_kind.len()) {
                (_, 0) => (
                    verdict::decide_watch(&Watched::Unsupported(
                        "no canary of this kind was placed (see watch.canaries.skipped)".into(),
                    )),
                    vec![],
                ),
                (Err(e), _) => (
                    verdict::decide_watch(&Watched::Broken(format!(
                        "the canaries' reads could not be collected: {e}"
                    ))),
                    vec![],
                ),
                (Ok(reads), n) => {
                    let observed: Vec<Observation> = reads
                        .iter()
                        .filter(|r| of_kind.contains(&&r.path))
                        .map(|r| Observation {
                            entry: shown(&r.path),
                            change: canary::describe(r),
                            at: None,
                            pid: r.pid,
                        })
                        .collect();
                    (
                        verdict::decide_watch(&Watched::Canary {
                            placed: n,
                            reads: observed.len(),
                            detector: detector.as_str(),
                        }),
                        observed,
                    )
                }
            };
            findings.push(canary_finding(*kind, decision, observed));
        }
        (record, placed)
    }

    /// One finding per carrier of surface `i`, from what the second
    /// snapshot saw (or why there is none).
    pub(super) fn surface_findings(
        &self,
        i: usize,
        ty: &dyn SurfaceType,
        watchable: Option<&dyn Watchable>,
        state: Result<Seen, SnapshotError>,
        persistence: Option<Persistence>,
    ) -> Vec<Finding> {
        let sp = &self.plan.surfaces[i];
        let mut tallies: BTreeMap<&'static str, Tally> = BTreeMap::new();
        if let (Ok(seen), Some(w)) = (&state, watchable) {
            for c in &seen.changes {
                for carrier in w.carriers_of(c, &seen.before) {
                    let t = tallies.entry(carrier).or_default();
                    let channel = format!("{}:{carrier}", sp.name);
                    let inside = match self.plan.declaration(&channel) {
                        Some(d) => d.scope.as_ref().is_none_or(|sc| {
                            names(c).iter().all(|n| surface::glob_match(&sc.value, n))
                        }),
                        None => true,
                    };
                    if inside {
                        t.inside += 1;
                    } else {
                        t.outside += 1;
                    }
                    if t.observed.len() < crate::report::MAX_OBSERVED {
                        t.observed.push(observation(c));
                    } else {
                        t.omitted += 1;
                    }
                }
            }
        }
        ty.carriers()
            .iter()
            .map(|carrier| {
                let channel = format!("{}:{}", sp.name, carrier.name);
                let decl = self.plan.declaration(&channel);
                let unwatched = watchable.and_then(|w| w.unwatched(carrier.name));
                let watched = match (&state, unwatched) {
                    (_, Some(why)) => Watched::Unsupported(why.into()),
                    (Err(SnapshotError::Unsupported(why)), None) => {
                        Watched::Unsupported(why.clone())
                    }
                    (Err(SnapshotError::Failed(why)), None) => {
                        Watched::Broken(format!("the surface could not be looked at: {why}"))
                    }
                    (Ok(seen), None) => {
                        let t = tallies.get(carrier.name);
                        Watched::Changes {
                            declared: decl.is_some(),
                            inside: t.map_or(0, |t| t.inside),
                            outside: t.map_or(0, |t| t.outside),
                            unseen: seen.unseen.clone(),
                        }
                    }
                };
                let (verdict, detail) = verdict::decide_watch(&watched);
                Finding {
                    channel,
                    surface: sp.name.clone(),
                    surface_type: sp.type_name.into(),
                    carrier: carrier.name.into(),
                    verdict,
                    persistence: persistence.unwrap_or(carrier.persistence),
                    declared: decl.is_some(),
                    control: Control::NotRun,
                    detail,
                    location: sp.location.clone(),
                    declared_reason: decl.and_then(|d| d.reason.clone()),
                    declared_at: match (&self.plan.source.path, decl) {
                        (Some(path), Some(d)) => Some(Location {
                            path: path.clone(),
                            line: d.pos.line,
                            column: d.pos.column,
                        }),
                        _ => None,
                    },
                    scope: decl
                        .and_then(|d| d.scope.as_ref())
                        .map(|sc| [(sc.key.clone(), sc.value.clone())].into_iter().collect()),
                    observed_omitted: tallies.get(carrier.name).map_or(0, |t| t.omitted),
                    observed: tallies
                        .remove(carrier.name)
                        .map(|t| t.observed)
                        .unwrap_or_default(),
                }
            })
            .collect()
    }
}
