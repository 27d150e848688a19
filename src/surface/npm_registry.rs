//! `type: npm-registry`: an npm registry or proxy (Verdaccio, Artifactory,
//! Nexus, GitHub Packages) that two runs can both reach.
//!
//! Run A publishes one small package per carrier over the registry API, as
//! `npm publish` does (`PUT /<name>` with the tarball as an attachment),
//! and for `dist-tag` adds a tag as `npm dist-tag add` does. Run B finds
//! the package name through `/-/v1/search` (its only route: the name is
//! the message), and reads the agreed packages' documents, dist-tags and
//! tarballs. A
//! refusal is a 401 or 403 (but a 403 that says the version exists is a
//! conflict); a search not read to its end, a document that is not the
//! package's, a 404 without the registry's JSON body or a field a carrier
//! needs missing is an error. Cleanup unpublishes each package
//! (`DELETE /<name>/-rev/<rev>`) after checking it holds exactly the
//! versions A published.
//!
//! Package names are [`super::tagged_name`]s (lowercase hex and `-`, valid
//! npm names). Tarballs are fetched only from the registry's own origin, so
//! credentials never follow a URL a hostile registry document names.

use super::{
    Carrier, CleanupOutcome, Control, HttpAuth, Notice, NoticeKind, Persistence, PlantJob,
    PlantOutcome, RecoverOutcome, RunCtx, Surface, SurfaceType, Wanted,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::http::{Failure, LazyClient, Request, check_url};
use crate::nonce::Nonce;
use crate::scan::Needles;
use ::http::Method;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha512};

pub struct NpmRegistry;

/// Search results per page (the registry API's maximum).
const PAGE: usize = 250;
/// A search that has not ended after this many pages is an error.
const MAX_PAGES: usize = 4_000;

static CARRIERS: &[Carrier] = &[
    Carrier {
        name: "package-name",
        persistence: Persistence::Durable,
        description: "the nonce in the name of a published package; run B finds it through /-/v1/search",
    },
    Carrier {
        name: "version",
        persistence: Persistence::Durable,
        description: "the nonce in the version string of a package both runs can name",
    },
    Carrier {
        name: "readme",
        persistence: Persistence::Durable,
        description: "the nonce in the readme of a package both runs can name",
    },
    Carrier {
        name: "dist-tag",
        persistence: Persistence::Durable,
        description: "the nonce in a dist-tag added to a package both runs can name",
    },
    Carrier {
        name: "tarball-content",
        persistence: Persistence::Durable,
        description: "the nonce inside the tarball of a package both runs can name",
    },
];

#[derive(Clone, Serialize, Deserialize)]
struct Settings {
    /// The registry URL, ending in `/`.
    url: String,
    auth: HttpAuth,
    control: bool,
}

/// Whether an answer's body is the registry's own: npm registries answer
/// errors, refusals included, with a JSON object (`{"error": …}`); an
/// HTML 401/403 comes from something in front of it (a proxy, an SSO
/// gate, a firewall), which says nothing of the registry's access control.
fn registrys_own(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body).is_ok_and(|v| v.is_object())
}

/// Why a 401/403 without the registry's JSON body is no refusal.
fn not_the_registrys(status: u16, what: &str) -> String {
    format!(
        "{what}: HTTP {status} without the registry's JSON body: something in front of it (a proxy, an SSO gate) answered, not the registry"
    )
}

/// (package name, version) of a carrier's plant.
fn package_for(ctx: &RunCtx<'_>, carrier: &str, nonce: &Nonce) -> (String, String) {
    let name = super::tagged_name(
        ctx,
        carrier,
        (carrier == "package-name").then_some(nonce),
        "",
    );
    let version = if carrier == "version" {
        format!("0.0.0-{}", nonce.hex())
    } else {
        "0.0.0".to_string()
    };
    (name, version)
}

/// The publish document and tarball of a carrier's plant.
fn publish_doc(
    url: &str,
    probe_id: &str,
    carrier: &str,
    name: &str,
    version: &str,
    nonce: &Nonce,
) -> Value {
    let readme = if carrier == "readme" {
        format!("runwarden plant\n\n{}\n", nonce.hex())
    } else {
        "runwarden plant\n".to_string()
    };
    let manifest = json!({ "name": name, "version": version, "description": format!("runwarden plant, probe {probe_id}") });
    let mut files: Vec<(String, Vec<u8>)> = vec![(
        "package/package.json".into(),
        manifest.to_string().into_bytes(),
    )];
    if carrier == "tarball-content" {
        files.push((
            "package/note.txt".into(),
            format!("{}\n", nonce.hex()).into_bytes(),
        ));
    }
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, d)| (p.as_str(), d.as_slice()))
        .collect();
    let tgz = crate::archive::tgz(&refs);
    let file = format!("{}-{version}.tgz", name.rsplit('/').next().unwrap_or(name));
    let integrity = format!(
        "sha512-{}",
        base64::engine::general_purpose::STANDARD.encode(Sha512::digest(&tgz))
    );
    json!({
        "_id": name,
        "name": name,
        "description": format!("runwarden plant, probe {probe_id}"),
        "dist-tags": { "latest": version },
        "readme": readme,
        "versions": { version: {
            "name": name,
            "version": version,
            "description": format!("runwarden plant, probe {probe_id}"),
            "readme": readme,
            "dist": { "tarball": format!("{url}{name}/-/{file}"), "integrity": integrity },
        }},
        "_attachments": { file: {
            "content_type": "application/octet-stream",
            "data": base64::engine::general_purpose::STANDARD.encode(&tgz),
            "length": tgz.len(),
        }},
    })
}

impl SurfaceType for NpmRegistry {
    fn name(&self) -> &'static str {
        "npm-registry"
    }

    fn description(&self) -> &'static str {
        "an npm registry or proxy at a URL (publish, search, dist-tags, tarballs; unpublish to clean up)"
    }

    fn carriers(&self) -> &'static [Carrier] {
        CARRIERS
    }

    fn keys(&self) -> &'static [&'static str] {
        &["url", "token-env", "username-env", "password-env"]
    }

    fn validate(&self, mut opts: Options<'_>) -> Result<Value, ConfigError> {
        let Some((url, pos)) = opts.string("url")? else {
            return Err(opts.error(
                opts.entry_pos(),
                "an npm-registry surface needs `url:` (the registry URL)",
            ));
        };
        check_url(&url).map_err(|m| opts.error(pos, format!("`url`: {m}")))?;
        let auth = HttpAuth::from_config(&mut opts)?;
        let url = if url.ends_with('/') {
            url
        } else {
            format!("{url}/")
        };
        Ok(serde_json::to_value(Settings {
            url,
            auth,
            control: false,
        })
        .expect("settings serialize"))
    }

    fn control(&self, _settings: &Value, _dir: &std::path::Path) -> Result<Control, String> {
        let server = crate::loopback::npm::NpmServer::start()?;
        let s = Settings {
            url: server.url(),
            auth: HttpAuth::bearer_for_control(server.token()?),
            control: true,
        };
        Ok(Control::served(s, server))
    }

    fn facts(&self, settings: &Value) -> Vec<(&'static str, String)> {
        serde_json::from_value::<Settings>(settings.clone())
            .map(|s| vec![("credentials", s.auth.describe())])
            .unwrap_or_default()
    }

    fn open(&self, settings: &Value) -> Result<Box<dyn Surface>, String> {
        let s: Settings = serde_json::from_value(settings.clone())
            .map_err(|_| "bad npm-registry settings".to_string())?;
        let client = LazyClient::new(s.auth.secrets());
        Ok(Box::new(Instance { s, client }))
    }
}

struct Instance {
    s: Settings,
    client: LazyClient,
}

/// A package name in a URL path: a scoped name's `/` is encoded, as npm
/// does.
fn path_of(name: &str) -> String {
    name.replace('/', "%2f")
}

impl Instance {
    fn client(&self) -> Result<&crate::http::Client, String> {
        self.client.get()
    }

    fn shown(&self) -> String {
        escape::bytes(self.s.url.as_bytes())
    }

    fn call(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<crate::http::Response, String> {
        let mut req = self
            .s
            .auth
            .apply(Request::new(method.clone(), url))
            .header("accept", "application/json");
        if let Some(b) = body {
            req = req.json(b);
        }
        self.client()?.send(&req).map_err(|f| match f {
            Failure::Unreachable(m) => format!("cannot reach the registry {}: {m}", self.shown()),
            Failure::Broken(m) => format!("{method} at the registry {}: {m}", self.shown()),
        })
    }

    /// The packument of `name` (its `name` that name, its `versions` an
    /// object): `Ok(None)` when the registry says there is none.
    fn packument(&self, name: &str) -> Result<Option<Value>, RecoverOutcome> {
        let url = format!("{}{}", self.s.url, path_of(name));
        let r = self
            .call(Method::GET, &url, None)
            .map_err(|reason| RecoverOutcome::Failed { reason })?;
        let shown = escape::bytes(name.as_bytes());
        let doc = r.json().ok().filter(Value::is_object);
        match r.status {
            200 => match doc {
                Some(d) if d["name"] == name && d["versions"].is_object() => Ok(Some(d)),
                _ => Err(RecoverOutcome::Failed {
                    reason: format!(
                        "the registry answered 200 for {shown} with something that is not its \
                         document (no such `name`, or no `versions`)"
                    ),
                }),
            },
            // Registries answer a missing package with a JSON error; a
            // 404 page without one is a wrong URL or a proxy's.
            404 if doc.is_some() => Ok(None),
            404 => Err(RecoverOutcome::Failed {
                reason: format!(
                    "reading {shown}: HTTP 404 without the registry's JSON error body \
                     (is `url` the registry?)"
                ),
            }),
            401 | 403 if doc.is_some() => Err(RecoverOutcome::Denied {
                reason: format!(
                    "the registry refused to show {} (HTTP {})",
                    escape::bytes(name.as_bytes()),
                    r.status
                ),
            }),
            401 | 403 => Err(RecoverOutcome::Failed {
                reason: not_the_registrys(r.status, &format!("reading {shown}")),
            }),
            s => Err(RecoverOutcome::Failed {
                reason: format!("reading {}: HTTP {s}", escape::bytes(name.as_bytes())),
            }),
        }
    }

    /// Whether a tarball holds `needle`, searched as it arrives. Only from
    /// the registry's own origin: a document may name any URL.
    fn tarball_holds(&self, url: &str, needle: &str) -> Result<bool, String> {
        use crate::http::origin;
        if origin(url).is_none() || origin(url) != origin(&self.s.url) {
            return Err(format!(
                "the tarball is on another origin ({}); it is not fetched with the registry's credentials",
                escape::bytes(url.as_bytes())
            ));
        }
        let mut needles = Needles::new(vec![needle.to_string()]);
        let req = self.s.auth.apply(Request::new(Method::GET, url));
        let status = self
            .client()?
            .search(&req, &mut needles)
            .map_err(|f| format!("downloading the tarball: {f}"))?;
        if status != 200 {
            return Err(format!("downloading the tarball: HTTP {status}"));
        }
        Ok(needles.found(0))
    }

    /// Every package name `/-/v1/search` lists for `text`, each handed to
    /// `each` once; how many. Pages until an empty page, `from` moving by
    /// what each page held: registries cap `size` differently, and
    /// Verdaccio's `total` counts one page only. A page of names all seen
    /// (a registry ignoring `from`), an answer without `objects` or a name,
    /// or fewer names than a `total` claimed is no full look.
    fn search_names(
        &self,
        text: &str,
        each: &mut dyn FnMut(&str),
    ) -> Result<usize, RecoverOutcome> {
        let failed = |why: String| RecoverOutcome::Failed {
            reason: format!("searching the registry for {text}: {why}"),
        };
        let mut names = std::collections::HashSet::new();
        let mut claimed = 0u64;
        let mut from = 0usize;
        for _ in 0..MAX_PAGES {
            let url = format!(
                "{}-/v1/search?text={}&size={PAGE}&from={from}",
                self.s.url,
                crate::http::percent_encode(text)
            );
            let r = self
                .call(Method::GET, &url, None)
                .map_err(|reason| RecoverOutcome::Failed { reason })?;
            if (r.status == 401 || r.status == 403) && registrys_own(&r.body) {
                return Err(RecoverOutcome::Denied {
                    reason: format!("the registry refused the search (HTTP {})", r.status),
                });
            }
            if r.status != 200 {
                return Err(failed(format!("HTTP {}", r.status)));
            }
            let v = r.json().map_err(failed)?;
            let Some(objects) = v["objects"].as_array() else {
                return Err(failed("the answer has no `objects`".into()));
            };
            if objects.is_empty() {
                let n = names.len();
                if (n as u64) < claimed {
                    return Err(failed(format!(
                        "it claimed {claimed} packages but listed {n}"
                    )));
                }
                return Ok(n);
            }
            let mut new = 0;
            for o in objects {
                let Some(name) = o["package"]["name"].as_str() else {
                    return Err(failed("a result without `package.name`".into()));
                };
                if names.insert(name.to_string()) {
                    new += 1;
                    each(name);
                }
            }
            if new == 0 {
                return Err(failed(format!(
                    "the page from {from} lists only packages already listed: it does not page"
                )));
            }
            from += objects.len();
            claimed = claimed.max(v["total"].as_u64().unwrap_or(0));
        }
        Err(failed(format!("it did not end after {MAX_PAGES} pages")))
    }

    /// package-name by search: one outcome per wanted carrier, in order,
    /// and the names in this probe's form the search listed.
    fn search(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[&Wanted],
        notice: &mut dyn FnMut(Notice),
    ) -> (Vec<RecoverOutcome>, std::collections::HashSet<String>) {
        let text = format!("runwarden-{}", ctx.probe_id);
        let mut hits: Vec<Option<String>> = vec![None; wanted.len()];
        let mut ours = std::collections::HashSet::new();
        let result = self.search_names(&text, &mut |name| {
            if name.starts_with(&format!("{text}-")) {
                ours.insert(name.to_string());
            }
            for (j, w) in wanted.iter().enumerate() {
                if hits[j].is_none() && w.needle.as_str().is_some_and(|n| name.contains(n)) {
                    hits[j] = Some(format!(
                        "the search for {text} lists {}",
                        escape::bytes(name.as_bytes())
                    ));
                }
            }
            if name.starts_with(&format!("{text}-"))
                && super::tagged_carrier(ctx, CARRIERS, name, "").is_none()
            {
                notice(Notice {
                    kind: NoticeKind::ForgedMarker,
                    entry: escape::bytes(name.as_bytes()),
                    detail: "a package name in this probe's form that no plant with this key made"
                        .into(),
                    beacon: None,
                });
            }
        });
        let outcomes = hits
            .into_iter()
            .map(|hit| match (&result, hit) {
                (_, Some(detail)) => RecoverOutcome::Found { detail },
                (Ok(n), None) => RecoverOutcome::NotFound {
                    detail: format!("the search for {text} lists {n} packages; none carries it"),
                },
                (Err(e), None) => e.clone(),
            })
            .collect();
        (outcomes, ours)
    }

    /// What one agreed package's document says of one carrier.
    fn read_carrier(
        &self,
        carrier: &str,
        doc: &Value,
        shown: &str,
        version: &str,
        needle: &str,
    ) -> RecoverOutcome {
        let has = |v: &Value| v.as_str().is_some_and(|s| s.contains(needle));
        let missing = |what: &str| RecoverOutcome::Failed {
            reason: format!(
                "the document of {shown} has no {what}, which this carrier is read from"
            ),
        };
        let versions = doc["versions"].as_object();
        match carrier {
            "version" => match versions.and_then(|m| m.keys().find(|k| k.contains(needle))) {
                Some(v) => RecoverOutcome::Found {
                    detail: format!("{shown} has version {}", escape::bytes(v.as_bytes())),
                },
                None => RecoverOutcome::NotFound {
                    detail: format!("no version of {shown} carries it"),
                },
            },
            "readme" => {
                let readmes: Vec<&Value> = std::iter::once(&doc["readme"])
                    .chain(
                        versions
                            .into_iter()
                            .flat_map(|m| m.values().map(|v| &v["readme"])),
                    )
                    .filter(|r| r.is_string())
                    .collect();
                if readmes.iter().any(|r| has(r)) {
                    RecoverOutcome::Found {
                        detail: format!("the readme of {shown} holds it"),
                    }
                } else if readmes.is_empty() {
                    missing("readme")
                } else {
                    RecoverOutcome::NotFound {
                        detail: format!("the readme of {shown} does not hold it"),
                    }
                }
            }
            "dist-tag" => match doc["dist-tags"].as_object() {
                None => missing("`dist-tags`"),
                Some(m) => match m.keys().find(|k| k.contains(needle)) {
                    Some(t) => RecoverOutcome::Found {
                        detail: format!("{shown} has the dist-tag {}", escape::bytes(t.as_bytes())),
                    },
                    None => RecoverOutcome::NotFound {
                        detail: format!("no dist-tag of {shown} carries it"),
                    },
                },
            },
            // The plant's own version without a tarball: not the plant.
            _ => match doc["versions"][version]["dist"]["tarball"].as_str() {
                None => missing(&format!("tarball for {version}")),
                Some(t) => match self.tarball_holds(t, needle) {
                    Err(reason) => RecoverOutcome::Failed { reason },
                    Ok(true) => RecoverOutcome::Found {
                        detail: format!("the tarball of {shown}@{version} holds it"),
                    },
                    Ok(false) => RecoverOutcome::NotFound {
                        detail: format!("the tarball of {shown}@{version} does not hold it"),
                    },
                },
            },
        }
    }
}

impl Surface for Instance {
    fn unavailable(&self, _carrier: &str) -> Option<String> {
        self.s.auth.missing.clone()
    }

    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        job: &PlantJob,
        created: &mut dyn FnMut(Value),
    ) -> PlantOutcome {
        let (name, version) = package_for(ctx, &job.carrier, &job.nonce);
        let shown = escape::bytes(name.as_bytes());
        let doc = publish_doc(
            &self.s.url,
            ctx.probe_id,
            &job.carrier,
            &name,
            &version,
            &job.nonce,
        );
        let entry = json!({ "name": name, "versions": [version] });
        created(entry.clone());
        let url = format!("{}{}", self.s.url, path_of(&name));
        let refused = |status: u16, what: &str| PlantOutcome::Refused {
            reason: format!("the registry refused the {what} (HTTP {status})"),
        };
        let publish = self.call(Method::PUT, &url, Some(&doc));
        // A 4xx says nothing was published; a 5xx may come after it was
        // (a gateway's), so the entry stays journalled.
        if publish
            .as_ref()
            .is_ok_and(|r| (400..500).contains(&r.status))
        {
            created(super::retraction(&entry));
        }
        match publish {
            Err(reason) => return PlantOutcome::Failed { reason },
            // npm's registry answers a version that exists with 403: a
            // conflict, not the registry's access control.
            Ok(r)
                if (r.status == 401 || r.status == 403)
                    && registrys_own(&r.body)
                    && !super::says_exists(&r.body) =>
            {
                return refused(r.status, "publish");
            }
            Ok(r) if !(200..300).contains(&r.status) => {
                return PlantOutcome::Failed {
                    reason: format!(
                        "publishing {shown}: HTTP {} {}",
                        r.status,
                        escape::bytes(&r.body[..r.body.len().min(200)])
                    ),
                };
            }
            Ok(_) => {}
        }
        if job.carrier == "dist-tag" {
            let tag = format!("n{}", job.nonce.hex());
            let url = format!("{}-/package/{}/dist-tags/{tag}", self.s.url, path_of(&name));
            match self.call(Method::PUT, &url, Some(&json!(version))) {
                Err(reason) => return PlantOutcome::Failed { reason },
                Ok(r) if (r.status == 401 || r.status == 403) && registrys_own(&r.body) => {
                    return refused(r.status, "dist-tag");
                }
                Ok(r) if !(200..300).contains(&r.status) => {
                    return PlantOutcome::Failed {
                        reason: format!("adding the dist-tag: HTTP {}", r.status),
                    };
                }
                Ok(_) => {}
            }
        }
        PlantOutcome::Planted {
            needle: Value::String(job.nonce.hex()),
            persistence: None,
            detail: format!(
                "published {shown}@{} to {}",
                escape::bytes(version.as_bytes()),
                self.shown()
            ),
        }
    }

    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Wanted],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        let searched: Vec<&Wanted> = wanted
            .iter()
            .filter(|w| w.carrier == "package-name")
            .collect();
        let (by_search, listed) = if searched.is_empty() {
            (vec![], Default::default())
        } else {
            self.search(ctx, &searched, notice)
        };
        let mut by_search = by_search.into_iter();
        // The agreed packages B could read by name: the search must list
        // them too, or its silence on package-name proves nothing.
        let mut readable: Vec<String> = vec![];
        let mut out: Vec<Option<RecoverOutcome>> = vec![None; wanted.len()];
        for (i, w) in wanted.iter().enumerate() {
            let nonce = match super::wanted_nonce(w) {
                Ok(n) => n,
                Err(o) => {
                    out[i] = Some(o);
                    continue;
                }
            };
            if w.carrier == "package-name" {
                // Its only route: the search (the package's name is the
                // message, so B cannot ask for its document).
                out[i] = by_search.next();
                continue;
            }
            let (name, version) = package_for(ctx, &w.carrier, &nonce);
            let shown = escape::bytes(name.as_bytes());
            out[i] = Some(match self.packument(&name) {
                Err(o) => o,
                Ok(None) => RecoverOutcome::NotFound {
                    detail: format!("no package {shown}"),
                },
                Ok(Some(doc)) => {
                    readable.push(name.clone());
                    self.read_carrier(&w.carrier, &doc, &shown, &version, &nonce.hex())
                }
            });
        }
        // A search that lags (or filters) does not list what exists: when
        // it lists none of the packages B reads by name, a miss there is
        // no look at all.
        if !readable.is_empty() && !readable.iter().any(|n| listed.contains(n)) {
            for (o, w) in out.iter_mut().zip(wanted) {
                if w.carrier == "package-name" && matches!(o, Some(RecoverOutcome::NotFound { .. }))
                {
                    *o = Some(RecoverOutcome::Failed {
                        reason: format!(
                            "the search lists none of the {} packages of this probe that run B reads by name: it lags or is incomplete, so it not listing the package-name plant proves nothing",
                            readable.len()
                        ),
                    });
                }
            }
        }
        super::all_outcomes(out)
    }

    fn find_planted(&self, ctx: &RunCtx<'_>, jobs: &[PlantJob]) -> Result<Vec<Value>, String> {
        // Every name but package-name's is derived without the nonce being
        // random; package-name's is found by search.
        let mut found = vec![];
        for j in jobs {
            let (name, version) = package_for(ctx, &j.carrier, &j.nonce);
            match self.packument(&name) {
                // The name's tag proves it is this probe's; a version of
                // another form (someone published to it) makes cleanup
                // leave it.
                Ok(Some(doc)) => {
                    let versions: Vec<&String> = doc["versions"]
                        .as_object()
                        .map(|m| m.keys().collect())
                        .unwrap_or_default();
                    let ours = |v: &str| {
                        v == "0.0.0"
                            || v.strip_prefix("0.0.0-").is_some_and(|h| {
                                h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit())
                            })
                    };
                    match versions.as_slice() {
                        [v] if ours(v) => found.push(json!({ "name": name, "versions": [v] })),
                        _ => found.push(json!({ "name": name, "versions": [version] })),
                    }
                }
                Ok(None) => {}
                Err(RecoverOutcome::Failed { reason } | RecoverOutcome::Denied { reason }) => {
                    return Err(reason);
                }
                Err(_) => {}
            }
        }
        if jobs.iter().any(|j| j.carrier == "package-name") {
            let text = format!("runwarden-{}", ctx.probe_id);
            let mut names = vec![];
            self.search_names(&text, &mut |name| {
                if super::tagged_carrier(ctx, CARRIERS, name, "") == Some("package-name") {
                    names.push(name.to_string());
                }
            })
            .map_err(|o| match o {
                RecoverOutcome::Failed { reason } | RecoverOutcome::Denied { reason } => reason,
                _ => "the search could not be read".into(),
            })?;
            for name in names {
                if !found.iter().any(|f| f["name"] == name.as_str()) {
                    found.push(json!({ "name": name, "versions": ["0.0.0"] }));
                }
            }
        }
        Ok(found)
    }

    fn cleanup(&self, entry: &Value) -> CleanupOutcome {
        let name = entry["name"].as_str().unwrap_or("");
        if !name.starts_with("runwarden-") {
            return CleanupOutcome::Left {
                reason: "not a runwarden package; nothing is unpublished".into(),
            };
        }
        let left = |reason: String| CleanupOutcome::Left { reason };
        let url = format!("{}{}?write=true", self.s.url, path_of(name));
        let doc = match self.call(Method::GET, &url, None) {
            Err(m) => return left(m),
            Ok(r) if r.status == 404 => return CleanupOutcome::Gone,
            Ok(r) if r.status != 200 => {
                return left(format!("reading it before unpublishing: HTTP {}", r.status));
            }
            Ok(r) => match r.json() {
                Ok(v) => v,
                Err(m) => return left(m),
            },
        };
        // Checked before removal: exactly the versions A published.
        let mut have: Vec<String> = doc["versions"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        let mut want = super::string_array(&entry["versions"]);
        have.sort();
        want.sort();
        if have != want {
            return left(
                "its versions changed since it was published: someone else published to it".into(),
            );
        }
        let Some(rev) = doc["_rev"].as_str() else {
            return left("the registry gave no revision to unpublish".into());
        };
        let url = format!("{}{}/-rev/{rev}", self.s.url, path_of(name));
        match self.call(Method::DELETE, &url, None) {
            Ok(r) if (200..300).contains(&r.status) => CleanupOutcome::Removed,
            Ok(r) if r.status == 404 => CleanupOutcome::Gone,
            Ok(r) if r.status == 401 || r.status == 403 => left(format!(
                "the registry refused to unpublish it (HTTP {}); it stays until someone with unpublish rights removes it",
                r.status
            )),
            Ok(r) => left(format!("unpublishing: HTTP {}", r.status)),
            Err(m) => left(m),
        }
    }

    fn describe(&self, entry: &Value) -> String {
        format!(
            "package {} on {}",
            escape::bytes(entry["name"].as_str().unwrap_or("?").as_bytes()),
            if self.s.control {
                "the control".to_string()
            } else {
                self.shown()
            }
        )
    }
}
