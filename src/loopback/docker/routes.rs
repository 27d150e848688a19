//! The control daemon's routes: each answers as Docker Engine 20.10 does
//! for the requests the surface makes (checked against a real `dockerd`
//! by the surface's tests), under any version prefix from
//! [`super::MIN_API_VERSION`] to [`super::API_VERSION`].

use super::containers::{container_route, container_summary, create_container};
use super::{Daemon, Image, Network, Volume, id};
use crate::loopback::Reply;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Mutex;

pub(super) fn handle(mut req: tiny_http::Request, state: &Mutex<Daemon>, _port: u16) {
    let method = req.method().as_str().to_ascii_uppercase();
    let url = req.url().to_string();
    let body = if matches!(method.as_str(), "POST" | "PUT") {
        crate::loopback::body(&mut req)
    } else {
        vec![]
    };
    let (path, query) = url.split_once('?').unwrap_or((url.as_str(), ""));
    let path = crate::wire::percent_decode(path);
    let query = pairs(query);
    let reply = route(
        &mut crate::loopback::lock(state),
        &method,
        &path,
        &query,
        &body,
    );
    reply.send(req);
}

/// Query pairs, decoded, repeats kept (`changes` repeats).
fn pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| {
            (
                k.to_string(),
                crate::wire::percent_decode(&v.replace('+', "%20")),
            )
        })
        .collect()
}

pub(super) fn get<'a>(q: &'a [(String, String)], k: &str) -> Option<&'a str> {
    q.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str())
}

pub(super) fn message(status: u16, m: impl Into<String>) -> Reply {
    Reply::json(status, json!({ "message": m.into() }))
}

/// The path without its version prefix, or the refusal of that version.
fn unversioned(path: &str) -> Result<&str, Reply> {
    let Some(rest) = path.strip_prefix("/v") else {
        return Ok(path);
    };
    let Some((v, tail)) = rest.split_once('/') else {
        return Ok(path);
    };
    let Some(v) = v
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
    else {
        return Ok(path);
    };
    let (max, min) = (super::API_VERSION, super::MIN_API_VERSION);
    if v > max {
        return Err(message(
            400,
            format!(
                "client version {}.{} is too new. Maximum supported API version is {}.{}",
                v.0, v.1, max.0, max.1
            ),
        ));
    }
    if v < min {
        return Err(message(
            400,
            format!(
                "client version {}.{} is too old. Minimum supported API version is {}.{}, please upgrade your client to a newer version",
                v.0, v.1, min.0, min.1
            ),
        ));
    }
    Ok(&path[path.len() - tail.len() - 1..])
}

fn route(d: &mut Daemon, method: &str, path: &str, q: &[(String, String)], body: &[u8]) -> Reply {
    let path = match unversioned(path) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let v = format!("{}.{}", super::API_VERSION.0, super::API_VERSION.1);
    match (method, path) {
        ("GET" | "HEAD", "/_ping") => Reply::new(
            200,
            b"OK".to_vec(),
            &[
                ("Api-Version", &v),
                ("Content-Type", "text/plain; charset=utf-8"),
            ],
        ),
        ("GET", "/version") => Reply::json(
            200,
            json!({
                "Version": "runwarden-control",
                "ApiVersion": v,
                "MinAPIVersion": format!("{}.{}", super::MIN_API_VERSION.0, super::MIN_API_VERSION.1),
                "Os": "linux",
            }),
        ),
        ("POST", "/images/create") => import(d, q),
        ("GET", "/images/json") => list(d, |d| {
            d.images
                .iter()
                .filter(|i| d.listed(i.seq))
                .map(image_summary)
                .collect()
        }),
        ("GET", "/volumes") => {
            let vols: Vec<Value> = d
                .volumes
                .iter()
                .filter(|v| d.listed(v.seq))
                .map(volume_doc)
                .collect();
            Reply::json(200, json!({ "Volumes": vols, "Warnings": null }))
        }
        ("POST", "/volumes/create") => create_volume(d, body),
        ("GET", "/containers/json") => list(d, |d| {
            d.containers
                .iter()
                .filter(|c| d.listed(c.seq))
                .map(container_summary)
                .collect()
        }),
        ("POST", "/containers/create") => create_container(d, q, body),
        ("GET", "/networks") => list(d, |d| {
            d.networks
                .iter()
                .filter(|n| d.listed(n.seq))
                .map(network_doc)
                .collect()
        }),
        ("POST", "/networks/create") => create_network(d, body),
        ("GET", "/system/df") => Reply::json(
            200,
            json!({
                "LayersSize": 0,
                "Images": d.images.iter().filter(|i| d.listed(i.seq)).map(image_summary).collect::<Vec<_>>(),
                "Containers": d.containers.iter().filter(|c| d.listed(c.seq)).map(container_summary).collect::<Vec<_>>(),
                "Volumes": d.volumes.iter().filter(|v| d.listed(v.seq)).map(volume_doc).collect::<Vec<_>>(),
                "BuildCache": [],
            }),
        ),
        // The history, then the end (dockerd goes on streaming new events:
        // a reader stops at what it waits for either way).
        ("GET", "/events") => {
            let mut out = Vec::new();
            for (seq, e) in &d.events {
                if d.listed(*seq) {
                    out.extend_from_slice(e.to_string().as_bytes());
                    out.push(b'\n');
                }
            }
            Reply::new(200, out, &[("Content-Type", "application/json")])
        }
        _ => object(d, method, path, q, body),
    }
}

fn list(d: &Daemon, f: impl Fn(&Daemon) -> Vec<Value>) -> Reply {
    Reply::json(200, Value::Array(f(d)))
}

/// Routes on one named object.
fn object(d: &mut Daemon, method: &str, path: &str, q: &[(String, String)], body: &[u8]) -> Reply {
    if let Some(rest) = path.strip_prefix("/images/") {
        return image_route(d, method, rest, q);
    }
    if let Some(name) = path.strip_prefix("/volumes/") {
        let Some(at) = d.volumes.iter().position(|v| v.name == name) else {
            return message(404, format!("get {name}: no such volume"));
        };
        return match method {
            "GET" => Reply::json(200, volume_doc(&d.volumes[at])),
            "DELETE"
                if d.containers
                    .iter()
                    .any(|c| c.mounts.iter().any(|(v, _)| v == name)) =>
            {
                message(409, format!("remove {name}: volume is in use"))
            }
            "DELETE" => {
                let v = d.volumes.remove(at);
                d.event("volume", "destroy", &v.name, json!({ "driver": "local" }));
                Reply::empty(204)
            }
            _ => message(405, "method not allowed"),
        };
    }
    if let Some(rest) = path.strip_prefix("/containers/") {
        return container_route(d, method, rest, q, body);
    }
    if let Some(name) = path.strip_prefix("/networks/") {
        let Some(at) = d
            .networks
            .iter()
            .position(|n| n.name == name || n.id == name)
        else {
            return message(404, format!("network {name} not found"));
        };
        return match method {
            "GET" => Reply::json(200, network_doc(&d.networks[at])),
            "DELETE" => {
                let n = d.networks.remove(at);
                d.event(
                    "network",
                    "destroy",
                    &n.id,
                    json!({ "name": n.name, "type": "bridge" }),
                );
                Reply::empty(204)
            }
            _ => message(405, "method not allowed"),
        };
    }
    message(404, "page not found")
}

/// `repo` as `repo:latest` when it names no tag.
fn reference(r: &str) -> String {
    let last = r.rsplit('/').next().unwrap_or(r);
    if last.contains(':') {
        r.to_string()
    } else {
        format!("{r}:latest")
    }
}

pub(super) fn find_image(d: &Daemon, r: &str) -> Option<usize> {
    let full = reference(r);
    d.images.iter().position(|i| {
        i.tags.contains(&full) || i.id == r || i.id.strip_prefix("sha256:") == Some(r)
    })
}

/// Labels from an import's `changes` (`LABEL k=v`); other changes (`CMD`)
/// are taken and not kept.
fn import(d: &mut Daemon, q: &[(String, String)]) -> Reply {
    if get(q, "fromSrc") != Some("-") {
        return message(
            500,
            "the control imports only from the request body (fromSrc=-): nothing can be pulled",
        );
    }
    let (Some(repo), tag) = (get(q, "repo"), get(q, "tag").unwrap_or("latest")) else {
        return message(400, "the control imports only into a named repository");
    };
    if repo.is_empty() || repo.bytes().any(|b| b.is_ascii_uppercase()) || tag.len() > 128 {
        return message(500, "invalid reference format");
    }
    let mut labels = BTreeMap::new();
    for (_, c) in q.iter().filter(|(k, _)| k == "changes") {
        if let Some((k, v)) = c.strip_prefix("LABEL ").and_then(|l| l.split_once('=')) {
            labels.insert(k.to_string(), v.trim_matches('"').to_string());
        }
    }
    let full = format!("{repo}:{tag}");
    untag_everywhere(d, &full);
    let seq = d.next();
    let image = Image {
        id: format!("sha256:{}", id()),
        tags: vec![full],
        labels,
        seq,
    };
    let status = json!({ "status": image.id });
    let mut attrs = json!(image.labels);
    attrs["name"] = json!(repo);
    d.event("image", "import", &image.id, attrs);
    d.images.push(image);
    Reply::json(200, status)
}

fn untag_everywhere(d: &mut Daemon, full: &str) {
    for i in &mut d.images {
        i.tags.retain(|t| t != full);
    }
}

fn image_route(d: &mut Daemon, method: &str, rest: &str, q: &[(String, String)]) -> Reply {
    if let Some(r) = rest.strip_suffix("/json").filter(|_| method == "GET") {
        return match find_image(d, r) {
            Some(at) => {
                let i = &d.images[at];
                Reply::json(
                    200,
                    json!({ "Id": i.id, "RepoTags": i.tags, "Config": { "Labels": i.labels } }),
                )
            }
            None => message(404, format!("no such image: {r}")),
        };
    }
    if let Some(r) = rest.strip_suffix("/tag").filter(|_| method == "POST") {
        let Some(at) = find_image(d, r) else {
            return message(404, format!("no such image: {r}"));
        };
        let (Some(repo), tag) = (get(q, "repo"), get(q, "tag").unwrap_or("latest")) else {
            return message(400, "repository name must have at least one component");
        };
        let full = format!("{repo}:{tag}");
        untag_everywhere(d, &full);
        let id = d.images[at].id.clone();
        let mut attrs = json!(d.images[at].labels);
        attrs["name"] = json!(full);
        d.event("image", "tag", &id, attrs);
        d.images[at].tags.push(full);
        return Reply::empty(201);
    }
    if method != "DELETE" {
        return message(404, "page not found");
    }
    let Some(at) = find_image(d, rest) else {
        return message(404, format!("no such image: {rest}"));
    };
    let full = reference(rest);
    let i = &d.images[at];
    let by_tag = i.tags.contains(&full);
    // As dockerd does: an image named by its id with several tags is
    // not removed without force.
    if !by_tag && i.tags.len() > 1 {
        return message(
            409,
            format!(
                "conflict: unable to delete {rest} (must be forced) - image is referenced in multiple repositories"
            ),
        );
    }
    let last = !by_tag || i.tags.len() == 1;
    if last && d.containers.iter().any(|c| c.image == i.id) {
        return message(
            409,
            format!(
                "conflict: unable to remove repository reference \"{rest}\" (must force) - container is using its referenced image"
            ),
        );
    }
    let id = i.id.clone();
    d.event("image", "untag", &id, json!({ "name": full }));
    if !last {
        d.images[at].tags.retain(|t| *t != full);
        return Reply::json(200, json!([{ "Untagged": full }]));
    }
    let gone = d.images.remove(at);
    d.event("image", "delete", &gone.id, json!({ "name": gone.id }));
    Reply::json(200, json!([{ "Untagged": full }, { "Deleted": gone.id }]))
}

pub(super) fn labels_of(v: &Value) -> BTreeMap<String, String> {
    v["Labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

fn create_volume(d: &mut Daemon, body: &[u8]) -> Reply {
    let v: Value = serde_json::from_slice(body).unwrap_or_default();
    let name = v["Name"].as_str().map(str::to_string).unwrap_or_else(id);
    if name.contains('/') {
        return message(
            400,
            format!(
                "create {name}: \"{name}\" includes invalid characters for a local volume name"
            ),
        );
    }
    // As the daemon does: a volume that exists is answered as created, and
    // left as it was.
    if let Some(old) = d.volumes.iter().find(|x| x.name == name) {
        let doc = volume_doc(old);
        // (dockerd logs a create for it all the same.)
        d.event("volume", "create", &name, json!({ "driver": "local" }));
        return Reply::json(201, doc);
    }
    let seq = d.next();
    let vol = Volume {
        name,
        labels: labels_of(&v),
        files: BTreeMap::new(),
        seq,
    };
    let doc = volume_doc(&vol);
    d.event("volume", "create", &vol.name, json!({ "driver": "local" }));
    d.volumes.push(vol);
    Reply::json(201, doc)
}

fn volume_doc(v: &Volume) -> Value {
    json!({ "Name": v.name, "Driver": "local", "Labels": v.labels, "Scope": "local", "Options": null })
}

fn create_network(d: &mut Daemon, body: &[u8]) -> Reply {
    let v: Value = serde_json::from_slice(body).unwrap_or_default();
    let Some(name) = v["Name"].as_str().filter(|n| !n.is_empty()) else {
        return message(400, "network name must be given");
    };
    if d.networks.iter().any(|n| n.name == name) {
        return message(409, format!("network with name {name} already exists"));
    }
    let seq = d.next();
    let n = Network {
        id: id(),
        name: name.to_string(),
        labels: labels_of(&v),
        seq,
    };
    let answer = json!({ "Id": n.id, "Warning": "" });
    d.event(
        "network",
        "create",
        &n.id,
        json!({ "name": n.name, "type": "bridge" }),
    );
    d.networks.push(n);
    Reply::json(201, answer)
}

fn network_doc(n: &Network) -> Value {
    json!({ "Name": n.name, "Id": n.id, "Scope": "local", "Driver": "bridge", "Internal": true, "Labels": n.labels })
}

fn image_summary(i: &Image) -> Value {
    json!({ "Id": i.id, "RepoTags": i.tags, "Labels": i.labels, "Size": 0 })
}
