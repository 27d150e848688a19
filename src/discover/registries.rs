//! The registries this machine is configured for, as discovery proposes
//! them (commented out: a probe publishes to them): npm's (`.npmrc`,
//! `NPM_CONFIG_REGISTRY`), pip's (`pip.conf`, `PIP_INDEX_URL`) and the
//! container registries `docker login` stored credentials for, and
//! sccache's WebDAV cache (`SCCACHE_WEBDAV_ENDPOINT`). Only origins are
//! read; credentials beside them never are.

use super::{Candidate, Var};
use std::path::{Path, PathBuf};

/// Every distinct URL of `urls`, in order, that is not on the public host
/// `public` (userinfo removed).
fn private_urls(urls: Vec<String>, public: &str) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for u in urls.iter().filter_map(|u| private_url(u, public)) {
        if !out.contains(&u) {
            out.push(u);
        }
    }
    out
}

/// `base` for the first, `base-2`, `base-3`, … for the rest.
fn nth_name(base: &str, i: usize) -> String {
    if i == 0 {
        base.to_string()
    } else {
        format!("{base}-{}", i + 1)
    }
}

/// The npm registries this machine is configured for, but the public one
/// (commented out): `NPM_CONFIG_REGISTRY` and every `registry=` and
/// scoped `@scope:registry=` line of the workspace's and `$HOME`'s
/// `.npmrc`, all of them (an earlier step can set the variable, or write
/// the workspace's file, to hide the one in `$HOME`).
pub(super) fn npm_registry(
    var: Var<'_>,
    workspace: Option<&Path>,
    home: Option<&Path>,
) -> Vec<Candidate> {
    let mut urls: Vec<String> = ["NPM_CONFIG_REGISTRY", "npm_config_registry"]
        .iter()
        .filter_map(|k| var(k))
        .collect();
    let files: Vec<PathBuf> = workspace
        .iter()
        .map(|w| w.join(".npmrc"))
        .chain(home.iter().map(|h| h.join(".npmrc")))
        .collect();
    for f in &files {
        urls.extend(ini_values(f, &|k| {
            k == "registry" || k.starts_with('@') && k.ends_with(":registry")
        }));
    }
    private_urls(urls, "registry.npmjs.org")
        .into_iter()
        .enumerate()
        .map(|(i, url)| Candidate {
            why: format!("the npm registry this machine is configured for ({url}): package names, versions, readmes, dist-tags and tarballs carry messages"),
            entry: format!(
                "  - name: {}\n    type: npm-registry\n    url: {}\n    token-env: NPM_TOKEN\n",
                nth_name("npm-registry", i),
                serde_json::to_string(&url).expect("string serializes")
            ),
            skipped: Some("probing publishes packages: name it in a config (uncomment this entry in `runwarden discover`'s output) and give the job's registry token as NPM_TOKEN".into()),
            exposure: crate::http::origin(&url).map(|o| format!("registry:{o}")),
        })
        .collect()
}

/// The Python package indexes this machine is configured for, but the
/// public one (commented out): `PIP_INDEX_URL`, `PIP_EXTRA_INDEX_URL` and
/// the `index-url` and `extra-index-url` of every pip.conf, all of them.
pub(super) fn pypi_index(var: Var<'_>, home: Option<&Path>) -> Vec<Candidate> {
    let mut urls: Vec<String> = vec![];
    for k in ["PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"] {
        urls.extend(
            var(k)
                .iter()
                .flat_map(|v| v.split_whitespace().map(String::from)),
        );
    }
    let mut files: Vec<PathBuf> = home
        .iter()
        .flat_map(|h| [h.join(".config/pip/pip.conf"), h.join(".pip/pip.conf")])
        .collect();
    files.push(PathBuf::from("/etc/pip.conf"));
    for f in &files {
        urls.extend(ini_values(f, &|k| {
            k == "index-url" || k == "extra-index-url"
        }));
    }
    private_urls(urls, "pypi.org")
        .into_iter()
        .enumerate()
        .map(|(i, url)| pypi_candidate(&url, i))
        .collect()
}

fn pypi_candidate(url: &str, i: usize) -> Candidate {
    let simple = if url.ends_with('/') {
        url.to_string()
    } else {
        format!("{url}/")
    };
    // devpi serves the simple index under `+simple/` of the index it
    // uploads to; other servers name their upload URL themselves.
    let upload = simple
        .strip_suffix("+simple/")
        .map(String::from)
        .unwrap_or_else(|| "https://<the index's upload URL>/".into());
    Candidate {
        why: format!("the Python package index this machine is configured for ({url}): project names, versions, descriptions and file names carry messages"),
        entry: format!(
            "  - name: {}\n    type: pypi-index\n    upload-url: {}\n    simple-url: {}\n    username-env: PYPI_USER\n    password-env: PYPI_PASSWORD\n",
            nth_name("pypi-index", i),
            serde_json::to_string(&upload).expect("string serializes"),
            serde_json::to_string(&simple).expect("string serializes")
        ),
        skipped: Some("probing uploads projects: name it in a config (uncomment this entry in `runwarden discover`'s output), check upload-url, and give the job's index credentials as PYPI_USER and PYPI_PASSWORD".into()),
        exposure: crate::http::origin(&simple).map(|o| format!("registry:{o}")),
    }
}

/// The container registries `docker login` stored credentials for
/// (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`): one
/// commented `oci-registry` entry for each key of `auths`. Only the keys
/// are read, reduced to an origin (no userinfo, no path); the credentials
/// beside them are never copied.
pub(super) fn oci_registries(var: Var<'_>, home: Option<&Path>) -> Vec<Candidate> {
    // Both files when DOCKER_CONFIG names another directory: an earlier
    // step can set it to hide the logins in `$HOME`.
    let mut files: Vec<PathBuf> = var("DOCKER_CONFIG")
        .map(|d| PathBuf::from(d).join("config.json"))
        .into_iter()
        .collect();
    files.extend(home.map(|h| h.join(".docker/config.json")));
    let docs: Vec<serde_json::Value> = files
        .iter()
        // A config.json is small (a huge one is not docker's); a regular
        // file only: a FIFO there would block discovery.
        .filter_map(|f| crate::sys::read_regular(f, 1 << 20).ok())
        .filter_map(|b| serde_json::from_slice(&b).ok())
        .collect();
    let mut origins: Vec<String> = vec![];
    let keys = docs
        .iter()
        .flat_map(|d| d["auths"].as_object().into_iter().flat_map(|m| m.keys()));
    for key in keys {
        let url = if key.contains("://") {
            key.clone()
        } else {
            format!("https://{key}")
        };
        let Some(o) = crate::http::origin(&url) else {
            continue;
        };
        // Docker Hub's login key names its old index; its registry API
        // is registry-1.docker.io.
        let o = match o.as_str() {
            "https://index.docker.io" | "https://docker.io" => {
                "https://registry-1.docker.io".into()
            }
            _ => o,
        };
        if crate::http::check_url(&o).is_ok() && !origins.contains(&o) {
            origins.push(o);
        }
    }
    origins
        .into_iter()
        .enumerate()
        .map(|(i, o)| Candidate {
            why: format!("a container registry `docker login` stored credentials for ({o}): repository names, tags, manifest annotations and layer blobs carry messages"),
            entry: format!(
                "  - name: {}\n    type: oci-registry\n    registry: {}\n    repository: ci/runwarden\n    token-env: REGISTRY_TOKEN\n",
                if i == 0 { "oci-registry".to_string() } else { format!("oci-registry-{}", i + 1) },
                serde_json::to_string(&o).expect("string serializes")
            ),
            skipped: Some("probing pushes manifests: name it in a config (uncomment this entry in `runwarden discover`'s output), set `repository` to a namespace the job may push to, `username` if the registry wants one, and give the job's registry password or token as REGISTRY_TOKEN".into()),
            exposure: Some(format!("registry:{o}")),
        })
        .collect()
}

/// sccache's WebDAV cache (`SCCACHE_WEBDAV_ENDPOINT`, under
/// `SCCACHE_WEBDAV_KEY_PREFIX`): every build's compiler outputs, read by
/// every later build (commented out: a probe writes into it).
pub(super) fn sccache(var: Var<'_>) -> Option<Candidate> {
    let endpoint = var("SCCACHE_WEBDAV_ENDPOINT")?;
    let url = private_url(&endpoint, "")?;
    let origin = crate::http::origin(&url)?;
    let prefix = var("SCCACHE_WEBDAV_KEY_PREFIX").unwrap_or_default();
    let base = format!(
        "{}/{}/",
        url.trim_end_matches('/'),
        prefix.trim_matches('/')
    )
    .replace("//", "/")
    .replacen(":/", "://", 1);
    let credentials = if var("SCCACHE_WEBDAV_TOKEN").is_some() {
        "    token-env: SCCACHE_WEBDAV_TOKEN\n"
    } else if var("SCCACHE_WEBDAV_USERNAME").is_some() {
        "    username-env: SCCACHE_WEBDAV_USERNAME\n    password-env: SCCACHE_WEBDAV_PASSWORD\n"
    } else {
        ""
    };
    Some(Candidate {
        why: format!("sccache's WebDAV cache ({origin}): every build writes compiler outputs under names it picks, and every later build reads them (a WebDAV store with a listing is an http-cache; a cache read only by computed keys, Bazel's or Gradle's, is a build-cache)"),
        entry: format!(
            "  - name: sccache\n    type: http-cache\n    url: {}\n{credentials}",
            serde_json::to_string(&base).expect("string serializes")
        ),
        skipped: Some("probing writes into the cache: name it in a config (uncomment this entry in `runwarden discover`'s output)".into()),
        exposure: Some(format!("cache:{origin}")),
    })
}

/// The values of the keys `wanted` takes in an npmrc or pip.conf style
/// file (`key = value` or `key=value`), in order.
fn ini_values(file: &Path, wanted: &dyn Fn(&str) -> bool) -> Vec<String> {
    // A regular file, read up to 1 MiB: the workspace's `.npmrc` is the
    // job's to make (a FIFO would block discovery).
    let Ok(text) = crate::sys::read_regular(file, 1 << 20) else {
        return vec![];
    };
    String::from_utf8_lossy(&text)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('=')?;
            wanted(k.trim()).then(|| v.trim().to_string())
        })
        .collect()
}

/// `url` without userinfo (credentials are never copied into a config),
/// unless it is on the public host `public`.
pub(super) fn private_url(url: &str, public: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let rest = match rest[..authority_end].rfind('@') {
        Some(i) => &rest[i + 1..],
        None => rest,
    };
    let host = rest.split(['/', ':']).next().unwrap_or("");
    (!host.is_empty() && host != public && !host.ends_with(&format!(".{public}")))
        .then(|| format!("{scheme}://{rest}"))
}
