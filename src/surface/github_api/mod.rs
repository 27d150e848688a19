//! `type: github-api`: objects in a GitHub repository that one run writes
//! and another reads through the REST API (labels, comments, milestones,
//! draft releases, deployments, variables, and, only when the operator
//! accepts leaving them, commit statuses and check runs), and, with
//! `code-scanning: true`, a SARIF upload's analysis and alerts
//! ([`scanning`]); and the traces a step leaves in its own run without
//! any write permission, a `::notice` and a log line, read by a later job
//! ([`traces`]); a discussion, through GraphQL ([`discussion`]); and,
//! when the operator names a workflow that shows them, dispatches
//! ([`dispatch`]).
//!
//! Every GitHub-hosted runner's egress allows api.github.com, so these
//! channels stay open behind any firewall; what closes them is the token.
//! Run A plants each carrier with the write token, run B reads it back
//! with the read token through every route it has ([`carriers`]: the
//! listing, and the agreed name where there is one). GitHub's 403 with its
//! error body is a refusal ([`crate::github`]) and the detail names the
//! permission GitHub said it wanted; 401, 5xx, rate limits GitHub does not
//! lift in time and everything else are errors. Cleanup reads each object
//! back, deletes it only when it still holds what the plant wrote, and
//! lists what it could not delete. The control is the loopback GitHub
//! ([`crate::loopback::github`]) with a token that may do everything.

mod annotations;
mod answers;
mod carriers;
mod cleanup;
mod discussion;
mod dispatch;
mod entry;
mod graphql;
mod plant;
mod recover;
mod scanning;
mod settings;
mod traces;

use super::{
    About, CleanupOutcome, Control, Job, Journal, Notice, PlantOutcome, RecoverOutcome, RunCtx,
    Want,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::github::{Api, ApiError};
use crate::http::LazyClient;
use ::http::Method;
use carriers::Gh;
use cleanup::{fuller, owned_object, owned_permanent};
use entry::{Entry, Needle};
use plant::ref_of;
use serde_json::json;
use settings::{Settings, event_issue, facts, full_sha, job_context, ruled_out};

pub use graphql::{DOCUMENTS as GRAPHQL_DOCUMENTS, graphql_url};

/// An open GitHub repository: its settings, and the client both tokens
/// go through.
pub struct GitHubApi {
    settings: Settings,
    client: LazyClient,
}

impl super::Surface for GitHubApi {
    const NAME: &'static str = "github-api";
    const DESCRIPTION: &'static str = "objects of a GitHub repository one run writes and another reads through the REST and GraphQL APIs (labels, comments, milestones, releases, deployments, variables, statuses, check runs, discussions, code scanning analyses) and the traces a step leaves in its run (annotations, log lines)";
    const KEYS: &'static [&'static str] = &[
        "repository",
        "api-url",
        "token-env",
        "read-token-env",
        "issue",
        "commit",
        "permanent",
        "code-scanning",
        "ref",
        "discussion-category",
        "dispatch-workflow",
        "dispatch-input",
        "repository-dispatch",
        "consistency-wait",
    ];
    const LATER_JOB_ONLY: &'static [Gh] = &[Gh::RunAnnotation, Gh::RunLog];
    const ROUTES: &'static [crate::surface::routes::Route<Gh>] = carriers::ROUTES;
    type Carrier = Gh;
    type Settings = Settings;
    type Entry = Entry;
    type Needle = Needle;

    /// Takes github-api's keys from a config entry.
    fn validate(mut opts: Options<'_>) -> Result<Settings, ConfigError> {
        let repository = crate::github::repository_option(&mut opts)?;
        let api_url = crate::github::api_url_option(&mut opts)?;
        let token_named = crate::surface::env_name(&mut opts, "token-env")?;
        let read_named = crate::surface::env_name(&mut opts, "read-token-env")?;
        // A GitHub token goes to the runner's API alone: named, or found
        // by default (unset, it goes nowhere).
        for (key, named) in [("token-env", &token_named), ("read-token-env", &read_named)] {
            let var = named.as_deref().unwrap_or("GITHUB_TOKEN");
            if named.is_some() || opts.env(var).is_some() {
                crate::github::to_github_only(&opts, key, var, &api_url)?;
            }
        }
        let named = (token_named.is_some(), read_named.is_some());
        let token_source = token_named.unwrap_or_else(|| "GITHUB_TOKEN".into());
        let read_token_source = read_named.unwrap_or_else(|| token_source.clone());
        let (issue, issue_source) = match opts.string("issue")? {
            Some((n, pos)) => match n.parse::<u64>() {
                Ok(n) if n > 0 => (Some(n), "the config".to_string()),
                _ => {
                    return Err(opts.error(pos, "`issue` must be an issue or pull request number"));
                }
            },
            None => (event_issue(&opts), "the event".to_string()),
        };
        let commit = match opts.string("commit")? {
            Some((c, pos)) => {
                if !full_sha(&c) {
                    return Err(opts.error(pos, "`commit` must be a full 40-hex commit sha"));
                }
                Some(c)
            }
            None => opts.env("GITHUB_SHA").filter(|c| full_sha(c)),
        };
        let permanent = opts.bool("permanent")?.unwrap_or(false);
        let name_key = |opts: &mut Options<'_>, key: &str| -> Result<Option<String>, ConfigError> {
            match opts.string(key)? {
                Some((v, pos)) if !crate::surface::plain_segment(&v.replace('.', "_")) => Err(opts
                    .error(
                        pos,
                        format!("`{key}` must be a name (letters, digits, `-`, `_`, `.`)"),
                    )),
                other => Ok(other.map(|(v, _)| v)),
            }
        };
        let dispatch_workflow = name_key(&mut opts, "dispatch-workflow")?;
        let dispatch_input = name_key(&mut opts, "dispatch-input")?;
        let repository_dispatch = opts.bool("repository-dispatch")?.unwrap_or(false);
        let code_scanning = opts.bool("code-scanning")?.unwrap_or(false);
        let git_ref = match opts.string("ref")? {
            Some((r, pos)) if !scanning::valid_ref(&r) => {
                return Err(opts.error(
                    pos,
                    "`ref` must be refs/heads/…, refs/tags/… or refs/pull/…",
                ));
            }
            Some((r, _)) => Some(r),
            None => opts.env("GITHUB_REF").filter(|r| scanning::valid_ref(r)),
        };
        let token = opts.env(&token_source);
        let read_token = opts.env(&read_token_source);
        let missing = if repository.is_none() {
            Some("no repository: GITHUB_REPOSITORY is unset; set `repository`".to_string())
        } else if token.is_none() {
            Some(format!(
                "no write token: {token_source} is unset or empty (the action passes \
                 `github-token`; elsewhere set it or `token-env`)"
            ))
        } else if read_token.is_none() {
            Some(format!(
                "no read token: {read_token_source} is unset or empty"
            ))
        } else {
            None
        };
        // A token the config names and this run lacks is a forgotten
        // secret (a fork's pull request gets none): a coverage gap.
        let missing_is_secret = repository.is_some()
            && ((named.0 && token.is_none()) || (named.1 && read_token.is_none()));
        let mut s = Settings {
            missing_is_secret,
            api_url,
            repository,
            token,
            token_source,
            read_token,
            read_token_source,
            missing,
            issue,
            issue_source,
            commit,
            permanent,
            code_scanning,
            git_ref,
            run_id: opts.env("GITHUB_RUN_ID").and_then(|r| r.parse().ok()),
            run_attempt: opts.env("GITHUB_RUN_ATTEMPT").and_then(|r| r.parse().ok()),
            runner_name: opts.env("RUNNER_NAME"),
            discussion_category: opts.string("discussion-category")?.map(|(c, _)| c),
            dispatch_workflow,
            dispatch_input,
            repository_dispatch,
            consistency_wait_ms: crate::surface::listing::wait_option(&mut opts)?.as_millis()
                as u64,
            control: false,
            job_own: false,
            on_pull_request: false,
        };
        (s.job_own, s.on_pull_request) = job_context(&s, &opts);
        Ok(s)
    }

    /// What the settings say: entries live `of` the repository; the facts;
    /// each carrier's exposures; the carriers ruled out, in the order the
    /// checks are made (the first that rules a carrier out says why).
    fn about(s: &Settings) -> About<Gh> {
        let place = if s.control {
            "the control".to_string()
        } else {
            escape::bytes(s.repository.as_deref().unwrap_or("?").as_bytes())
        };
        let mut about = facts(s, About::new(format!("of {place}")));
        for &c in Gh::ALL {
            for p in carriers::permissions_of(c.name())
                .iter()
                .filter(|p| s.job_own || **p == "run-traces")
                .filter(|p| c != Gh::IssueComment || **p != "pull-requests" || s.on_pull_request)
            {
                about = about.exposure_of(
                    c,
                    match *p {
                        "run-traces" => "run-traces".to_string(),
                        p => format!("permission:{p}"),
                    },
                );
            }
        }
        match &s.missing {
            Some(why) if s.missing_is_secret => about = about.secret_missing(why.clone()),
            Some(why) => about = about.unavailable(why.clone()),
            None => {}
        }
        for &c in Gh::ALL {
            if let Some(why) = ruled_out(s, c) {
                about = about.unavailable_of(c, why);
            }
        }
        about
    }

    fn control(
        _like: Option<&Settings>,
        _dir: &std::path::Path,
    ) -> Result<Control<Settings>, Fault> {
        let server = crate::loopback::github::GitHubServer::start()?;
        let repo = "runwarden/control";
        let sha = "c0ffee0000000000000000000000000000c0ffee";
        server.add("commit", repo, json!({ "sha": sha }));
        // The workflows the control's dispatches start.
        server.add_workflow(repo, crate::loopback::github::DISPATCH_WORKFLOW, "title");
        server.add_dispatch_workflow(repo);
        // The run the control's traces go to: its one job has ended.
        let run_id = 4242;
        server.add_job(repo, run_id, "control", "completed", sha);
        let mut all: Vec<(&str, &str)> = crate::loopback::github::WRITE_ALL.to_vec();
        all.push(("actions_variables", "write"));
        let token = server.token(&all);
        let s = Settings {
            api_url: server.api_url(),
            repository: Some(repo.into()),
            read_token: Some(token.clone()),
            token: Some(token),
            token_source: "the control's own".into(),
            read_token_source: "the control's own".into(),
            missing: None,
            missing_is_secret: false,
            issue: Some(1),
            issue_source: "the control".into(),
            commit: Some(sha.into()),
            permanent: true,
            code_scanning: true,
            git_ref: Some("refs/heads/main".into()),
            run_id: Some(run_id),
            run_attempt: Some(1),
            runner_name: None,
            discussion_category: None,
            dispatch_workflow: Some(crate::loopback::github::DISPATCH_WORKFLOW.into()),
            dispatch_input: Some("title".into()),
            repository_dispatch: true,
            consistency_wait_ms: super::listing::default_wait_ms(),
            control: true,
            job_own: false,
            on_pull_request: false,
        };
        Ok(Control::served_with_knobs(s, server))
    }

    fn open(settings: Settings) -> Result<GitHubApi, Fault> {
        let client = LazyClient::new(
            [&settings.token, &settings.read_token]
                .into_iter()
                .flatten(),
        );
        Ok(GitHubApi { settings, client })
    }

    /// Run A: each carrier's object created with the write token, journalled
    /// before the request and again with its id once GitHub gave one; taken
    /// back only when GitHub refused the write. (Code scanning's upload, a
    /// discussion, a dispatch and a trace are planted as their own kinds are.)
    fn plant_one(
        &self,
        ctx: &RunCtx<'_>,
        job: &Job<Gh>,
        journal: &mut Journal<'_, Entry>,
    ) -> PlantOutcome<Needle> {
        match job.carrier {
            Gh::CodeScanning => self.plant_scanning(ctx, job, journal),
            Gh::Discussion => self.plant_discussion(ctx, job, journal),
            Gh::WorkflowDispatch | Gh::RepositoryDispatch => self.plant_dispatch(ctx, job, journal),
            Gh::RunAnnotation | Gh::RunLog => self.plant_trace(ctx, job, journal),
            _ => {
                let carrier = job.carrier;
                let req = match carriers::plant_request(&self.settings, ctx, carrier, &job.nonce) {
                    Ok(r) => r,
                    Err(f) => return PlantOutcome::Error { reason: f.into() },
                };
                let api = match self.api(false) {
                    Ok(a) => a,
                    Err(f) => return PlantOutcome::Error { reason: f.into() },
                };
                let what = format!("planting {carrier} in {}", self.repo());
                journal.record(&req.entry);
                match api.call(Method::POST, &req.path, Some(&req.body), &what) {
                    Ok(a) => {
                        // The id GitHub gave, so cleanup reads back this object.
                        if let Entry::Object(e) = &req.entry
                            && e.id.is_none()
                            && let Some(id) = ref_of(&a.json[e.key.as_str()])
                        {
                            let mut full = e.clone();
                            full.id = Some(id);
                            journal.record(&Entry::Object(full));
                        }
                        PlantOutcome::Planted {
                            needle: carriers::needle(&self.settings, carrier, &job.nonce),
                            persistence: None,
                            detail: self.planted_detail(carrier),
                        }
                    }
                    Err(e @ ApiError::Denied { .. }) => {
                        journal.retract(&req.entry);
                        self.refused(&e)
                    }
                    Err(e) => PlantOutcome::Error { reason: e.text() },
                }
            }
        }
    }

    /// Run B: every route to a carrier with the read token (the listing, read
    /// to its end, and the agreed name where the carrier has one). Closed only
    /// when every route ran and missed, and the miss is shown not to be a
    /// listing's lag: the writer's token lists the plant (then it is hidden
    /// from run B), or, until neither lists it within the consistency wait,
    /// the routes are taken again; denied only when GitHub refused every
    /// route. (A trace and a discussion are read back as their own kinds
    /// are.)
    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Gh, Needle>],
        _notice: &mut dyn FnMut(Notice),
    ) -> Vec<crate::surface::routes::Recovered> {
        crate::surface::routes::through(
            wanted.iter().map(|w| w.carrier),
            carriers::route_of,
            || {
                wanted
            .iter()
            .map(|w| match w.carrier {
                Gh::RunAnnotation | Gh::RunLog => self.recover_trace(ctx, w),
                Gh::Discussion => self.recover_discussion(w),
                // Every route, then, when they all missed, whether the
                // writer's token lists the plant: until one of them shows it
                // or the wait ends.
                _ => {
        let wait = std::time::Duration::from_millis(self.settings.consistency_wait_ms);
        let carrier = w.carrier;
        let looked = crate::surface::listing::until_current(wait, || {
            let o = self.look(ctx, carrier, w);
            let RecoverOutcome::NotFound { detail } = &o else {
                return Ok::<_, std::convert::Infallible>(((o, None), true));
            };
            let writer = self.writer_lists(ctx, carrier, w);
            // The writer's token listing what run B's missed shows B
            // isolated only when B reads with another token: the same
            // token's two listings that disagree show a route not
            // current (a lag), and it is taken again.
            let current = writer.as_ref().is_ok_and(Option::is_some) && !self.reads_as_writer();
            let detail = detail.clone();
            Ok(((o, Some((detail, writer))), current))
        });
        let c = match looked {
            Ok(c) => c,
            Err(never) => match never {},
        };
        match &c.value {
            (o, None) => o.clone(),
            (_, Some((_, Ok(Some(seen))))) if self.reads_as_writer() => {
                crate::surface::listing::not_current(
                    &format!(
                        "the plant, which the same token lists at {seen} in another listing"
                    ),
                    &c,
                )
            }
            (_, Some((detail, Ok(Some(seen))))) => RecoverOutcome::NotFound {
                detail: format!(
                    "{detail}; hidden from run B: the writer's token lists it at {seen}"
                ),
            },
            (_, Some((_, Ok(None))))
                if matches!(carrier, Gh::WorkflowDispatch | Gh::RepositoryDispatch) =>
            {
                RecoverOutcome::Error {
                    reason: format!(
                        "no run shows the dispatch back, to run B's token or the writer's ({} \
                         listings over {:.1} s): does the workflow exist and show the input in \
                         run-name?",
                        c.tries,
                        c.waited.as_secs_f64()
                    ),
                }
            }
            (_, Some((_, Ok(None)))) => crate::surface::listing::not_current(
                "the plant, which neither run B's token nor the writer's lists yet",
                &c,
            ),
            (_, Some((_, Err(why)))) => RecoverOutcome::Error {
                reason: format!("run B's routes missed, and nothing shows they are current: {why}"),
            },
        }
    }
            })
            .collect()
            },
        )
    }

    fn find(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Gh>],
    ) -> Result<crate::surface::Found<Entry>, Fault> {
        let mut found = vec![];
        for j in jobs
            .iter()
            .filter(|j| settings::unavailable(&self.settings, j.carrier).is_none())
        {
            match j.carrier {
                // Found by its category on whatever ref it was uploaded for.
                Gh::CodeScanning => found.extend(self.find_scanning(ctx, &j.nonce)?),
                Gh::Discussion => found.push(discussion::entry(ctx, &j.nonce, None)),
                c @ (Gh::WorkflowDispatch | Gh::RepositoryDispatch) => {
                    found.push(dispatch::entry(ctx, c, &j.nonce, None))
                }
                // Nothing to find: kept, in the run it was printed in.
                c @ (Gh::RunAnnotation | Gh::RunLog) => {
                    found.push(traces::entry(ctx, c, &j.nonce, None))
                }
                carrier => found.extend(
                    carriers::plant_request(&self.settings, ctx, carrier, &j.nonce)
                        .map(|p| p.entry)
                        .ok(),
                ),
            }
        }
        Ok(found.into())
    }

    /// Whether a journal entry is this probe's plant: rebuilt from what it
    /// names (its carrier, the nonce it holds, the configured repository), it
    /// is the very entry the plant journals (so its paths, listing and key
    /// fields are runwarden's own, never a path a receipt made up); an
    /// object's `ref`, an id GitHub gave, is a number or the plant's own
    /// name. `Invalid` for anything else.
    fn owns(&self, ctx: &RunCtx<'_>, e: &Entry) -> Result<(), Fault> {
        let s = &self.settings;
        // Each shape is its carriers' only: a dispatch's line with another
        // carrier's name is no plant's.
        let carrier = |name: &str, of: &[Gh]| {
            Gh::parse(name)
                .filter(|c| of.contains(c))
                .ok_or_else(|| Fault::invalid("holds no nonce in runwarden's form"))
        };
        let want = match e {
            Entry::Object(o) => return owned_object(s, ctx, Gh::parse(&o.carrier), o),
            Entry::Permanent(p) => return owned_permanent(ctx, Gh::parse(&p.carrier), p),
            Entry::Scanning(x) => scanning::wanted(ctx, x)?,
            Entry::Discussion(x) => discussion::wanted(ctx, x)?,
            Entry::Dispatch(x) => {
                let c = carrier(&x.carrier, &[Gh::WorkflowDispatch, Gh::RepositoryDispatch])?;
                dispatch::wanted(ctx, c, x)?
            }
            Entry::Trace(x) => {
                let c = carrier(&x.carrier, &[Gh::RunAnnotation, Gh::RunLog])?;
                traces::wanted(ctx, c, x)?
            }
        };
        carriers::same_entry(e, &want)
    }

    /// An intent and the entry with its id are one object, cleaned once
    /// (by the fuller entry). (Retractions and what they took back are set
    /// aside by the kernel.)
    fn clean(&self, entries: &[Entry]) -> Vec<CleanupOutcome> {
        entries
            .iter()
            .map(|e| {
                if entries.iter().any(|o| fuller(o, e)) {
                    CleanupOutcome::Superseded
                } else {
                    self.clean_entry(e)
                }
            })
            .collect()
    }
}

impl GitHubApi {
    /// One entry: each kind of plant as it is removed (or kept).
    fn clean_entry(&self, e: &Entry) -> CleanupOutcome {
        match e {
            Entry::Scanning(x) => self.clean_scanning(x),
            Entry::Discussion(x) => self.clean_discussion(x),
            Entry::Dispatch(x) => self.clean_dispatch(x),
            Entry::Trace(_) => traces::kept(),
            Entry::Permanent(_) => CleanupOutcome::Kept {
                reason: "GitHub offers no way to delete it: it stays (planted because \
                         `permanent: true`)"
                    .into(),
            },
            Entry::Object(o) => self.clean_object(o),
        }
    }

    /// The API with the write token (`read: false`) or the read token;
    /// `Unsupported` when what it needs is missing here.
    /// Whether run B reads with the writer's own token.
    pub(super) fn reads_as_writer(&self) -> bool {
        self.settings.read_token == self.settings.token
    }

    fn api(&self, read: bool) -> Result<Api<'_>, Fault> {
        if let Some(why) = &self.settings.missing {
            return Err(Fault::unsupported(why.clone()));
        }
        let (token, source) = if read {
            (&self.settings.read_token, &self.settings.read_token_source)
        } else {
            (&self.settings.token, &self.settings.token_source)
        };
        Ok(Api {
            client: self.client.get()?,
            base: &self.settings.api_url,
            token: token.as_deref().unwrap_or(""),
            source,
        })
    }

    fn repo(&self) -> String {
        if self.settings.control {
            return "the control".into();
        }
        escape::bytes(
            self.settings
                .repository
                .as_deref()
                .unwrap_or("?")
                .as_bytes(),
        )
    }
}

/// `ApiError` from run B as a recovery outcome: GitHub refusing the token
/// a permission is a denial, and says what GitHub wanted; any other
/// refusal proves nothing closed (as [`GitHubApi::refused`] for a plant).
fn read_outcome(e: &ApiError, source: &str) -> RecoverOutcome {
    match e {
        ApiError::Denied { .. } if e.is_permission_refusal() => RecoverOutcome::Denied {
            reason: format!(
                "GitHub refused the read token ({}): {}",
                escape::bytes(source.as_bytes()),
                e.text()
            ),
        },
        _ => RecoverOutcome::Error { reason: e.text() },
    }
}
