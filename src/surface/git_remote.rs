//! `type: git-remote`: a git remote two runs can both reach. In CI that is
//! the repository itself, reached with the token `actions/checkout` left.
//!
//! Runs A and B never touch the user's checkout: each works in an empty bare
//! repository of its own, with the real `git` CLI ([`crate::git`]). Run A
//! builds orphan objects with plumbing and creates every ref in one push,
//! each leased on "must not exist yet", then deletes the transient ref in a
//! second push. Run B lists refs once (`ls-remote`), fetches the refs it
//! needs in one fetch, and tries one fetch of an unreachable commit by id.
//! Cleanup deletes, in one push, only refs this probe created and only while
//! they still point at what it pushed.
//!
//! The journal (entries passed to `created`) holds every ref before it is
//! pushed, so cleanup knows it even if run A dies mid-push; a ref that turns
//! out not to exist (refused, or deleted on purpose) is retracted by a later
//! entry.

use super::{
    Carrier, CleanupOutcome, Control, JobScope, Notice, NoticeKind, Persistence, PlantJob,
    PlantOutcome, RecoverOutcome, RunCtx, Surface, SurfaceType, Wanted,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::git::{self, Git};
use crate::nonce::Nonce;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The global config a run gives git for a local remote (in its scratch
/// repository).
const TRUST_FILE: &str = "runwarden-trust.gitconfig";

/// Longest one git invocation may take (the run's own timeout bounds the
/// whole run as well).
const GIT_TIMEOUT: Duration = Duration::from_secs(120);

/// The identity of every commit and tag run A makes, except where the
/// carrier is the identity itself.
const IDENT_NAME: &str = "runwarden";
const IDENT_EMAIL: &str = "probe@runwarden.invalid";

pub struct GitRemote;

static CARRIERS: &[Carrier] = &[
    Carrier {
        name: "branch-name",
        persistence: Persistence::Durable,
        description: "the nonce in a branch name (refs/heads/...), read back with ls-remote alone",
    },
    Carrier {
        name: "tag-name",
        persistence: Persistence::Durable,
        description: "the nonce in a lightweight tag name (refs/tags/...)",
    },
    Carrier {
        name: "annotated-tag-message",
        persistence: Persistence::Durable,
        description: "the nonce in the message of an annotated tag",
    },
    Carrier {
        name: "commit-message",
        persistence: Persistence::Durable,
        description: "the nonce in a commit message on a branch",
    },
    Carrier {
        name: "author-name",
        persistence: Persistence::Durable,
        description: "the nonce as a commit's author name",
    },
    Carrier {
        name: "author-email",
        persistence: Persistence::Durable,
        description: "the nonce in a commit's author email",
    },
    Carrier {
        name: "file-content",
        persistence: Persistence::Durable,
        description: "the nonce in the content of a file in a commit",
    },
    Carrier {
        name: "file-path",
        persistence: Persistence::Durable,
        description: "the nonce as a file path in a commit's tree",
    },
    Carrier {
        name: "notes",
        persistence: Persistence::Durable,
        description: "the nonce in a git note (refs/notes/...), invisible in most UIs",
    },
    Carrier {
        name: "custom-ref",
        persistence: Persistence::Durable,
        description: "the nonce in a ref outside heads and tags (refs/<x>/...), listed by ls-remote",
    },
    Carrier {
        name: "deleted-ref",
        persistence: Persistence::Transient,
        description: "the nonce in a branch name created then deleted by run A (a visible-state check: expected to pass)",
    },
    Carrier {
        name: "unreachable-object",
        persistence: Persistence::UntilGc,
        description: "the nonce in the commit of a deleted branch, fetched by run B by its id",
    },
];

/// Settings after validation; also what runs A, B and cleanup receive.
/// `url` and `credentials` are secrets: they are never printed.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Settings {
    /// What git is given: a URL or an absolute path.
    pub url: String,
    /// `url` without userinfo, for people.
    pub shown: String,
    /// The checkout's `http.*` and `credential.*` settings.
    pub credentials: Vec<(String, String)>,
    /// Where credential helpers find their files (the operator's HOME).
    pub credential_home: Option<String>,
    /// Reached over ssh (needs an `ssh` client).
    pub ssh: bool,
    /// The probe's own control remote. Its transient ref is not deleted:
    /// the control of a visible-state check is a ref that stays visible.
    #[serde(default)]
    pub control: bool,
}

/// Config values reach git's command line (a pull request can change the
/// config): a remote that git could read as an option, or a transport
/// helper (`ext::<command>` runs a command), is refused outright.
fn check_remote(remote: &str) -> Result<(), String> {
    if remote.starts_with('-') {
        return Err("must not start with `-` (git would read it as an option)".into());
    }
    if remote.contains("::") {
        return Err(
            "uses a transport helper (`<transport>::<address>`), which runwarden does not allow"
                .into(),
        );
    }
    if remote.chars().any(|c| c.is_control()) {
        return Err("contains control characters".into());
    }
    Ok(())
}

/// Takes credentials out of an http(s) URL (`https://user:token@host/…`,
/// as some checkouts and configs hold it) and into an `extraheader` that
/// git reads from its environment: git's command line is readable in
/// `/proc/<pid>/cmdline` by every user of the machine, the environment
/// only by the same user. A token alone (`https://token@host`) is sent as
/// the user name with an empty password. ssh names a user, never a
/// password.
fn move_userinfo(url: String, credentials: &mut Vec<(String, String)>) -> Result<String, String> {
    use base64::Engine as _;
    let (bare, info) = crate::redact::split_userinfo(&url);
    let Some(info) = info else {
        return Ok(url);
    };
    let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or("");
    match scheme {
        "http" | "https" => {
            let (user, password) = info.split_once(':').unwrap_or((&info, ""));
            crate::redact::add_basic(user, password);
            crate::redact::add(&info);
            let origin = crate::http::origin(&bare)
                .ok_or("`remote`: the URL has no host to send its credentials to")?;
            let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            credentials.push((
                format!("http.{origin}/.extraheader"),
                format!("Authorization: Basic {b64}"),
            ));
            Ok(bare)
        }
        _ if info.contains(':') => Err(
            "`remote`: a password in a non-HTTP URL is never used (ssh asks its agent or key): remove it"
                .into(),
        ),
        _ => Ok(url),
    }
}

/// `git@host:path` (scp-like ssh syntax): a colon before any slash, after
/// more than one character (not a drive letter).
fn is_scp(remote: &str) -> bool {
    match remote.find(':') {
        Some(i) => i > 1 && !remote[..i].contains('/'),
        None => false,
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
}

impl SurfaceType for GitRemote {
    fn name(&self) -> &'static str {
        "git-remote"
    }

    fn description(&self) -> &'static str {
        "a git remote both runs can reach (in CI: the repository, with the checkout's token)"
    }

    fn carriers(&self) -> &'static [Carrier] {
        CARRIERS
    }

    fn keys(&self) -> &'static [&'static str] {
        &["remote", "repo"]
    }

    fn scope_keys(&self) -> &'static [&'static str] {
        &["refs"]
    }

    fn check_scope(&self, carrier: &str, _key: &str, pattern: &str) -> Result<(), String> {
        if matches!(carrier, "deleted-ref" | "unreachable-object") {
            return Err(format!(
                "{carrier} cannot be scoped: it has no ref of its own to place"
            ));
        }
        if !pattern.starts_with("refs/") || pattern.matches('*').count() != 1 {
            return Err(format!(
                "`{pattern}` must start with `refs/` and hold exactly one `*` (like `refs/heads/memory/*`)"
            ));
        }
        let bad = |c: char| c.is_ascii_control() || " ~^:?[\\".contains(c);
        if pattern.contains(bad) || pattern.contains("..") || pattern.contains("@{") {
            return Err(format!("`{pattern}` is not a valid ref pattern"));
        }
        if let Some(ns) = namespace(carrier)
            && !pattern.starts_with(ns)
        {
            return Err(format!("{carrier} lives under {ns}, so its scope must too"));
        }
        if carrier == "custom-ref"
            && (pattern.starts_with("refs/heads/") || pattern.starts_with("refs/tags/"))
        {
            return Err(
                "custom-ref is a ref outside heads and tags, so its scope must be too".into(),
            );
        }
        // Outside the scope means runwarden's own default name: it must
        // not fall inside the pattern.
        let sample = "0".repeat(32);
        let outside = ref_for(carrier, "000000000000", &sample, None).unwrap_or_default();
        if glob_match(pattern, &outside) {
            return Err(format!(
                "`{pattern}` also covers runwarden's own refs (like {outside}): nothing would be planted outside it"
            ));
        }
        Ok(())
    }

    fn validate(&self, mut opts: Options<'_>) -> Result<Value, ConfigError> {
        let Some((remote, pos)) = opts.string("remote")? else {
            return Err(opts.error(
                opts.entry_pos(),
                "a git-remote surface needs `remote:` (a remote name, a path or a URL)",
            ));
        };
        let repo = match opts.string("repo")? {
            Some((r, _)) => PathBuf::from(r),
            None => opts
                .env("GITHUB_WORKSPACE")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(".")),
        };
        let repo =
            std::path::absolute(&repo).map_err(|e| opts.error(pos, format!("`repo`: {e}")))?;
        check_remote(&remote).map_err(|m| opts.error(pos, format!("`remote`: {m}")))?;
        let mut credentials = vec![];
        let url = if let Some((scheme, _)) = remote.split_once("://") {
            if !["file", "http", "https", "ssh", "git"].contains(&scheme) {
                return Err(opts.error(pos, format!("`remote`: unsupported URL scheme `{scheme}`")));
            }
            remote.clone()
        } else if is_scp(&remote) {
            remote.clone()
        } else if remote.starts_with('/') || remote.starts_with('.') || remote.contains('/') {
            std::path::absolute(&remote)
                .map_err(|e| opts.error(pos, format!("`remote`: {e}")))?
                .to_string_lossy()
                .into_owned()
        } else {
            // A remote name of the checkout at `repo`: its URL and its
            // credential settings, as the job itself would use them.
            let operator = Git::operator(Duration::from_secs(20));
            let args: [&OsStr; 6] = [
                "-C".as_ref(),
                repo.as_os_str(),
                "remote".as_ref(),
                "get-url".as_ref(),
                "--push".as_ref(),
                remote.as_ref(),
            ];
            let (out, stdout) = operator.run(Path::new("/"), &args, &[], b"");
            if !out.success {
                return Err(opts.error(
                    pos,
                    format!(
                        "`remote`: `{remote}` is not a remote of {}: {}",
                        escape::bytes(repo.as_os_str().as_encoded_bytes()),
                        out.reason()
                    ),
                ));
            }
            let url = String::from_utf8_lossy(&stdout).trim().to_string();
            // The checkout's own URL is held to the same rules.
            check_remote(&url).map_err(|m| {
                opts.error(
                    pos,
                    format!("`remote`: `{remote}` resolves to a URL that {m}"),
                )
            })?;
            credentials = read_credentials(&operator, &repo);
            // A relative local URL is relative to the checkout.
            if !url.contains("://") && !is_scp(&url) && !url.starts_with('/') {
                repo.join(&url).to_string_lossy().into_owned()
            } else {
                url
            }
        };
        let ssh = url.starts_with("ssh://") || (is_scp(&url) && !url.contains("://"));
        let url = move_userinfo(url, &mut credentials).map_err(|m| opts.error(pos, m))?;
        let settings = Settings {
            shown: crate::redact::userinfo(&url),
            url,
            credentials,
            credential_home: opts.env("HOME"),
            ssh,
            control: false,
        };
        Ok(serde_json::to_value(settings).expect("settings serialize"))
    }

    fn control(&self, _settings: &Value, dir: &Path) -> Result<Control, String> {
        let git = Git::new(vec![], None, GIT_TIMEOUT, "");
        let args: [&OsStr; 4] = [
            "init".as_ref(),
            "--bare".as_ref(),
            "-q".as_ref(),
            dir.as_os_str(),
        ];
        let (out, _) = git.run(Path::new("/"), &args, &[], b"");
        if !out.success {
            return Err(format!(
                "git init of the control remote failed: {}",
                out.reason()
            ));
        }
        let path = dir.to_string_lossy().into_owned();
        let control = Settings {
            url: path.clone(),
            shown: path,
            credentials: vec![],
            credential_home: None,
            ssh: false,
            control: true,
        };
        Ok(Control::settings(
            serde_json::to_value(control).expect("settings serialize"),
        ))
    }

    fn derive_needle(
        &self,
        carrier: &str,
        probe_id: &str,
        nonce: &Nonce,
        scope: Option<&JobScope>,
    ) -> Result<Value, String> {
        let hex = nonce.hex();
        match ref_for(carrier, probe_id, &hex, scope) {
            Some(r) => Ok(ref_needle(carrier, &hex, &r)),
            // The commit's id depends on the time it was made.
            None => Err("the unreachable commit's id is known only to the plant".into()),
        }
    }

    fn open(&self, settings: &Value) -> Result<Box<dyn Surface>, String> {
        let s: Settings = serde_json::from_value(settings.clone())
            .map_err(|e| format!("bad git-remote settings: {}", e.classify_name()))?;
        let git = Git::new(
            s.credentials.clone(),
            s.credential_home.clone(),
            GIT_TIMEOUT,
            &s.url,
        );
        Ok(Box::new(Instance { s, git }))
    }
}

/// A serde error's category only: its text could quote a setting, and
/// settings hold credentials.
trait ClassifyName {
    fn classify_name(&self) -> &'static str;
}

impl ClassifyName for serde_json::Error {
    fn classify_name(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Io => "io",
            serde_json::error::Category::Syntax => "syntax",
            serde_json::error::Category::Data => "data",
            serde_json::error::Category::Eof => "eof",
        }
    }
}

/// The checkout's `http.*` (extraheader, CA settings, proxies) and
/// `credential.*` settings, with includes followed (actions/checkout v6 puts
/// its token in a file pulled in with `includeIf`).
fn read_credentials(operator: &Git, repo: &Path) -> Vec<(String, String)> {
    let args: [&OsStr; 7] = [
        "-C".as_ref(),
        repo.as_os_str(),
        "config".as_ref(),
        "--includes".as_ref(),
        "--null".as_ref(),
        "--get-regexp".as_ref(),
        r"^(http\..*|credential\..*)$".as_ref(),
    ];
    let (out, stdout) = operator.run(Path::new("/"), &args, &[], b"");
    if !out.success {
        return vec![];
    }
    // `--null`: "key\nvalue\0" per entry (our line reader put a '\n' after
    // every line, so split on NUL and trim that).
    stdout
        .split(|b| *b == 0)
        .filter_map(|e| {
            let e = String::from_utf8_lossy(e);
            let e = e.trim_start_matches('\n');
            let (k, v) = e.split_once('\n')?;
            Some((k.to_string(), v.trim_end_matches('\n').to_string()))
        })
        .collect()
}

/// Carriers whose nonce is in a ref name (found by `ls-remote` alone).
fn is_name_carrier(carrier: &str) -> bool {
    matches!(
        carrier,
        "branch-name" | "tag-name" | "custom-ref" | "deleted-ref"
    )
}

/// The ref a carrier is planted under (none for `unreachable-object`, which
/// rides on the deleted branch). Every name carries the probe id. Inside a
/// declared `refs:` scope, the pattern's `*` becomes
/// `runwarden-<probe-id>-<nonce or carrier>`.
fn ref_for(carrier: &str, probe: &str, hex: &str, scope: Option<&JobScope>) -> Option<String> {
    if let Some(sc) = scope.filter(|s| s.inside) {
        let leaf = if is_name_carrier(carrier) {
            hex
        } else {
            carrier
        };
        return Some(
            sc.value
                .replacen('*', &format!("runwarden-{probe}-{leaf}"), 1),
        );
    }
    let heads = format!("refs/heads/runwarden/{probe}");
    Some(match carrier {
        "branch-name" => format!("{heads}/{hex}"),
        "tag-name" => format!("refs/tags/runwarden-{probe}-{hex}"),
        "custom-ref" => format!("refs/runwarden/{probe}/{hex}"),
        "deleted-ref" => format!("{heads}/deleted-{hex}"),
        "annotated-tag-message" => format!("refs/tags/runwarden-{probe}-annotated"),
        "notes" => format!("refs/notes/runwarden-{probe}"),
        "unreachable-object" => return None,
        other => format!("{heads}/{other}"),
    })
}

/// The nonce of a ref named like a name-carrier marker of `probe`: a last
/// component `<32 hex>` under `…/runwarden/<probe>/` (`deleted-<32 hex>`
/// too), or `runwarden-<probe>-<32 hex>` (`tag`) anywhere (tags, scoped
/// refs).
fn marker_hex<'n>(name: &'n [u8], probe: &str, tag: &str) -> Option<&'n str> {
    let name = std::str::from_utf8(name).ok()?;
    let (dir, leaf) = name.rsplit_once('/')?;
    let hex = if let Some(h) = leaf.strip_prefix(tag) {
        h
    } else if dir.ends_with(&format!("runwarden/{probe}")) {
        leaf.strip_prefix("deleted-").unwrap_or(leaf)
    } else {
        return None;
    };
    (hex.len() == 32
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    .then_some(hex)
}

/// What recovery looks for in a carrier that lives in a ref: the nonce,
/// and for content carriers the ref it is agreed to be under.
fn ref_needle(carrier: &str, hex: &str, refname: &str) -> Value {
    if is_name_carrier(carrier) {
        json!({ "text": hex })
    } else {
        json!({ "text": hex, "ref": refname })
    }
}

/// Whether `name` matches a refspec-style pattern with one `*` (which, as
/// in git refspecs, matches any run of characters, `/` included).
fn glob_match(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        Some((pre, post)) => {
            name.len() >= pre.len() + post.len() && name.starts_with(pre) && name.ends_with(post)
        }
        None => pattern == name,
    }
}

/// The namespace a carrier's ref must live in to be that carrier.
fn namespace(carrier: &str) -> Option<&'static str> {
    match carrier {
        "branch-name" => Some("refs/heads/"),
        "tag-name" | "annotated-tag-message" => Some("refs/tags/"),
        "notes" => Some("refs/notes/"),
        _ => None,
    }
}

/// One job's ref and object mark, before fast-import gives ids.
type Planned = (Option<String>, Option<u32>);

/// A `git fast-import` stream under construction: all of run A's objects
/// are built by one git process instead of one per object.
struct Stream {
    text: Vec<u8>,
    next: u32,
    time: u64,
}

impl Stream {
    fn new() -> Stream {
        let time = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Stream {
            text: Vec::new(),
            next: 0,
            time,
        }
    }

    fn mark(&mut self) -> u32 {
        self.next += 1;
        self.next
    }

    fn line(&mut self, l: &str) {
        self.text.extend_from_slice(l.as_bytes());
        self.text.push(b'\n');
    }

    fn data(&mut self, body: &str) {
        self.line(&format!("data {}", body.len()));
        self.line(body);
    }

    fn blob(&mut self, content: &str) -> u32 {
        let m = self.mark();
        self.line("blob");
        self.line(&format!("mark :{m}"));
        self.data(content);
        m
    }

    /// A root commit holding `files` (path, blob mark). Each commit goes on
    /// a scratch ref of its own: a commit with no `from` on a new ref has
    /// no parent.
    fn commit(&mut self, author: &(String, String), message: &str, files: &[(&str, u32)]) -> u32 {
        let m = self.mark();
        let t = self.time;
        self.line(&format!("commit refs/runwarden-build/{m}"));
        self.line(&format!("mark :{m}"));
        self.line(&format!("author {} <{}> {t} +0000", author.0, author.1));
        self.line(&format!("committer {IDENT_NAME} <{IDENT_EMAIL}> {t} +0000"));
        self.data(message);
        for (path, blob) in files {
            self.line(&format!("M 100644 :{blob} {path}"));
        }
        self.line("");
        m
    }

    fn tag(&mut self, name: &str, target: u32, message: &str) -> u32 {
        let m = self.mark();
        let t = self.time;
        self.line(&format!("tag {name}"));
        self.line(&format!("mark :{m}"));
        self.line(&format!("from :{target}"));
        self.line(&format!("tagger {IDENT_NAME} <{IDENT_EMAIL}> {t} +0000"));
        self.data(message);
        m
    }

    /// A notes commit whose tree notes `target` with `note`.
    fn note(&mut self, target: u32, note: &str) -> u32 {
        let m = self.mark();
        let t = self.time;
        self.line(&format!("commit refs/runwarden-build/notes-{m}"));
        self.line(&format!("mark :{m}"));
        self.line(&format!("committer {IDENT_NAME} <{IDENT_EMAIL}> {t} +0000"));
        self.data("Notes added by runwarden");
        self.line(&format!("N inline :{target}"));
        self.data(note);
        self.line("");
        m
    }
}

struct Instance {
    s: Settings,
    git: Git,
}

/// One ref run A creates.
struct Push {
    carrier: usize,
    refname: String,
    sha: String,
}

/// What run A built: the refs to push, and per carrier its needle (or why
/// it could not be built).
struct Built {
    pushes: Vec<Push>,
    needles: Vec<Result<Value, PlantOutcome>>,
}

/// One ref a push changes, leased: `expect` `None` means the ref must not
/// exist yet, `Some(sha)` that it must still point there. An empty `src`
/// deletes.
struct RefUpdate {
    src: String,
    dst: String,
    expect: Option<String>,
}

/// A push's per-ref results from `--porcelain`: ref -> (flag, summary).
fn porcelain(stdout: &[u8]) -> HashMap<String, (char, String)> {
    let mut out = HashMap::new();
    for line in String::from_utf8_lossy(stdout).lines() {
        let mut parts = line.splitn(3, '\t');
        let (Some(flag), Some(refs), summary) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let Some(flag) = flag.chars().next() else {
            continue;
        };
        if let Some((_, dst)) = refs.rsplit_once(':') {
            // The reason is the server's words: redacted before it is kept.
            let summary = crate::redact::text(summary.unwrap_or(""));
            out.insert(dst.to_string(), (flag, summary));
        }
    }
    out
}

/// Git's message without what it quotes (`'https://host/read-only-repo/'`,
/// a path): a URL or repository name must not decide what the message
/// means.
fn unquoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quoted = false;
    for c in text.chars() {
        if c == '\'' {
            quoted = !quoted;
        } else if !quoted {
            out.push(c);
        }
    }
    out.to_ascii_lowercase()
}

/// Whether git's words say the remote's own access control refused: an
/// authentication or authorization answer, a hook, a protected branch, a
/// ruleset, a local remote's own permissions. Anything else (no route, no
/// such host, a 5xx, a server-side failure to update a ref, a maintenance
/// mode) is not a refusal; nor is git having had no credential to offer
/// (see [`no_credential`]).
fn is_refusal(text: &str) -> bool {
    let t = unquoted(text);
    if no_credential(&t) {
        return false;
    }
    [
        "returned error: 401",
        "returned error: 403",
        "authentication failed",
        "permission denied",
        "hook declined",
        "protected branch",
        "access denied",
        "permission to",
        "write access",
        // A server's word for a refused ref (`[remote rejected] (denied:
        // …)`), GitHub's rule and protection codes.
        "denied",
        "not allowed",
        "gh006",
        "gh013",
        "read-only file system",
    ]
    .iter()
    .any(|p| t.contains(p))
}

/// Git asked for a user name or password and had none to give (prompts
/// are off in runwarden's runs): no credential was offered, so nothing
/// the remote said is about what the job's own credentials may do.
fn no_credential(t: &str) -> bool {
    [
        "could not read username",
        "could not read password",
        "terminal prompts disabled",
    ]
    .iter()
    .any(|p| t.contains(p))
}

/// The arguments as the `OsStr` list [`Git`] takes.
fn os(args: &[String]) -> Vec<&OsStr> {
    args.iter().map(OsStr::new).collect()
}

impl Instance {
    /// A fresh, empty bare repository in the run's TMPDIR (removed on
    /// drop): runs never touch the user's checkout.
    fn scratch(&self) -> Result<tempfile::TempDir, String> {
        let w = tempfile::Builder::new()
            .prefix("runwarden-git-")
            .tempdir()
            .map_err(|e| format!("scratch repository: {e}"))?;
        self.init(w.path())?;
        // A remote on this machine owned by another user (run B as another
        // uid, a shared runner directory) trips git's `safe.directory`
        // check: a client-side safety rule, not the surface's access
        // control, so a run trusts exactly that one repository. It has to
        // be a global config file: git drops command-line and environment
        // config when it starts upload-pack in the other repository.
        if let Some(path) = self.local_path() {
            let quoted = path.replace('\\', "\\\\").replace('"', "\\\"");
            std::fs::write(
                w.path().join(TRUST_FILE),
                format!("[safe]\n\tdirectory = \"{quoted}\"\n"),
            )
            .map_err(|e| format!("scratch repository: {e}"))?;
        }
        Ok(w)
    }

    /// The repository path of a remote on this machine (a path or file://).
    fn local_path(&self) -> Option<&str> {
        let url = self.s.url.as_str();
        url.strip_prefix("file://")
            .or_else(|| url.starts_with('/').then_some(url))
    }

    /// Environment for git that talks to the remote: the trust file of a
    /// local remote as the (otherwise empty) global config.
    fn remote_env(&self, dir: &Path) -> Option<String> {
        self.local_path()
            .map(|_| dir.join(TRUST_FILE).to_string_lossy().into_owned())
    }

    fn remote_run(&self, dir: &Path, args: &[String]) -> (git::Outcome, Vec<u8>) {
        let global = self.remote_env(dir);
        let envs: Vec<(&str, &str)> = global
            .iter()
            .map(|g| ("GIT_CONFIG_GLOBAL", g.as_str()))
            .collect();
        self.git.run(dir, &os(args), &envs, b"")
    }

    /// One streamed `ls-remote`: the refs `keep` picks, name to object id
    /// (memory holds only those).
    fn ls_refs(
        &self,
        dir: &Path,
        keep: impl Fn(&str) -> bool,
    ) -> Result<HashMap<String, String>, String> {
        let mut refs = HashMap::new();
        let ls = self.remote_stream(dir, &["ls-remote".into(), self.s.url.clone()], |line| {
            let l = String::from_utf8_lossy(line);
            if let Some((sha, name)) = l.split_once('\t')
                && keep(name)
            {
                refs.insert(name.to_string(), sha.to_string());
            }
        });
        if ls.success {
            Ok(refs)
        } else {
            Err(format!("ls-remote failed: {}", ls.reason()))
        }
    }

    fn remote_stream(&self, dir: &Path, args: &[String], line: impl FnMut(&[u8])) -> git::Outcome {
        let global = self.remote_env(dir);
        let envs: Vec<(&str, &str)> = global
            .iter()
            .map(|g| ("GIT_CONFIG_GLOBAL", g.as_str()))
            .collect();
        self.git.stream(dir, &os(args), &envs, b"", line)
    }

    fn init(&self, dir: &Path) -> Result<(), String> {
        let (out, _) = self.git.run(
            dir,
            &os(&["init".into(), "--bare".into(), "-q".into(), ".".into()]),
            &[],
            b"",
        );
        if out.success {
            Ok(())
        } else {
            Err(format!("git init failed: {}", out.reason()))
        }
    }

    /// Runs a local plumbing command and returns its trimmed stdout.
    fn plumb(
        &self,
        dir: &Path,
        args: &[&str],
        envs: &[(&str, &str)],
        input: &[u8],
    ) -> Result<String, String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let (out, stdout) = self.git.run(dir, &os(&args), envs, input);
        if out.success {
            Ok(String::from_utf8_lossy(&stdout).trim().to_string())
        } else {
            Err(format!("git {} failed: {}", args[0], out.reason()))
        }
    }

    /// Runs one `git fast-import` over `stream` and returns each mark's
    /// object id.
    fn fast_import(&self, dir: &Path, stream: &Stream) -> Result<HashMap<u32, String>, String> {
        let marks = dir.join("runwarden-marks");
        let args = vec![
            "fast-import".to_string(),
            "--quiet".into(),
            format!("--export-marks={}", marks.display()),
        ];
        let (out, _) = self.git.run(dir, &os(&args), &[], &stream.text);
        if !out.success {
            return Err(format!("git fast-import failed: {}", out.reason()));
        }
        let text =
            std::fs::read_to_string(&marks).map_err(|e| format!("fast-import marks: {e}"))?;
        Ok(text
            .lines()
            .filter_map(|l| {
                let (m, sha) = l.strip_prefix(':')?.split_once(' ')?;
                Some((m.parse().ok()?, sha.to_string()))
            })
            .collect())
    }

    /// Builds every plant's objects in `dir` (one fast-import); returns the
    /// refs to push and each job's needle (or why it could not be built).
    fn build(&self, dir: &Path, probe: &str, jobs: &[PlantJob]) -> Result<Built, String> {
        let mut st = Stream::new();
        let innocuous = format!("runwarden probe {probe}");
        let ident = (IDENT_NAME.to_string(), IDENT_EMAIL.to_string());
        let plain = st.commit(&ident, &innocuous, &[]);
        // The deleted branch's commit carries the unreachable-object nonce
        // (that carrier's only appearance); without it, the innocuous one.
        let doomed = match jobs.iter().find(|j| j.carrier == "unreachable-object") {
            Some(u) => st.commit(&ident, &format!("{innocuous}\n\n{}", u.nonce.hex()), &[]),
            None => plain,
        };
        // Per job: its ref and the mark of the object the ref points at
        // (both none for unreachable-object, which rides on the deleted
        // branch).
        let mut planned: Vec<Result<Planned, PlantOutcome>> = Vec::new();
        for job in jobs {
            let hex = job.nonce.hex();
            let refname = ref_for(&job.carrier, probe, &hex, job.scope.as_ref());
            let object = match job.carrier.as_str() {
                "branch-name" | "tag-name" | "custom-ref" => Some(plain),
                "deleted-ref" => Some(doomed),
                "unreachable-object" => None,
                "annotated-tag-message" => {
                    let name = refname
                        .as_deref()
                        .unwrap_or_default()
                        .trim_start_matches("refs/tags/");
                    Some(st.tag(name, plain, &hex))
                }
                "commit-message" => Some(st.commit(&ident, &format!("{innocuous}\n\n{hex}"), &[])),
                "author-name" => {
                    Some(st.commit(&(hex.clone(), IDENT_EMAIL.into()), &innocuous, &[]))
                }
                "author-email" => Some(st.commit(
                    &(IDENT_NAME.into(), format!("{hex}@runwarden.invalid")),
                    &innocuous,
                    &[],
                )),
                "file-content" => {
                    let b = st.blob(&format!("{hex}\n"));
                    Some(st.commit(&ident, &innocuous, &[("notes.txt", b)]))
                }
                "file-path" => {
                    let b = st.blob("runwarden probe\n");
                    Some(st.commit(&ident, &innocuous, &[(&hex, b)]))
                }
                "notes" => Some(st.note(plain, &format!("{hex}\n"))),
                other => {
                    planned.push(Err(PlantOutcome::Failed {
                        reason: format!("unknown carrier {other}"),
                    }));
                    continue;
                }
            };
            planned.push(Ok((refname, object)));
        }
        let marks = self.fast_import(dir, &st)?;
        let sha = |m: u32| {
            marks
                .get(&m)
                .cloned()
                .ok_or_else(|| format!("fast-import gave no object for mark :{m}"))
        };
        let doomed = sha(doomed)?;
        let mut pushes = Vec::new();
        let mut needles = Vec::new();
        for (i, (job, plan)) in jobs.iter().zip(planned).enumerate() {
            let hex = job.nonce.hex();
            let needle = match plan {
                Err(o) => Err(o),
                Ok((Some(r), Some(m))) => {
                    pushes.push(Push {
                        carrier: i,
                        refname: r.clone(),
                        sha: sha(m)?,
                    });
                    Ok(ref_needle(&job.carrier, &hex, &r))
                }
                Ok(_) => Ok(json!({ "text": hex, "sha": doomed })),
            };
            needles.push(needle);
        }
        Ok(Built { pushes, needles })
    }

    /// One push; returns per-ref results, or the whole push's failure.
    fn push(
        &self,
        dir: &Path,
        updates: &[RefUpdate],
    ) -> Result<HashMap<String, (char, String)>, String> {
        let mut args: Vec<String> = vec!["push".into(), "--porcelain".into(), "--no-verify".into()];
        for u in updates {
            args.push(format!(
                "--force-with-lease={}:{}",
                u.dst,
                u.expect.as_deref().unwrap_or("")
            ));
        }
        args.push(self.s.url.clone());
        for u in updates {
            args.push(format!("{}:{}", u.src, u.dst));
        }
        let (out, stdout) = self.remote_run(dir, &args);
        let results = porcelain(&stdout);
        if results.is_empty() && !out.success {
            return Err(out.reason());
        }
        Ok(results)
    }
}

/// An authentication failure (as opposed to an authorization refusal):
/// the remote did not accept who we are.
fn is_auth_failure(text: &str) -> bool {
    let t = unquoted(text);
    ["returned error: 401", "authentication failed"]
        .iter()
        .any(|p| t.contains(p))
}

impl Instance {
    /// Whether a failure shows the remote's own access control refusing.
    /// An authentication failure is not proof when a credential helper is
    /// the only credential: the helper may work in the job and not in
    /// runwarden's runs (no prompt, no desktop keyring), and a PASS there
    /// could hide an open channel.
    fn refused(&self, text: &str) -> bool {
        is_refusal(text) && !(is_auth_failure(text) && self.helper_only())
    }

    fn helper_only(&self) -> bool {
        let has = |f: &dyn Fn(&str) -> bool| {
            self.s
                .credentials
                .iter()
                .any(|(k, v)| f(k) && !v.is_empty())
        };
        has(&|k| k.starts_with("credential.") && k.ends_with("helper"))
            && !has(&|k| k.ends_with("extraheader"))
            && crate::redact::url_userinfo(&self.s.url).is_none()
    }

    /// A failure of the whole push, as the outcome it means.
    fn push_failure(&self, reason: &str) -> PlantOutcome {
        if no_credential(&unquoted(reason)) {
            PlantOutcome::Failed {
                reason: format!(
                    "the remote asked for credentials and runwarden had none to give (no extraheader, credential helper or URL userinfo reached it): cannot tell whether the job could push ({reason})"
                ),
            }
        } else if self.refused(reason) {
            PlantOutcome::Refused {
                reason: format!("the remote refused the push: {reason}"),
            }
        } else if is_refusal(reason) {
            PlantOutcome::Failed {
                reason: format!(
                    "authentication failed and the only credential is a credential helper, which may work in the job but not here: cannot tell whether the job could push ({reason})"
                ),
            }
        } else {
            PlantOutcome::Failed {
                reason: format!(
                    "remote unreachable: push to {} failed: {reason}",
                    self.s.shown
                ),
            }
        }
    }
}

impl Surface for Instance {
    fn unavailable(&self, _carrier: &str) -> Option<String> {
        (self.s.ssh && !on_path("ssh"))
            .then(|| "the remote is reached over ssh and no ssh client is on PATH".into())
    }

    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        job: &PlantJob,
        created: &mut dyn FnMut(Value),
    ) -> PlantOutcome {
        self.plant_all(ctx, std::slice::from_ref(job), created)
            .remove(0)
    }

    fn plant_all(
        &self,
        ctx: &RunCtx<'_>,
        carriers: &[PlantJob],
        created: &mut dyn FnMut(Value),
    ) -> Vec<PlantOutcome> {
        let all = |o: PlantOutcome| carriers.iter().map(|_| o.clone()).collect::<Vec<_>>();
        if let Some(sig) = crate::signals::received() {
            return all(super::interrupted(sig));
        }
        let work = match self.scratch() {
            Ok(w) => w,
            Err(e) => return all(PlantOutcome::Failed { reason: e }),
        };
        let dir = work.path();
        let Built { pushes, needles } = match self.build(dir, ctx.probe_id, carriers) {
            Ok(x) => x,
            Err(e) => return all(PlantOutcome::Failed { reason: e }),
        };
        // Journal every ref before the push that creates it.
        for p in &pushes {
            created(json!({ "ref": p.refname, "sha": p.sha }));
        }
        let creates: Vec<RefUpdate> = pushes
            .iter()
            .map(|p| RefUpdate {
                src: p.sha.clone(),
                dst: p.refname.clone(),
                expect: None,
            })
            .collect();
        let mut results = self.push(dir, &creates);
        // A pre-receive hook accepts or declines a push as a whole: one ref
        // it refuses declines every other ref with it. When the remote
        // declined every ref of the combined push, push each ref alone, so
        // each carrier gets its own ref's fate (the common case stays one
        // push).
        if let Ok(r) = &results
            && creates.len() > 1
            && creates.iter().all(
                |c| matches!(r.get(&c.dst), Some(('!', why)) if why.contains("remote rejected")),
            )
        {
            let mut alone = HashMap::new();
            for c in &creates {
                let one = RefUpdate {
                    src: c.src.clone(),
                    dst: c.dst.clone(),
                    expect: None,
                };
                match self.push(dir, &[one]) {
                    Ok(r) => alone.extend(r),
                    Err(e) => {
                        alone.insert(c.dst.clone(), ('!', e));
                    }
                }
            }
            results = Ok(alone);
        }
        // Per carrier: Ok(()) when its ref was created (or it has none).
        let mut status: Vec<Result<(), PlantOutcome>> = carriers.iter().map(|_| Ok(())).collect();
        for p in &pushes {
            let outcome = match &results {
                Err(reason) => Err(self.push_failure(reason)),
                Ok(r) => match r.get(&p.refname) {
                    Some(('*', _)) => Ok(()),
                    Some((_, summary)) if self.refused(summary) => Err(PlantOutcome::Refused {
                        reason: format!(
                            "the remote refused {}: {summary}",
                            escape::bytes(p.refname.as_bytes())
                        ),
                    }),
                    Some((_, summary)) => Err(PlantOutcome::Failed {
                        reason: format!(
                            "creating {} failed: {summary}",
                            escape::bytes(p.refname.as_bytes())
                        ),
                    }),
                    None => Err(PlantOutcome::Failed {
                        reason: "the push reported nothing for this ref".into(),
                    }),
                },
            };
            // Taken back only when the remote said this ref was not made (a
            // rejection in the push's own report, or the whole push
            // refused): a push that failed otherwise (a timeout, a reset,
            // a 5xx) may have made it, and the journal keeps it for
            // cleanup's leased delete.
            let rejected = match &results {
                Ok(r) => matches!(r.get(&p.refname), Some(('!', _))),
                // Refused as a whole (401/403, a hook): nothing was made.
                Err(reason) => self.refused(reason),
            };
            if outcome.is_err() && rejected {
                created(json!({ "retract": p.refname }));
            }
            status[p.carrier] = outcome;
        }
        // The transient ref: delete it again (second push), leased on the
        // commit just pushed.
        let deleted = carriers.iter().position(|j| j.carrier == "deleted-ref");
        let mut transient_detail = String::new();
        if self.s.control {
            transient_detail = "kept visible on the control remote".into();
        } else if let (Some(d), Some(sig)) = (deleted, crate::signals::received()) {
            // Stopped: the ref stays journalled, and cleanup deletes it.
            status[d] = Err(super::interrupted(sig));
        } else if let Some(d) = deleted
            && status[d].is_ok()
            && let Some(p) = pushes.iter().find(|p| p.carrier == d)
        {
            let delete = RefUpdate {
                src: String::new(),
                dst: p.refname.clone(),
                expect: Some(p.sha.clone()),
            };
            match self.push(dir, &[delete]) {
                Ok(r) if matches!(r.get(&p.refname), Some(('-', _))) => {
                    created(json!({ "retract": p.refname }));
                    transient_detail =
                        "created, then deleted again: a visible-state check should not see it"
                            .into();
                }
                Ok(r) => {
                    transient_detail = format!(
                        "created, but deleting it failed ({}): it is still visible",
                        r.get(&p.refname)
                            .map(|x| x.1.as_str())
                            .unwrap_or("no report")
                    )
                }
                Err(e) => {
                    transient_detail =
                        format!("created, but deleting it failed ({e}): it is still visible")
                }
            }
        }
        // unreachable-object rides on the deleted branch's push.
        let unreachable = carriers
            .iter()
            .position(|j| j.carrier == "unreachable-object");
        if let (Some(u), Some(d)) = (unreachable, deleted) {
            status[u] = status[d].clone();
        } else if let Some(u) = unreachable {
            status[u] = Err(PlantOutcome::Failed {
                reason: "unreachable-object needs the deleted-ref carrier".into(),
            });
        }
        carriers
            .iter()
            .zip(status.into_iter().zip(needles))
            .enumerate()
            .map(|(i, (job, (st, needle)))| match (st, needle) {
                (Err(o), _) | (Ok(()), Err(o)) => o,
                (Ok(()), Ok(needle)) => {
                    let pushed = pushes
                        .iter()
                        .find(|p| p.carrier == i)
                        .map(|p| p.refname.as_str())
                        .unwrap_or("");
                    let detail = match job.carrier.as_str() {
                        "deleted-ref" => transient_detail.clone(),
                        "unreachable-object" => {
                            "a commit reachable only from the deleted branch".into()
                        }
                        _ => format!(
                            "pushed {} to {}",
                            escape::bytes(pushed.as_bytes()),
                            self.s.shown
                        ),
                    };
                    PlantOutcome::Planted {
                        needle,
                        persistence: None,
                        detail,
                    }
                }
            })
            .collect()
    }

    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Wanted],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        let all = |o: RecoverOutcome| wanted.iter().map(|_| o.clone()).collect::<Vec<_>>();
        let work = match self.scratch() {
            Ok(w) => w,
            Err(e) => return all(RecoverOutcome::Failed { reason: e }),
        };
        let dir = work.path();
        let text = |w: &Wanted| {
            w.needle
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let refname = |w: &Wanted| {
            w.needle
                .get("ref")
                .and_then(Value::as_str)
                .map(String::from)
        };
        let mut found: Vec<Option<String>> = wanted.iter().map(|_| None).collect();

        // 1. One ls-remote: ref names carry the name carriers; it also
        // tells which agreed refs exist. Streamed: memory holds only those.
        let names: Vec<(usize, String)> = wanted
            .iter()
            .enumerate()
            .filter(|(_, w)| {
                matches!(
                    w.carrier.as_str(),
                    "branch-name" | "tag-name" | "custom-ref" | "deleted-ref"
                )
            })
            .map(|(i, w)| (i, text(w)))
            .collect();
        let agreed: HashSet<String> = wanted.iter().filter_map(refname).collect();
        let mut present: HashSet<String> = HashSet::new();
        let mut listed: u64 = 0;
        // This probe's name markers: any other ref in that form is one no
        // plant with this key made.
        let tag = format!("runwarden-{}-", ctx.probe_id);
        let ours: HashSet<&str> = names.iter().map(|(_, t)| t.as_str()).collect();
        let ls = self.remote_stream(dir, &["ls-remote".into(), self.s.url.clone()], |line| {
            listed += 1;
            let Some(tab) = line.iter().position(|b| *b == b'\t') else {
                return;
            };
            let name = &line[tab + 1..];
            if !ours.is_empty()
                && let Some(hex) = marker_hex(name, ctx.probe_id, &tag)
                && !ours.contains(hex)
            {
                notice(Notice {
                    kind: NoticeKind::ForgedMarker,
                    entry: escape::bytes(name),
                    detail: "a ref named like a marker of this probe, with a nonce no plant with this key made: someone else writes here".into(),
                    beacon: None,
                });
            }
            for (i, t) in &names {
                if found[*i].is_none() && memchr::memmem::find(name, t.as_bytes()).is_some() {
                    found[*i] = Some(format!(
                        "run B listed ref {} whose name carries the nonce",
                        escape::bytes(name)
                    ));
                }
            }
            if let Ok(n) = std::str::from_utf8(name)
                && agreed.contains(n)
            {
                present.insert(n.to_string());
            }
        });
        if !ls.success {
            let reason = ls.reason();
            return all(if self.refused(&reason) {
                RecoverOutcome::Denied {
                    reason: format!("the remote refused run B's ls-remote: {reason}"),
                }
            } else {
                let what = if no_credential(&unquoted(&reason)) {
                    "the remote asked for credentials and runwarden had none to give"
                } else if is_refusal(&reason) {
                    "authentication failed and the only credential is a credential helper, which may work in the job but not here"
                } else {
                    "remote unreachable"
                };
                RecoverOutcome::Failed {
                    reason: format!("{what}: ls-remote {} failed: {reason}", self.s.shown),
                }
            });
        }

        // 2. One fetch of the agreed refs that exist.
        let mut local: HashMap<String, String> = HashMap::new();
        let mut fetch_error: Option<String> = None;
        if !present.is_empty() {
            let mut args: Vec<String> = vec![
                "fetch".into(),
                "--no-tags".into(),
                "-q".into(),
                self.s.url.clone(),
            ];
            for (i, r) in present.iter().enumerate() {
                let dst = format!("refs/runwarden-b/{i}");
                args.push(format!("+{r}:{dst}"));
                local.insert(r.clone(), dst);
            }
            let (out, _) = self.remote_run(dir, &args);
            if !out.success {
                fetch_error = Some(out.reason());
            }
        }

        // 3. Read each carrier's agreed object. Failures are typed where
        // they happen (a refusal is Denied, anything else Failed), never
        // re-read from their text.
        let mut failures: Vec<Option<RecoverOutcome>> = wanted.iter().map(|_| None).collect();
        for (i, w) in wanted.iter().enumerate() {
            if found[i].is_some() {
                continue;
            }
            let t = text(w);
            let got: Result<Option<String>, RecoverOutcome> = match (w.carrier.as_str(), refname(w))
            {
                ("unreachable-object", _) => self.fetch_by_id(dir, w, &t),
                // Name carriers were looked for in the listing.
                (c, None) if is_name_carrier(c) => Ok(None),
                // A content carrier without its agreed ref was never read:
                // that is no PASS.
                (c, None) => Err(RecoverOutcome::Failed {
                    reason: format!("no agreed ref to read {c} from"),
                }),
                (_, Some(r)) if !present.contains(&r) => Ok(None),
                (_, Some(_)) if fetch_error.is_some() => {
                    Err(self.failure(fetch_error.clone().unwrap_or_default()))
                }
                (c, Some(r)) => match self.read_carrier(dir, c, &local[&r]) {
                    Ok(content) => Ok(content.contains(&t).then(|| {
                        format!(
                            "run B fetched {} and read the nonce in its {c}",
                            escape::bytes(r.as_bytes())
                        )
                    })),
                    // Local plumbing in run B's own scratch repository: the
                    // remote had no say, so never a refusal.
                    Err(reason) => Err(RecoverOutcome::Failed { reason }),
                },
            };
            match got {
                Ok(hit) => found[i] = hit,
                Err(o) => failures[i] = Some(o),
            }
        }

        (0..wanted.len())
            .map(|i| {
                if let Some(d) = found[i].take() {
                    RecoverOutcome::Found { detail: d }
                } else if let Some(o) = failures[i].take() {
                    o
                } else {
                    RecoverOutcome::NotFound {
                        detail: format!(
                            "run B listed {listed} refs of {} and read what it could; no nonce",
                            self.s.shown
                        ),
                    }
                }
            })
            .collect()
    }

    /// One ls-remote; every ref a plant of `jobs` would have made that
    /// exists, leased on what it points at now. The deleted ref is included
    /// (a plant killed before deleting it leaves it behind).
    fn find_planted(&self, ctx: &RunCtx<'_>, jobs: &[PlantJob]) -> Result<Vec<Value>, String> {
        let expected: HashSet<String> = jobs
            .iter()
            .filter_map(|j| ref_for(&j.carrier, ctx.probe_id, &j.nonce.hex(), j.scope.as_ref()))
            .collect();
        let work = self.scratch()?;
        let refs = self.ls_refs(work.path(), |name| expected.contains(name))?;
        let found: Vec<Value> = refs
            .into_iter()
            .map(|(name, sha)| json!({ "ref": name, "sha": sha }))
            .collect();
        Ok(found)
    }

    fn cleanup(&self, entry: &Value) -> CleanupOutcome {
        self.cleanup_all(std::slice::from_ref(entry)).remove(0)
    }

    fn cleanup_all(&self, entries: &[Value]) -> Vec<CleanupOutcome> {
        let retracted: HashSet<&str> = entries
            .iter()
            .filter_map(|e| e.get("retract").and_then(Value::as_str))
            .collect();
        let live: Vec<(usize, String, String)> = entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| {
                let r = e.get("ref")?.as_str()?;
                let sha = e.get("sha")?.as_str()?;
                (!retracted.contains(r)).then(|| (i, r.to_string(), sha.to_string()))
            })
            .collect();
        // Retractions and the refs they took back (refused, or deleted by
        // run A itself) need nothing and count as nothing.
        let mut outcomes: Vec<CleanupOutcome> =
            entries.iter().map(|_| CleanupOutcome::Superseded).collect();
        if live.is_empty() {
            return outcomes;
        }
        let work = match self.scratch() {
            Ok(w) => w,
            Err(e) => {
                for (i, _, _) in &live {
                    outcomes[*i] = CleanupOutcome::Left { reason: e.clone() };
                }
                return outcomes;
            }
        };
        // One push deleting every live ref, each leased on the commit this
        // probe pushed: a ref someone moved since is left alone.
        let deletes: Vec<RefUpdate> = live
            .iter()
            .map(|(_, r, sha)| RefUpdate {
                src: String::new(),
                dst: r.clone(),
                expect: Some(sha.clone()),
            })
            .collect();
        let results = self.push(work.path(), &deletes);
        // A refused lease cannot tell a ref that is gone (run A died
        // before its push) from one someone moved: only then, ask the
        // remote once which of them still exist.
        let rejected = matches!(&results, Ok(res) if live.iter().any(|(_, r, _)| !matches!(res.get(r), Some(('-', _)))));
        let now: Option<HashMap<String, String>> = rejected
            .then(|| {
                let wanted: HashSet<&str> = live.iter().map(|(_, r, _)| r.as_str()).collect();
                self.ls_refs(work.path(), |name| wanted.contains(name)).ok()
            })
            .flatten();
        for (i, r, pushed) in &live {
            outcomes[*i] = match &results {
                Err(e) => CleanupOutcome::Left { reason: format!("the deleting push failed: {e}") },
                Ok(res) => match (res.get(r), &now) {
                    (Some(('-', _)), _) => CleanupOutcome::Removed,
                    (_, Some(now)) if !now.contains_key(r) => CleanupOutcome::Gone,
                    (_, Some(now)) if now.get(r) != Some(pushed) => CleanupOutcome::Left {
                        reason: "it now points at another object than runwarden pushed: someone moved it; left alone".into(),
                    },
                    (Some((_, summary)), _) => CleanupOutcome::Left { reason: format!("not deleted: {summary}") },
                    (None, _) => CleanupOutcome::Left { reason: "the push reported nothing for this ref".into() },
                },
            };
        }
        outcomes
    }

    fn describe(&self, entry: &Value) -> String {
        let r = entry
            .get("ref")
            .or_else(|| entry.get("retract"))
            .and_then(Value::as_str)
            .unwrap_or("?");
        format!(
            "{} on {}",
            escape::bytes(r.as_bytes()),
            escape::bytes(self.s.shown.as_bytes())
        )
    }
}

impl Instance {
    /// The text a content carrier lives in, from the locally fetched ref.
    fn read_carrier(&self, dir: &Path, carrier: &str, local: &str) -> Result<String, String> {
        match carrier {
            "commit-message" => self.plumb(dir, &["log", "-1", "--format=%B", local], &[], b""),
            "author-name" => self.plumb(dir, &["log", "-1", "--format=%an", local], &[], b""),
            "author-email" => self.plumb(dir, &["log", "-1", "--format=%ae", local], &[], b""),
            "annotated-tag-message" => self.plumb(dir, &["cat-file", "-p", local], &[], b""),
            "file-path" => self.plumb(dir, &["ls-tree", "-r", "--name-only", local], &[], b""),
            // Every blob of the commit's tree (notes: the notes tree).
            "file-content" | "notes" => {
                let listing = self.plumb(dir, &["ls-tree", "-r", local], &[], b"")?;
                let blobs: String = listing
                    .lines()
                    .filter_map(|l| l.split_whitespace().nth(2))
                    .map(|b| format!("{b}\n"))
                    .collect();
                self.plumb(dir, &["cat-file", "--batch"], &[], blobs.as_bytes())
            }
            other => Err(format!("no reader for carrier {other}")),
        }
    }

    /// Fetches one commit by id (not advertised by any ref) and reads it.
    /// A failure of run B's git, as the outcome it means.
    fn failure(&self, reason: String) -> RecoverOutcome {
        if self.refused(&reason) {
            RecoverOutcome::Denied {
                reason: format!("the remote refused run B: {reason}"),
            }
        } else {
            RecoverOutcome::Failed { reason }
        }
    }

    fn fetch_by_id(
        &self,
        dir: &Path,
        w: &Wanted,
        text: &str,
    ) -> Result<Option<String>, RecoverOutcome> {
        let Some(sha) = w.needle.get("sha").and_then(Value::as_str) else {
            return Err(RecoverOutcome::Failed {
                reason: "no object id to fetch".into(),
            });
        };
        let args: Vec<String> = vec![
            "fetch".into(),
            "--no-tags".into(),
            "-q".into(),
            self.s.url.clone(),
            sha.into(),
        ];
        let (out, _) = self.remote_run(dir, &args);
        if !out.success {
            let reason = out.reason();
            // The server declining to serve an unadvertised object is its
            // own policy: the channel is closed.
            if reason.contains("upload-pack: not our ref") || reason.contains("unadvertised object")
            {
                return Err(RecoverOutcome::Denied {
                    reason: format!("the remote does not serve unadvertised objects: {reason}"),
                });
            }
            return Err(self.failure(reason));
        }
        let body = self
            .plumb(dir, &["cat-file", "-p", sha], &[], b"")
            .map_err(|reason| RecoverOutcome::Failed { reason })?;
        Ok(body.contains(text).then(|| {
            format!(
                "run B fetched commit {} by id (no ref points at it) and read the nonce",
                &sha[..12.min(sha.len())]
            )
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_remotes_own_refusals_are_refusals() {
        for refusal in [
            "fatal: unable to access 'https://h/r.git/': The requested URL returned error: 403",
            "[remote rejected] (pre-receive hook declined)",
            "[remote rejected] (protected branch hook declined)",
            "remote: Permission to o/r.git denied to github-actions[bot].",
            "[remote rejected] (denied: you may not push here)",
            "remote: error: GH013: Repository rule violations found",
        ] {
            assert!(is_refusal(refusal), "{refusal}");
        }
        for other in [
            // A repository or URL whose name reads like a refusal.
            "fatal: unable to access 'https://h/org/read-only-mirror.git/': Could not resolve host: h",
            "fatal: unable to access 'https://h/access-denied.git/': Connection timed out",
            // No credential was offered at all.
            "fatal: could not read Username for 'https://h': terminal prompts disabled",
            // Server-side failures of one ref.
            "[remote rejected] (failed to update ref)",
            "[remote rejected] (unpacker error)",
            "remote: Repository is temporarily read-only for maintenance",
            "fatal: The requested URL returned error: 502",
        ] {
            assert!(!is_refusal(other), "{other}");
        }
    }
}
