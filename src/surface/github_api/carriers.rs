//! What each carrier is on GitHub: the request that plants it, the routes
//! run B reads it through, and what cleanup must find to delete it. The
//! one table every phase reads, so plant, recovery and cleanup cannot
//! disagree about a carrier.

use super::Settings;
use super::entry::{Entry, Needle, Object, Permanent, Planted, Ref};
use crate::fault::Fault;
use crate::nonce::Nonce;
use crate::surface::RunCtx;
use crate::surface::carrier::carriers;
use crate::surface::routes;
use serde_json::{Value, json};
use std::collections::BTreeMap;

carriers! {
    /// GitHub's carriers: objects of the repository.
    pub enum Gh {
        LabelName = "label-name", Durable, "the nonce in a label's name; run B lists the repository's labels";
        LabelDescription = "label-description", Durable, "the nonce in the description of a label with an agreed name; run B lists the labels and asks for that name";
        IssueComment = "issue-comment", Durable, "the nonce in a comment on the configured issue or pull request; run B lists its comments";
        MilestoneTitle = "milestone-title", Durable, "the nonce in a closed milestone's title; run B lists every milestone (state=all)";
        ReleaseDraft = "release-draft", Durable, "the nonce in the name and body of a draft release; run B lists the releases (drafts show only to tokens that may push)";
        Deployment = "deployment", Durable, "the nonce in a deployment's payload and description; run B lists the deployments";
        ActionsVariable = "actions-variable", Durable, "the nonce in the value of a repository variable with an agreed name; run B lists the variables and asks for that name";
        CommitStatus = "commit-status", Durable, "the nonce in a commit status's context (permanent: GitHub offers no delete); run B lists the commit's statuses";
        CheckRun = "check-run", Durable, "the nonce in a check run's name and summary (permanent: GitHub offers no delete); run B lists the commit's check runs";
        RunAnnotation = "run-annotation", UntilEvicted, "the nonce in a `::notice` a step prints (no write permission needed): an annotation of the job's check run; run B, in a later job or run, lists the run's jobs and reads their check runs' annotations";
        RunLog = "run-log", UntilEvicted, "the nonce in a line a step prints (no write permission needed): the job's log; run B, in a later job or run, lists the run's jobs and reads their logs";
        WorkflowDispatch = "workflow-dispatch", Durable, "the nonce in the title of a workflow run a dispatch starts (only with `dispatch-workflow` and `dispatch-input`: its `run-name` shows the input); run B lists the workflow_dispatch runs";
        RepositoryDispatch = "repository-dispatch", Durable, "the nonce in a repository_dispatch's event_type, which a run's title shows (only with `repository-dispatch: true`); run B lists the repository_dispatch runs";
        Discussion = "discussion", Durable, "the nonce in a discussion's title and body (GraphQL only); run B lists the repository's discussions";
        CodeScanning = "code-scanning", Durable, "the nonce in an uploaded SARIF's category, rule id and message (only with `code-scanning: true`); run B lists the ref's code scanning analyses and alerts";
    }
}

/// Carriers GitHub cannot delete.
pub const PERMANENT: [Gh; 2] = [Gh::CommitStatus, Gh::CheckRun];

/// The environment every deployment names. Fixed, so that a probe leaves
/// at most this one environment (GitHub makes it with the first
/// deployment; deleting it needs administration: write) and no nonce.
pub const ENVIRONMENT: &str = "runwarden-probe";

/// What a description says beside the nonce. A label's description takes
/// at most 100 characters (the probe id may take 64): where the nonce
/// stands beside it, no probe id.
const SHORT: &str = "runwarden probe";

/// The probe id as names carry it: its first 12 characters (probe ids
/// are ASCII, up to 64), so that every name stays within the 50
/// characters GitHub takes in a label's name (github/docs#32156) and
/// still tells whose plant it is.
fn probe_part(probe_id: &str) -> &str {
    &probe_id[..probe_id.len().min(12)]
}

/// A name that carries the nonce: `rw-<probe id, 12 at most>-<nonce>`, 48
/// characters at most.
pub fn nonce_name(ctx: &RunCtx<'_>, nonce: &Nonce) -> String {
    format!("rw-{}-{}", probe_part(ctx.probe_id), nonce.hex())
}

/// The nonce a [`nonce_name`] of this probe carries (`None` for any
/// other text): what `owns` rebuilds a journal entry from.
pub fn nonce_in_name(ctx: &RunCtx<'_>, name: Option<&str>) -> Option<Nonce> {
    let hex = name?
        .strip_prefix(&format!("rw-{}-", probe_part(ctx.probe_id)))
        .filter(|h| crate::surface::lower_hex(h, 32))?;
    Nonce::from_hex(hex)
}

/// `Ok` when journal entry `e` is `want`, the very entry the plant
/// journals (its tag compared in constant time); else `Invalid`.
pub fn same_entry(e: &Entry, want: &Entry) -> Result<(), Fault> {
    let tagged = crate::marker::same(e.tag().as_bytes(), want.tag().as_bytes());
    (tagged && e == want)
        .then_some(())
        .ok_or_else(|| Fault::invalid("not the entry this probe's plant journals"))
}

/// Run B's routes ([`crate::surface::routes`]): the REST listings of the
/// objects, the workflow run's annotations and log, the runs a dispatch
/// made, the discussions (GraphQL, by cursor), the code scanning alerts.
pub const ROUTES: &[routes::Route<Gh>] = &[
    routes::Route {
        name: "rest-listing",
        kind: routes::Kind::Listing,
        carriers: &[
            Gh::LabelName,
            Gh::LabelDescription,
            Gh::IssueComment,
            Gh::MilestoneTitle,
            Gh::ReleaseDraft,
            Gh::Deployment,
            Gh::ActionsVariable,
            Gh::CommitStatus,
            Gh::CheckRun,
        ],
    },
    routes::Route {
        name: "run-traces",
        kind: routes::Kind::ById,
        carriers: &[Gh::RunAnnotation, Gh::RunLog],
    },
    routes::Route {
        name: "dispatched-runs",
        kind: routes::Kind::Listing,
        carriers: &[Gh::WorkflowDispatch, Gh::RepositoryDispatch],
    },
    routes::Route {
        name: "discussions",
        kind: routes::Kind::Listing,
        carriers: &[Gh::Discussion],
    },
    routes::Route {
        name: "code-scanning",
        kind: routes::Kind::Listing,
        carriers: &[Gh::CodeScanning],
    },
];

/// A carrier's route. Each miss is NOT FOUND only once its listing was
/// shown current: complete ([`crate::route::complete`]) and showing the
/// plant's own trace to the writer's token (a plant the writer sees and
/// run B's token does not is hidden from run B, which the detail says;
/// read as the writer, two passes that disagree are ERROR).
pub fn route_of(c: Gh) -> (&'static str, routes::Proof) {
    let route = ROUTES
        .iter()
        .find(|r| r.carriers.contains(&c))
        .map_or("rest-listing", |r| r.name);
    (route, routes::Proof::Listed)
}

/// An agreed name run B can derive without the nonce: `rw-<probe id, 12 at
/// most>-<tag>`, the tag a MAC under the marker key over the whole probe
/// id, the carrier and the surface's tag (32 characters at most): two
/// surfaces on one repository never share a name
/// ([`RunCtx::surface_tag`]; none, as 0.11.0 made them, for a run bound
/// to no surface).
pub fn agreed_name(ctx: &RunCtx<'_>, carrier: Gh) -> String {
    let bound = match ctx.surface_tag() {
        t if t.is_empty() => format!("github-api|{carrier}"),
        t => format!("github-api|{carrier}|surface:{t}"),
    };
    let tag = ctx.key.name_tag(ctx.probe_id, &bound);
    format!("rw-{}-{tag}", probe_part(ctx.probe_id))
}

/// The variable name for actions-variable: upper case, `_` for `-`.
pub fn variable_name(ctx: &RunCtx<'_>) -> String {
    agreed_name(ctx, Gh::ActionsVariable)
        .to_ascii_uppercase()
        .replace('-', "_")
}

/// The tag a journal entry carries: a MAC over the whole probe id, the
/// carrier and the nonce.
pub fn entry_tag(ctx: &RunCtx<'_>, carrier: Gh, hex: &str) -> String {
    ctx.key
        .name_tag(ctx.probe_id, &format!("github-api|{carrier}|{hex}"))
}

/// The request that plants a carrier: (path, body), and the journal entry
/// cleanup needs, written before the request.
pub struct PlantRequest {
    pub path: String,
    pub body: Value,
    pub entry: Entry,
}

/// The fields that identify an object, as a journal entry's `match`.
fn fields(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The journal entry of an object: where to list it (`list`, `items`),
/// the fields that identify it (`match`), the path to read and delete it
/// with `{}` for its `key` field (`object`), that field's value when
/// known (`ref`); not yet tagged, nor said to be made inactive first.
fn entry(
    carrier: Gh,
    list: &str,
    items: Option<&str>,
    matches: BTreeMap<String, String>,
    object: String,
    key: &str,
    known: Option<&str>,
) -> Object {
    Object {
        carrier: carrier.name().to_string(),
        list: list.to_string(),
        items: items.map(String::from),
        matches,
        object: Some(object),
        key: key.to_string(),
        id: known.map(|n| Ref::Name(n.to_string())),
        tag: String::new(),
        deactivate: None,
    }
}

/// The plant of `carrier` with `nonce` (`Unsupported`: this instance
/// cannot plant it, with why).
pub fn plant_request(
    s: &Settings,
    ctx: &RunCtx<'_>,
    carrier: Gh,
    nonce: &Nonce,
) -> Result<PlantRequest, Fault> {
    let rp = format!("/repos/{}", s.repository.as_deref().unwrap_or(""));
    let hex = nonce.hex();
    let note = format!("runwarden probe {}", ctx.probe_id);
    let no_commit = || Fault::unsupported("no commit");
    let mut req = match carrier {
        Gh::LabelName => {
            let name = nonce_name(ctx, nonce);
            label(&rp, carrier, &name, SHORT, fields(&[("name", &name)]))
        }
        Gh::LabelDescription => {
            let name = agreed_name(ctx, carrier);
            let description = format!("{SHORT} {hex}");
            let m = fields(&[("name", &name), ("description", &description)]);
            label(&rp, carrier, &name, &description, m)
        }
        Gh::IssueComment => {
            let n = s.issue.ok_or_else(|| Fault::unsupported("no issue"))?;
            let body = format!("<!-- {note} -->\n{hex}");
            PlantRequest {
                path: format!("{rp}/issues/{n}/comments"),
                body: json!({ "body": body }),
                entry: Entry::Object(entry(
                    carrier,
                    &format!("{rp}/issues/{n}/comments"),
                    None,
                    fields(&[("body", &body)]),
                    format!("{rp}/issues/comments/{{}}"),
                    "id",
                    None,
                )),
            }
        }
        Gh::MilestoneTitle => {
            let title = nonce_name(ctx, nonce);
            PlantRequest {
                path: format!("{rp}/milestones"),
                body: json!({ "title": title, "state": "closed", "description": note }),
                entry: Entry::Object(entry(
                    carrier,
                    &format!("{rp}/milestones?state=all"),
                    None,
                    fields(&[("title", &title)]),
                    format!("{rp}/milestones/{{}}"),
                    "number",
                    None,
                )),
            }
        }
        Gh::ReleaseDraft => {
            let name = nonce_name(ctx, nonce);
            let tag = agreed_name(ctx, carrier);
            PlantRequest {
                path: format!("{rp}/releases"),
                body: json!({ "tag_name": tag, "name": name, "body": format!("{note}\n{hex}"), "draft": true }),
                entry: Entry::Object(entry(
                    carrier,
                    &format!("{rp}/releases"),
                    None,
                    fields(&[("name", &name), ("tag_name", &tag)]),
                    format!("{rp}/releases/{{}}"),
                    "id",
                    None,
                )),
            }
        }
        Gh::Deployment => deployment(&rp, s.commit.as_deref().ok_or_else(no_commit)?, &hex),
        Gh::ActionsVariable => {
            let name = variable_name(ctx);
            PlantRequest {
                path: format!("{rp}/actions/variables"),
                body: json!({ "name": name, "value": hex }),
                entry: Entry::Object(entry(
                    carrier,
                    &format!("{rp}/actions/variables"),
                    Some("variables"),
                    fields(&[("name", &name), ("value", &hex)]),
                    format!("{rp}/actions/variables/{{}}"),
                    "name",
                    Some(&name),
                )),
            }
        }
        Gh::CommitStatus | Gh::CheckRun => {
            let sha = s.commit.as_deref().ok_or_else(no_commit)?;
            permanent(&rp, carrier, sha, &nonce_name(ctx, nonce), &note, &hex)
        }
        // Planted by their own flows (their submodules), not one POST.
        Gh::CodeScanning
        | Gh::RunAnnotation
        | Gh::RunLog
        | Gh::Discussion
        | Gh::WorkflowDispatch
        | Gh::RepositoryDispatch => {
            return Err(Fault::unsupported(format!("{carrier} is no table carrier")));
        }
    };
    // What GitHub shows may name only the first 12 characters of the
    // probe id (a label's name has room for no more): the journal entry
    // binds the whole of it, with a tag over the carrier and the nonce,
    // so an entry of another probe is never taken for this one's.
    req.entry.set_tag(entry_tag(ctx, carrier, &hex));
    Ok(req)
}

/// The plant of a label named `name`, described by `description`; `m` is
/// what cleanup must find in it.
fn label(
    rp: &str,
    carrier: Gh,
    name: &str,
    description: &str,
    m: BTreeMap<String, String>,
) -> PlantRequest {
    PlantRequest {
        path: format!("{rp}/labels"),
        body: json!({ "name": name, "color": "ededed", "description": description }),
        entry: Entry::Object(entry(
            carrier,
            &format!("{rp}/labels"),
            None,
            m,
            format!("{rp}/labels/{{}}"),
            "name",
            Some(name),
        )),
    }
}

/// The plant of a deployment of commit `sha`: its payload and description
/// hold the nonce.
fn deployment(rp: &str, sha: &str, hex: &str) -> PlantRequest {
    let description = format!("{SHORT} {hex}");
    let e = Object {
        deactivate: Some(true),
        ..entry(
            Gh::Deployment,
            &format!("{rp}/deployments"),
            None,
            fields(&[("description", &description)]),
            format!("{rp}/deployments/{{}}"),
            "id",
            None,
        )
    };
    PlantRequest {
        path: format!("{rp}/deployments"),
        body: json!({
            "ref": sha, "environment": ENVIRONMENT, "payload": { "runwarden": hex },
            "description": description, "auto_merge": false, "required_contexts": [],
            "transient_environment": true, "production_environment": false,
        }),
        entry: Entry::Object(e),
    }
}

/// The plant of a commit status or a check run on commit `sha`, named
/// `name` (which holds the nonce): GitHub cannot delete either, so its
/// journal entry says what stays.
fn permanent(rp: &str, carrier: Gh, sha: &str, name: &str, note: &str, hex: &str) -> PlantRequest {
    let stays = |what: &str| {
        Entry::Permanent(Permanent {
            carrier: carrier.name().to_string(),
            permanent: format!("{what} {name} on {sha}"),
            // (Tagged by `plant_request`, as every table entry.)
            tag: String::new(),
        })
    };
    if carrier == Gh::CommitStatus {
        PlantRequest {
            path: format!("{rp}/statuses/{sha}"),
            body: json!({ "state": "success", "context": name, "description": note }),
            entry: stays("commit status"),
        }
    } else {
        PlantRequest {
            path: format!("{rp}/check-runs"),
            body: json!({
                "name": name, "head_sha": sha, "status": "completed", "conclusion": "neutral",
                "output": { "title": note, "summary": hex },
            }),
            entry: stays("check run"),
        }
    }
}

/// One route of run B: a listing (`items` names the array when the body
/// is an object) or one object by its agreed name.
pub enum Route {
    List {
        path: String,
        items: Option<&'static str>,
    },
    /// One object by its agreed name: the answer must be that object.
    Get { path: String, name: String },
}

/// The needle a plant reports: the nonce, and where run A put it when run
/// B cannot know that from its own run (the issue it commented on, the
/// commit it marked: a later run's event and `GITHUB_SHA` are its own).
pub fn needle(s: &Settings, carrier: Gh, nonce: &Nonce) -> Needle {
    let mut n = Planted::of(nonce);
    match carrier {
        Gh::IssueComment => n.issue = s.issue,
        Gh::CommitStatus | Gh::CheckRun => n.commit.clone_from(&s.commit),
        _ => {}
    }
    Needle::Planted(n)
}

/// Every route run B has to a carrier; none when it has no place to look
/// (no issue or commit, from the plant or its own run).
pub fn routes(s: &Settings, ctx: &RunCtx<'_>, carrier: Gh, needle: &Needle) -> Vec<Route> {
    let rp = format!("/repos/{}", s.repository.as_deref().unwrap_or(""));
    let list = |p: String, items| Route::List { path: p, items };
    let said = needle.planted();
    // Where run A wrote, as its plant said; without a receipt, this run's
    // own issue and commit.
    let issue = said.and_then(|n| n.issue).or(s.issue);
    let sha = said
        .and_then(|n| n.commit.clone())
        .or_else(|| s.commit.clone());
    match carrier {
        Gh::LabelName => vec![list(format!("{rp}/labels"), None)],
        Gh::LabelDescription => vec![
            list(format!("{rp}/labels"), None),
            Route::Get {
                path: format!("{rp}/labels/{}", agreed_name(ctx, carrier)),
                name: agreed_name(ctx, carrier),
            },
        ],
        Gh::IssueComment => issue
            .map(|n| list(format!("{rp}/issues/{n}/comments"), None))
            .into_iter()
            .collect(),
        Gh::MilestoneTitle => vec![list(format!("{rp}/milestones?state=all"), None)],
        Gh::ReleaseDraft => vec![list(format!("{rp}/releases"), None)],
        Gh::Deployment => vec![list(format!("{rp}/deployments"), None)],
        Gh::ActionsVariable => vec![
            list(format!("{rp}/actions/variables"), Some("variables")),
            Route::Get {
                path: format!("{rp}/actions/variables/{}", variable_name(ctx)),
                name: variable_name(ctx),
            },
        ],
        Gh::CommitStatus => sha
            .map(|c| list(format!("{rp}/commits/{c}/statuses"), None))
            .into_iter()
            .collect(),
        Gh::CheckRun => sha
            .map(|c| list(format!("{rp}/commits/{c}/check-runs"), Some("check_runs")))
            .into_iter()
            .collect(),
        // Their own routes (traces.rs).
        Gh::RunAnnotation | Gh::RunLog | Gh::Discussion => vec![],
        // The runs of the event since the plant, as its needle says.
        Gh::WorkflowDispatch | Gh::RepositoryDispatch => vec![list(
            super::dispatch::runs_path(
                s,
                super::dispatch::event(carrier),
                said.and_then(|n| n.since.as_deref()),
            ),
            Some("workflow_runs"),
        )],
        // The ref run A uploaded for, as its plant said; else this run's.
        Gh::CodeScanning => said
            .and_then(|n| n.git_ref.clone())
            .or_else(|| s.git_ref.clone())
            .filter(|r| super::scanning::valid_ref(r))
            .map(|r| {
                let q = crate::wire::percent_encode(&r).replace('/', "%2F");
                vec![
                    list(super::scanning::analyses_path(&rp, &r, None), None),
                    list(format!("{rp}/code-scanning/alerts?ref={q}"), None),
                ]
            })
            .unwrap_or_default(),
    }
}

/// Where in an object the nonce stands, for the detail: the first
/// top-level field (or `payload`, `output`) whose text holds it.
pub fn field_holding(object: &Value, needle: &str) -> Option<String> {
    object.as_object()?.iter().find_map(|(k, v)| {
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Object(_) => v.to_string(),
            _ => return None,
        };
        // (The field's name is the server's: escaped like any answer.)
        text.contains(needle)
            .then(|| crate::escape::bytes(k.as_bytes()))
    })
}

/// The `GITHUB_TOKEN` permission keys (GitHub's workflow spelling) a
/// carrier's plant writes with, for coverage; `run-traces` for a trace a
/// step leaves with no permission at all. Labels take either `issues` or
/// `pull-requests`, and so does a comment (on an issue or a pull request).
/// A repository variable needs a permission the `GITHUB_TOKEN` cannot
/// hold (it is a carrier for other tokens): none.
//
// Why names, not `Gh`: coverage asks by the carrier's name, and a name
// this table does not know claims nothing (a test checks every carrier of
// the table has its line here).
pub fn permissions_of(carrier: &str) -> &'static [&'static str] {
    match carrier {
        "label-name" | "label-description" | "issue-comment" => &["issues", "pull-requests"],
        "milestone-title" => &["issues"],
        "release-draft" | "repository-dispatch" => &["contents"],
        "deployment" => &["deployments"],
        "commit-status" => &["statuses"],
        "check-run" => &["checks"],
        "code-scanning" => &["security-events"],
        "discussion" => &["discussions"],
        "workflow-dispatch" => &["actions"],
        "run-annotation" | "run-log" => &["run-traces"],
        _ => &[],
    }
}
