//! Every verdict rule, in one place.
//!
//! - recovered (found by run B): `fail`, or `authorized` when declared;
//! - plant or recovery broke: `error`;
//! - the carrier cannot exist here: `skipped`, with the reason;
//! - not recovered (nothing found, or the surface's access control refused
//!   A's write or B's read): `pass`, but only when the same code recovered
//!   the nonce from a known-open control instance; otherwise `error`
//!   ("detector failed its control");
//! - not recovered when nothing shows the plant happened (a `recover`
//!   without the plant's receipt): `error`, or `skipped` when the operator
//!   accepts that on purpose (`--allow-missing-receipt`).
//!
//! Declaring never turns `error` or `skipped` into anything else.
//!
//! Watch mode ([`decide_watch`]) judges what a command did, not what could
//! carry: a change it made through a carrier is `fail` (`authorized` when
//! declared, and inside the declared scope); a carrier it did not use is
//! `pass`, which there means "not used", never "closed"; a surface that
//! could not be looked at is `error` (`skipped` when its type has no
//! snapshot); a read of a canary is `fail` whatever is declared.

use crate::surface::{PlantOutcome, RecoverOutcome};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Fail,
    Error,
    Authorized,
    Skipped,
    Pass,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Fail => "fail",
            Verdict::Error => "error",
            Verdict::Authorized => "authorized",
            Verdict::Skipped => "skipped",
            Verdict::Pass => "pass",
        }
    }

    /// Whether this verdict fails the run.
    pub fn fails_run(self) -> bool {
        matches!(self, Verdict::Fail | Verdict::Error)
    }

    /// Whether reviewers are shown this verdict one finding at a time
    /// (a SARIF result, a row of the pull request comment): FAIL, ERROR
    /// and AUTHORIZED. SKIPPED and PASS are counted only.
    pub fn is_shown(self) -> bool {
        matches!(self, Verdict::Fail | Verdict::Error | Verdict::Authorized)
    }
}

/// What happened to the control instance of a carrier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Control {
    Recovered,
    NotRecovered,
    Error,
    NotRun,
}

/// Everything known about one (surface, carrier) when the runs are over.
/// `None` means that step never happened (an earlier one failed, or a run
/// died or was interrupted before it got there).
#[derive(Debug, Clone)]
pub struct Evidence {
    /// Set when the carrier was never attempted, with the reason.
    pub skipped: Option<String>,
    /// Set when the probe broke before this carrier could be attempted.
    pub broken: Option<String>,
    pub plant: Option<PlantOutcome>,
    pub recover: Option<RecoverOutcome>,
    pub control_plant: Option<PlantOutcome>,
    pub control_recover: Option<RecoverOutcome>,
    pub declared: bool,
    /// Set when nothing shows that the plant happened (a `recover` with no
    /// plant receipt, or one that does not list this carrier), with why:
    /// the needle was derived, so finding nothing proves nothing.
    pub unconfirmed: Option<String>,
    /// The operator accepts an unconfirmed plant on purpose
    /// (`--allow-missing-receipt`): finding nothing is then SKIPPED
    /// instead of ERROR.
    pub accept_unconfirmed: bool,
}

/// Summarises the control instance's evidence. A control planted but
/// never read is `not-run` only where the carrier itself was found (run B
/// reads a control only for what its surface did not give up: a FAIL
/// stands on the finding alone); anywhere else it is an error. Only
/// `recovered` lets a carrier PASS.
pub fn control_state(e: &Evidence) -> Control {
    match (&e.control_plant, &e.control_recover) {
        (Some(PlantOutcome::Planted { .. }), Some(RecoverOutcome::Found { .. })) => {
            Control::Recovered
        }
        (Some(PlantOutcome::Planted { .. }), None)
            if matches!(e.recover, Some(RecoverOutcome::Found { .. })) =>
        {
            Control::NotRun
        }
        (
            Some(PlantOutcome::Planted { .. }),
            Some(RecoverOutcome::NotFound { .. } | RecoverOutcome::Denied { .. }),
        ) => Control::NotRecovered,
        (None, None) => Control::NotRun,
        _ => Control::Error,
    }
}

fn control_problem(e: &Evidence) -> String {
    match (&e.control_plant, &e.control_recover) {
        (Some(PlantOutcome::Planted { .. }), Some(RecoverOutcome::NotFound { detail })) => {
            format!(
                "detector failed its control: the known-open control was not recovered ({detail})"
            )
        }
        (Some(PlantOutcome::Planted { .. }), Some(RecoverOutcome::Denied { reason })) => {
            format!("detector failed its control: run B was denied the control ({reason})")
        }
        (Some(PlantOutcome::Planted { .. }), Some(RecoverOutcome::Error { reason })) => {
            format!("detector failed its control: {reason}")
        }
        (Some(PlantOutcome::Planted { .. }), None) => {
            "detector failed its control: the control was never recovered".into()
        }
        (
            Some(
                PlantOutcome::Refused { reason }
                | PlantOutcome::Unsupported { reason }
                | PlantOutcome::Error { reason },
            ),
            _,
        ) => {
            format!("detector failed its control: the control could not be planted ({reason})")
        }
        (None, _) => "detector failed its control: the control was never planted".into(),
        (Some(PlantOutcome::Planted { .. }), Some(RecoverOutcome::Found { .. })) => String::new(),
    }
}

/// The one function that decides a verdict, with the detail that says why.
pub fn decide(e: &Evidence) -> (Verdict, String) {
    if let Some(reason) = &e.broken {
        return (Verdict::Error, reason.clone());
    }
    if let Some(reason) = &e.skipped {
        return (Verdict::Skipped, reason.clone());
    }
    // Nothing shows a plant happened and there is nothing to look for (a
    // needle only the plant knew): never green unless accepted on purpose.
    if let (None, Some(why)) = (&e.plant, &e.unconfirmed) {
        return if e.accept_unconfirmed {
            (
                Verdict::Skipped,
                format!("{why} (accepted with --allow-missing-receipt)"),
            )
        } else {
            (
                Verdict::Error,
                format!(
                    "{why} (give the plant's receipt with --receipt, or accept this with --allow-missing-receipt)"
                ),
            )
        };
    }
    let control_ok = control_state(e) == Control::Recovered;
    let pass_or = |detail: String| {
        if let Some(why) = &e.unconfirmed {
            // Nothing shows a plant happened: a look that found nothing
            // proves nothing, whatever the control says.
            return if e.accept_unconfirmed {
                (
                    Verdict::Skipped,
                    format!(
                        "{why}: nothing shows a plant happened, so finding nothing proves nothing (accepted with --allow-missing-receipt); {detail}"
                    ),
                )
            } else {
                (
                    Verdict::Error,
                    format!(
                        "{why}: nothing shows a plant happened, so finding nothing is no PASS (give the plant's receipt with --receipt, or accept this with --allow-missing-receipt); {detail}"
                    ),
                )
            };
        }
        if control_ok {
            (Verdict::Pass, detail)
        } else {
            (Verdict::Error, format!("{}; {detail}", control_problem(e)))
        }
    };
    match (&e.plant, &e.recover) {
        (None, _) => (
            Verdict::Error,
            "run A never reported planting this carrier".into(),
        ),
        (Some(PlantOutcome::Error { reason }), _) => {
            (Verdict::Error, format!("plant failed: {reason}"))
        }
        (Some(PlantOutcome::Unsupported { reason }), _) => (Verdict::Skipped, reason.clone()),
        (Some(PlantOutcome::Refused { reason }), _) => pass_or(format!("write refused: {reason}")),
        (Some(PlantOutcome::Planted { .. }), None) => (
            Verdict::Error,
            "run B never reported recovering this carrier".into(),
        ),
        (Some(PlantOutcome::Planted { .. }), Some(r)) => match r {
            RecoverOutcome::Found { detail } => {
                // A marker found is a channel, receipt or not: its nonce
                // is a MAC under the key over the probe id.
                let detail = match &e.unconfirmed {
                    Some(why) => {
                        format!("{detail} ({why}: the marker derived from the probe id and key)")
                    }
                    None => detail.clone(),
                };
                if e.declared {
                    (Verdict::Authorized, format!("{detail} (declared)"))
                } else {
                    (Verdict::Fail, detail)
                }
            }
            RecoverOutcome::Error { reason } => {
                (Verdict::Error, format!("recovery failed: {reason}"))
            }
            RecoverOutcome::Denied { reason } => pass_or(format!("read refused: {reason}")),
            RecoverOutcome::NotFound { detail } => pass_or(detail.clone()),
        },
    }
}

/// What watch mode knows about one carrier of one surface, or one kind
/// of canary.
#[derive(Debug, Clone)]
pub enum Watched {
    /// The surface could not be looked at before or after.
    Broken(String),
    /// The surface type has no snapshot; or no canary of this kind was
    /// placed.
    Unsupported(String),
    /// Changes the command made through this carrier: how many were
    /// inside what is declared and how many outside it.
    Changes {
        declared: bool,
        inside: usize,
        outside: usize,
        /// What the second snapshot could not see inside (directories it
        /// could not list, other filesystems mounted below it, which it
        /// does not enter), said for people: no "not used" can be said
        /// while they hide what is inside them.
        unseen: Option<String>,
    },
    /// Canaries of this kind placed (how many) and reads of them seen.
    Canary {
        placed: usize,
        reads: usize,
        detector: &'static str,
    },
}

fn changes(n: usize) -> String {
    format!("{n} {}", if n == 1 { "change" } else { "changes" })
}

/// The one function that decides a watch mode verdict, with its detail.
pub fn decide_watch(w: &Watched) -> (Verdict, String) {
    match w {
        Watched::Broken(why) => (Verdict::Error, why.clone()),
        Watched::Unsupported(why) => (Verdict::Skipped, why.clone()),
        Watched::Changes {
            declared,
            inside,
            outside,
            unseen,
        } => match (declared, inside + outside, outside) {
            (_, 0, _) if unseen.is_some() => (
                Verdict::Skipped,
                format!(
                    "nothing seen, but {}: what the command did inside is not seen",
                    unseen.as_deref().unwrap_or_default()
                ),
            ),
            (_, 0, _) => (
                Verdict::Pass,
                "not used: nothing the command did here would carry a message through this \
                 carrier (in watch mode a PASS says the carrier was not used, not that it is closed)"
                    .into(),
            ),
            (true, n, 0) => (
                Verdict::Authorized,
                format!("the command used this declared carrier ({})", changes(n)),
            ),
            (true, n, out) => (
                Verdict::Fail,
                format!(
                    "the command used this carrier outside the declared scope ({out} of {})",
                    changes(n)
                ),
            ),
            (false, n, _) => (
                Verdict::Fail,
                format!("the command used this undeclared carrier ({})", changes(n)),
            ),
        },
        Watched::Canary {
            placed,
            reads,
            detector,
        } => match reads {
            0 => (
                Verdict::Pass,
                format!(
                    "{placed} {} placed, none read (seen with {detector})",
                    if *placed == 1 { "canary" } else { "canaries" }
                ),
            ),
            n => (
                Verdict::Fail,
                format!(
                    "a canary credential was read ({n} {}, seen with {detector})",
                    if *n == 1 { "read" } else { "reads" }
                ),
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn planted() -> PlantOutcome {
        PlantOutcome::Planted {
            needle: json!({}),
            persistence: None,
            detail: String::new(),
        }
    }
    fn found() -> RecoverOutcome {
        RecoverOutcome::Found {
            detail: "seen".into(),
        }
    }
    fn not_found() -> RecoverOutcome {
        RecoverOutcome::NotFound {
            detail: "nothing".into(),
        }
    }
    fn ev(plant: Option<PlantOutcome>, recover: Option<RecoverOutcome>) -> Evidence {
        Evidence {
            skipped: None,
            broken: None,
            plant,
            recover,
            control_plant: Some(planted()),
            control_recover: Some(found()),
            declared: false,
            unconfirmed: None,
            accept_unconfirmed: false,
        }
    }

    #[test]
    fn every_path() {
        assert_eq!(decide(&ev(Some(planted()), Some(found()))).0, Verdict::Fail);
        let mut d = ev(Some(planted()), Some(found()));
        d.declared = true;
        assert_eq!(decide(&d).0, Verdict::Authorized);
        assert_eq!(
            decide(&ev(Some(planted()), Some(not_found()))).0,
            Verdict::Pass
        );
        let denied = RecoverOutcome::Denied {
            reason: "EACCES".into(),
        };
        assert_eq!(decide(&ev(Some(planted()), Some(denied))).0, Verdict::Pass);
        let refused = PlantOutcome::Refused {
            reason: "EROFS".into(),
        };
        let (v, detail) = decide(&ev(Some(refused), None));
        assert_eq!(v, Verdict::Pass);
        assert!(detail.contains("EROFS"));
        let unsupported = PlantOutcome::Unsupported {
            reason: "no xattrs".into(),
        };
        assert_eq!(decide(&ev(Some(unsupported), None)).0, Verdict::Skipped);
        let failed = PlantOutcome::Error {
            reason: "ENOSPC".into(),
        };
        assert_eq!(decide(&ev(Some(failed), None)).0, Verdict::Error);
        let rfailed = RecoverOutcome::Error {
            reason: "EIO".into(),
        };
        assert_eq!(
            decide(&ev(Some(planted()), Some(rfailed))).0,
            Verdict::Error
        );
        assert_eq!(decide(&ev(None, None)).0, Verdict::Error);
        assert_eq!(decide(&ev(Some(planted()), None)).0, Verdict::Error);
    }

    #[test]
    fn watch_mode_verdicts() {
        let ch = |declared, inside, outside| Watched::Changes {
            declared,
            inside,
            outside,
            unseen: None,
        };
        assert_eq!(decide_watch(&ch(false, 0, 0)).0, Verdict::Pass);
        assert!(decide_watch(&ch(false, 0, 0)).1.contains("not used"));
        assert_eq!(decide_watch(&ch(false, 0, 2)).0, Verdict::Fail);
        assert_eq!(decide_watch(&ch(true, 3, 0)).0, Verdict::Authorized);
        assert_eq!(decide_watch(&ch(true, 3, 1)).0, Verdict::Fail);
        let hidden = Watched::Changes {
            declared: false,
            inside: 0,
            outside: 0,
            unseen: Some("2 directories could not be listed".into()),
        };
        assert_eq!(decide_watch(&hidden).0, Verdict::Skipped);
        let canary = |reads| Watched::Canary {
            placed: 3,
            reads,
            detector: "inotify",
        };
        assert_eq!(decide_watch(&canary(0)).0, Verdict::Pass);
        assert_eq!(decide_watch(&canary(1)).0, Verdict::Fail);
        assert_eq!(decide_watch(&Watched::Broken("x".into())).0, Verdict::Error);
    }

    #[test]
    fn pass_needs_the_control() {
        let mut e = ev(Some(planted()), Some(not_found()));
        e.control_recover = Some(not_found());
        let (v, d) = decide(&e);
        assert_eq!(v, Verdict::Error);
        assert!(d.starts_with("detector failed its control"));
        assert_eq!(control_state(&e), Control::NotRecovered);
        e.control_plant = None;
        e.control_recover = None;
        assert_eq!(decide(&e).0, Verdict::Error);
        assert_eq!(control_state(&e), Control::NotRun);
        // A found nonce is a channel whatever the control says.
        e.recover = Some(found());
        assert_eq!(decide(&e).0, Verdict::Fail);
    }

    #[test]
    fn a_control_left_unread_is_not_run_only_beside_a_finding() {
        // Run B reads a control only for what its surface did not give up.
        let mut e = ev(Some(planted()), Some(found()));
        e.control_plant = Some(planted());
        e.control_recover = None;
        assert_eq!(control_state(&e), Control::NotRun);
        assert_eq!(decide(&e).0, Verdict::Fail);
        // Left unread beside anything else, it is an error: never a PASS.
        for r in [
            not_found(),
            RecoverOutcome::Denied {
                reason: "403".into(),
            },
        ] {
            e.recover = Some(r);
            assert_eq!(control_state(&e), Control::Error);
            let (v, d) = decide(&e);
            assert_eq!(v, Verdict::Error);
            assert!(d.contains("the control was never recovered"), "{d}");
        }
    }

    #[test]
    fn an_unconfirmed_plant_is_never_pass() {
        let mut e = ev(Some(planted()), Some(not_found()));
        e.unconfirmed = Some("no plant receipt".into());
        let (v, d) = decide(&e);
        assert_eq!(v, Verdict::Error);
        assert!(d.starts_with("no plant receipt: nothing shows"), "{d}");
        e.recover = Some(RecoverOutcome::Denied {
            reason: "403".into(),
        });
        assert_eq!(decide(&e).0, Verdict::Error);
        e.accept_unconfirmed = true;
        assert_eq!(decide(&e).0, Verdict::Skipped);
        // A marker found is a channel, receipt or not.
        e.recover = Some(found());
        assert_eq!(decide(&e).0, Verdict::Fail);
        e.accept_unconfirmed = false;
        assert_eq!(decide(&e).0, Verdict::Fail);
        // No needle to look for at all: ERROR, SKIPPED when accepted.
        e.plant = None;
        e.recover = None;
        assert_eq!(decide(&e).0, Verdict::Error);
        e.accept_unconfirmed = true;
        assert_eq!(decide(&e).0, Verdict::Skipped);
    }

    #[test]
    fn declaring_never_hides_error_or_skip() {
        let mut e = ev(Some(PlantOutcome::Error { reason: "x".into() }), None);
        e.declared = true;
        assert_eq!(decide(&e).0, Verdict::Error);
        e.plant = Some(PlantOutcome::Unsupported { reason: "x".into() });
        assert_eq!(decide(&e).0, Verdict::Skipped);
        e.plant = None;
        e.skipped = Some("content-reads: false".into());
        assert_eq!(decide(&e).0, Verdict::Skipped);
        e.broken = Some("interrupted".into());
        assert_eq!(decide(&e).0, Verdict::Error);
    }
}
