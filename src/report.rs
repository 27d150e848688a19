//! The versioned report (`runwarden-report/1`): what every output renders.
//! Documented, with its stability promise, in docs/report-schema.md.

use crate::marker::{BeaconBody, Origin};
use crate::plan::{ConfigSource, Location};
use crate::surface::{NoticeKind, Persistence};
use crate::verdict::{Control, Verdict};
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "runwarden-report/1";

/// The surface type (and surface name) of watch mode's canary findings:
/// `canary:aws-credentials`, `canary:npmrc`, `canary:dotenv`.
pub const CANARY_TYPE: &str = "canary";

/// How many observations one finding lists: a command that writes a
/// million files is a million changes, but a report of them all would be
/// no use to anyone (the count stays exact).
pub const MAX_OBSERVED: usize = 1000;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub tool: Tool,
    /// Which command made it; absent in reports from before it existed
    /// (read as `probe`).
    #[serde(default)]
    pub mode: Mode,
    pub probe_id: String,
    /// `--label`: what the operator calls where this ran (the fleet
    /// workflow passes the runner label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub started_at: String,
    pub finished_at: String,
    pub config: ConfigSource,
    pub runs: Runs,
    /// Whether markers were signed with a configured key or the public
    /// default derived from the probe id (never the key itself).
    #[serde(default)]
    pub key: KeyKind,
    /// For `recover`: the plant it looked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_job: Option<CrossJob>,
    /// What surfaces say about how they were reached: which credential,
    /// what it claims (never its value). Only surfaces with something to
    /// say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub surfaces: Vec<SurfaceFacts>,
    pub summary: Summary,
    pub findings: Vec<Finding>,
    /// Beacons of other probes and markers that do not verify, seen by run
    /// B on the configured surfaces (at most 100 per surface, then one
    /// `omitted` line).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<NoticeRecord>,
    pub cleanup: Cleanup,
    /// For `watch`: the command watched, how it ended, and the canaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<Watch>,
    /// For `probe` and `recover`: what this environment exposes, and
    /// whether a channel tested each exposure (docs/coverage.md).
    /// Absent in reports from before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Coverage>,
    /// Each run's trust (trigger, ref, fork, actor, class) and, when a
    /// channel is open from an untrusted run A to a trusted run B, the
    /// line every output leads with (docs/report-schema.md#trust).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<crate::trust::Trusts>,
}

/// What the environment exposes and what the run tested of it
/// (docs/coverage.md). Exposure ids are stable: `permission:<key>`,
/// `run-traces`, `runner-persistence`, `docker-socket:<host>`,
/// `registry:<origin>`, `actions-cache`, `actions-artifacts`,
/// `path:<path>`, `git-remote:<checkout>`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Coverage {
    /// `not-actions`, `github-hosted`, `self-hosted` or `arc`.
    pub runner: String,
    /// Each `GITHUB_TOKEN` permission key, in GitHub's spelling, and
    /// what is known of the job's level for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permissions: Vec<PermissionLevel>,
    /// Where the permissions came from, or why they are unknown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub permissions_source: String,
    pub exposures: Vec<Exposure>,
    /// How many exposures are `not-tested` (each a gap).
    pub gaps: u64,
    /// `--require-coverage`: a gap fails the run.
    #[serde(default)]
    pub required: bool,
}

/// The job's level for one permission key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionLevel {
    /// `contents`, `pull-requests`, … (GitHub's workflow spelling).
    pub key: String,
    /// `write`, `read`, `none` or `unknown` (never guessed).
    pub level: String,
    /// What said so: `workflow` (its `permissions:`), `api` (an answer
    /// showed it), or `unknown`.
    pub from: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExposureStatus {
    /// A channel ran against it (PASS, FAIL or AUTHORIZED).
    Tested,
    /// The config declares it untested on purpose (`declared:` with
    /// `exposure:` and its reason).
    Declared,
    /// Nothing tested it: a gap.
    NotTested,
}

impl ExposureStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ExposureStatus::Tested => "tested",
            ExposureStatus::Declared => "declared",
            ExposureStatus::NotTested => "not-tested",
        }
    }
}

/// One exposure. Its text is from the environment (paths, origins):
/// rendered as surface data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exposure {
    pub id: String,
    /// For people: what it is and why it can carry.
    pub what: String,
    pub status: ExposureStatus,
    /// The channels that tested it (`tested`), with their verdicts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<TestedBy>,
    /// Why it is not tested, or the declaration's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The config that would test it (what `runwarden discover` writes),
    /// for a gap that has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stanza: Option<String>,
}

/// A channel that tested an exposure, and its verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestedBy {
    pub channel: String,
    pub verdict: Verdict,
}

impl Coverage {
    /// How many exposures are `not-tested`, counted from the list (a
    /// relayed report's `gaps` is its sender's word).
    pub fn gap_count(&self) -> usize {
        self.count(ExposureStatus::NotTested)
    }

    /// How many exposures have `status`.
    pub fn count(&self, status: ExposureStatus) -> usize {
        self.exposures.iter().filter(|e| e.status == status).count()
    }
}

/// What `runwarden watch` watched.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Watch {
    /// `command`: one command run by `watch -- CMD`; `job`: every step
    /// between the action's watch step and its post step.
    pub scope: String,
    /// The command's arguments, each redacted (empty for `job`).
    #[serde(default)]
    pub command: Vec<String>,
    /// Its exit status, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did (`SIGKILL`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// Processes the command started that were still running when it
    /// ended: what they did after the second snapshot is not watched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub survivors: Vec<u32>,
    /// Between the two snapshots: when the command (or the job's watched
    /// steps) began and ended.
    pub started_at: String,
    pub finished_at: String,
    pub canaries: Canaries,
}

/// The canary credentials of a watch (never their values).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Canaries {
    /// `fanotify`, `inotify` or `atime`; absent when none was placed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detector: Option<String>,
    /// The paths of the canaries placed.
    #[serde(default)]
    pub placed: Vec<String>,
    /// Paths where no canary was placed, with why (something was there).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Leftover>,
}

/// One thing watch mode saw: an entry the command created, changed or
/// removed, or a read of a canary. Surface data: escaped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// The entry, relative to the surface (a path, a ref, a cache key).
    pub entry: String,
    /// `created`, `removed`, `changed: size, mtime`, `renamed from X`,
    /// `read (open)`.
    pub change: String,
    /// When, as the surface says (an mtime); absent: between the
    /// snapshots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The process that read a canary (fanotify only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    #[default]
    Probe,
    Recover,
    Cleanup,
    /// `runwarden watch`: what a command did, not what could carry.
    Watch,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyKind {
    Configured,
    /// Anyone who knows the probe id can forge a marker.
    #[default]
    DerivedDefault,
}

impl KeyKind {
    pub fn of(key: &crate::marker::Key) -> KeyKind {
        if key.is_configured() {
            KeyKind::Configured
        } else {
            KeyKind::DerivedDefault
        }
    }
}

/// One surface's facts, e.g. `runtime-token: ACTIONS_RUNTIME_TOKEN`,
/// `scopes: "refs/heads/main" (read, write)`. Values are escaped.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SurfaceFacts {
    pub surface: String,
    #[serde(rename = "type")]
    pub surface_type: String,
    pub facts: std::collections::BTreeMap<String, String>,
}

/// What a `recover` knew of the plant it looked for.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CrossJob {
    /// The receipt used; `None`: no plant receipt was found, and needles
    /// were derived from the probe id and key.
    pub receipt: Option<String>,
    pub planted_at: Option<String>,
    pub plant_origin: Option<Origin>,
    /// Whether the plant finished (a killed plant's receipt is partial).
    pub plant_complete: Option<bool>,
    /// How the receipt reached the recovering job (`--receipt-via`, e.g.
    /// "artifact runwarden-receipt-0"): a channel between the jobs opened
    /// on purpose, stated as such.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt_via: Option<String>,
    /// `--allow-missing-receipt`: carriers no receipt vouches for are
    /// SKIPPED instead of ERROR when nothing is found.
    #[serde(default)]
    pub missing_receipt_allowed: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NoticeRecord {
    pub surface: String,
    pub kind: NoticeKind,
    /// The entry, escaped.
    pub entry: String,
    pub detail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beacon: Option<BeaconBody>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

impl Default for Tool {
    fn default() -> Self {
        Tool {
            name: "runwarden".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Runs {
    pub a: String,
    pub b: String,
    /// The uid run A ran as (the probe's own), when the report says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a_uid: Option<u32>,
    /// The uid run B ran as, when `--run-b-as` made it another user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b_uid: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub fail: u64,
    pub error: u64,
    pub authorized: u64,
    pub skipped: u64,
    pub pass: u64,
}

impl Summary {
    pub fn of(findings: &[Finding]) -> Summary {
        let mut s = Summary::default();
        for f in findings {
            *match f.verdict {
                Verdict::Fail => &mut s.fail,
                Verdict::Error => &mut s.error,
                Verdict::Authorized => &mut s.authorized,
                Verdict::Skipped => &mut s.skipped,
                Verdict::Pass => &mut s.pass,
            } += 1;
        }
        s
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finding {
    /// `surface:carrier`, the stable channel id.
    pub channel: String,
    pub surface: String,
    pub surface_type: String,
    pub carrier: String,
    pub verdict: Verdict,
    pub persistence: Persistence,
    pub declared: bool,
    pub control: Control,
    /// For people; not part of the contract.
    pub detail: String,
    /// The surface's entry in the config; null for a discovered config.
    pub location: Option<Location>,
    /// Where the channel is declared in the config, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_at: Option<Location>,
    /// The declaration's `reason:`, when it gives one (config text:
    /// untrusted, rendered as any surface data is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_reason: Option<String>,
    /// For a channel declared with a scope: the scope (`{"refs": "…"}`)
    /// and which side of it this plant was on (`"side": "inside"` or
    /// `"outside"`). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<std::collections::BTreeMap<String, String>>,
    /// Watch mode: what the command did through this carrier (the first
    /// [`MAX_OBSERVED`]; the verdict counts them all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observed: Vec<Observation>,
    /// Watch mode: how many more it did than `observed` lists.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub observed_omitted: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Cleanup {
    /// Entries planted on the configured surfaces and removed (or found
    /// already gone): `deleted` + `already_gone`, each planted entry once;
    /// the control's entries are not counted.
    pub removed: u64,
    /// Of `removed`: the entries this cleanup deleted.
    #[serde(default)]
    pub deleted: u64,
    /// Of `removed`: the entries that were not there any more (never
    /// created, or removed by someone else).
    #[serde(default)]
    pub already_gone: u64,
    /// The surfaces (by name) this cleanup deleted entries from: what a
    /// note about how a surface deletes (a git remote keeps objects until
    /// its garbage collection) may speak of.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub deleted_on: std::collections::BTreeSet<String>,
    /// Planted entries left in place, each with the reason.
    pub left: Vec<Leftover>,
    /// Planted entries nothing can remove, left on purpose because the
    /// operator accepted that (`permanent: true`): listed, not failing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<Leftover>,
    /// Journal entries that are not runwarden's (a receipt naming
    /// something the plant never made): left alone, and failing the run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<Leftover>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Leftover {
    pub surface: String,
    /// `true` for the probe's own control instance.
    pub control: bool,
    pub entry: String,
    pub reason: String,
}

impl Finding {
    /// The detail, with the declaration's reason after it when there is
    /// one: what every output shows of a finding (each escapes it its way).
    pub fn detail_and_reason(&self) -> std::borrow::Cow<'_, str> {
        match &self.declared_reason {
            Some(r) => format!("{} (declared: {r})", self.detail).into(),
            None => self.detail.as_str().into(),
        }
    }

    /// For a channel declared with a scope: which side of it this plant
    /// was on (`inside`, `outside`).
    pub fn side(&self) -> Option<&str> {
        self.scope
            .as_ref()
            .and_then(|s| s.get("side"))
            .map(String::as_str)
    }
}

impl Report {
    /// The line every output leads with when a channel is open from an
    /// untrusted run A to a trusted run B ([`crate::trust::direction`]).
    pub fn poisoning(&self) -> Option<&str> {
        self.trust.as_ref()?.poisoning.as_deref()
    }

    /// What every output says of the config's provenance, when it is news
    /// (as text: each output escapes it its way): a work tree config that
    /// differs from the one committed at `GITHUB_WORKFLOW_SHA` (not used),
    /// or the work tree's taken on purpose (`--config-from-worktree`).
    pub fn config_warning(&self) -> Option<String> {
        let pin = self.config.pinned.as_ref()?;
        let short = pin.commit.get(..12).unwrap_or(&pin.commit);
        if pin.via == "worktree" {
            Some(format!(
                "the config {} was taken from the work tree (--config-from-worktree), not as committed at {short}: an earlier step of the job could have written it",
                pin.path
            ))
        } else if pin.worktree_differs {
            Some(format!(
                "the work tree's {} is not the config committed at {short}, which is the one used: an earlier step of the job changed or removed it",
                pin.path
            ))
        } else {
            None
        }
    }

    /// Whether a probe or recover tested nothing: it has findings, and
    /// every one is SKIPPED (a forgotten secret, a fork's pull request).
    /// A green gate would say nothing here; it fails instead.
    pub fn nothing_tested(&self) -> bool {
        let mut of = self
            .findings
            .iter()
            .filter(|f| f.surface_type != CANARY_TYPE);
        matches!(self.mode, Mode::Probe | Mode::Recover)
            && of.clone().next().is_some()
            && of.all(|f| f.verdict == Verdict::Skipped)
    }

    /// 0: no open undeclared channel, no error, nothing left behind, and
    /// (with `--require-coverage`) no exposure untested; 3: a canary was
    /// read (watch mode); 1: otherwise.
    pub fn exit_code(&self) -> i32 {
        if self
            .findings
            .iter()
            .any(|f| f.surface_type == CANARY_TYPE && f.verdict == Verdict::Fail)
        {
            return 3;
        }
        let failing = self.findings.iter().any(|f| f.verdict.fails_run()) || self.nothing_tested();
        let gap = self
            .coverage
            .as_ref()
            .is_some_and(|c| c.required && c.gap_count() > 0);
        if failing || gap || !self.cleanup.left.is_empty() || !self.cleanup.refused.is_empty() {
            1
        } else {
            0
        }
    }
}
