//! `tag-name`'s second route on ghcr.io: GitHub's package versions
//! listing (`metadata.container.tags`), behind the API's access control
//! rather than the registry's. The loopback OCI registry stands in for
//! ghcr.io and its packages API alike (src/loopback/oci/): a reader the
//! registry refuses still finds the tag through the API; a token GitHub
//! refuses leaves that route unread, said in the detail; a listing that
//! lags is an error, never a pass; where the registry does not delete,
//! cleanup deletes the plants' package versions through the API.

use crate::common::*;
use runwarden::loopback::oci::OciServer;

/// A config for the stand-in as `user` (its password in `REGISTRY_TOKEN`)
/// under the owner `octo`, the API token in `PKG_TOKEN`.
fn config(svc: &OciServer, user: &str) -> String {
    format!(
        "version: 1\nsurfaces:\n  - name: ghcr\n    type: oci-registry\n    registry: {url:?}\n    repository: octo\n    username: {user}\n    token-env: REGISTRY_TOKEN\n    api-url: {url:?}\n    api-token-env: PKG_TOKEN\n",
        url = svc.url()
    )
}

#[test]
fn a_reader_the_registry_refuses_reads_the_tag_through_githubs_package_versions() {
    let svc = OciServer::start().unwrap();
    let (_, pusher) = svc.user().unwrap();
    let reader = svc.limited_user("reader", &[]).unwrap();
    let (may, may_not) = (svc.api_token(true).unwrap(), svc.api_token(false).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let plant = run_config(
        dir.path(),
        &config(&svc, "runwarden"),
        &[("REGISTRY_TOKEN", &pusher), ("PKG_TOKEN", &may)],
        &["plant", "--probe-id", "pkg-1"],
    );
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    let recover = |api: &str| {
        run_config(
            dir.path(),
            &config(&svc, "reader"),
            &[("REGISTRY_TOKEN", &reader), ("PKG_TOKEN", api)],
            &["recover", "--probe-id", "pkg-1"],
        )
    };
    // The registry keeps the reader out of every route; GitHub's API
    // lists the tag.
    let open = recover(&may);
    let f = open.finding("ghcr:tag-name");
    assert_eq!(f["verdict"], "fail", "{}", open.report);
    assert!(
        f["detail"]
            .as_str()
            .unwrap()
            .contains("GitHub's package versions of \"octo/runwarden-"),
        "{f}"
    );
    assert_eq!(
        open.verdict("ghcr:manifest-annotation"),
        "pass",
        "{}",
        open.report
    );
    // GitHub refuses the API token too: closed, and the detail says the
    // versions were not read.
    let shut = recover(&may_not);
    let f = shut.finding("ghcr:tag-name");
    assert_eq!(f["verdict"], "pass", "{}", shut.report);
    let d = f["detail"].as_str().unwrap();
    assert!(d.contains("GitHub's package versions were not read: GitHub refused the API token: HTTP 403 \"Resource not accessible by integration\""), "{d}");
    for p in [&open, &shut] {
        assert!(
            !p.stdout.contains(&may)
                && !p.stdout.contains(&reader)
                && !p.report.to_string().contains(&may)
        );
    }
    let facts = shut.report["surfaces"].to_string();
    assert!(facts.contains("package-versions"), "{facts}");
}

#[test]
fn a_package_versions_listing_that_lags_is_an_error_and_the_control_reads_it() {
    let svc = OciServer::start().unwrap();
    let (_, pusher) = svc.user().unwrap();
    let reader = svc.limited_user("reader", &[]).unwrap();
    let may = svc.api_token(true).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("REGISTRY_TOKEN", pusher.as_str()),
        ("PKG_TOKEN", may.as_str()),
    ];
    // Listings lag from before the plant: they never show it.
    use runwarden::loopback::Knobs as _;
    svc.lock().knob(runwarden::loopback::Knob::Lag, true);
    let plant = run_config(
        dir.path(),
        &config(&svc, "runwarden"),
        &env,
        &["plant", "--probe-id", "pkg-2"],
    );
    assert_eq!(plant.code, 0, "{}", plant.stderr);
    let cfg = config(&svc, "reader") + "    consistency-wait: 1\n";
    let p = run_config(
        dir.path(),
        &cfg,
        &[("REGISTRY_TOKEN", &reader), ("PKG_TOKEN", &may)],
        &["recover", "--probe-id", "pkg-2"],
    );
    let f = p.finding("ghcr:tag-name");
    assert_eq!(f["verdict"], "error", "{}", p.report);
    assert!(
        f["detail"].as_str().unwrap().contains("not yet consistent"),
        "{f}"
    );
    // The control (the same stand-in, its own API token) was recovered.
    assert_control_sound(f);
}

/// Issue 39, on ghcr.io: a registry that does not delete for the pusher
/// (here a token without `delete`), with an API token that may delete
/// package versions: cleanup deletes each plant's version through
/// GitHub's API (its tags all the plant's), lists the layer blob the
/// registry would not delete with its answer, and the shared package.
#[test]
fn where_the_registry_does_not_delete_githubs_package_versions_remove_the_plants() {
    let svc = OciServer::start().unwrap();
    let pusher = svc.limited_user("pusher", &["pull", "push"]).unwrap();
    let deleter = svc.api_deleter().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("REGISTRY_TOKEN", pusher.as_str()),
        ("PKG_TOKEN", deleter.as_str()),
    ];
    let p = run_config(dir.path(), &config(&svc, "pusher"), &env, &["probe"]);
    assert_eq!(p.verdict("ghcr:tag-name"), "fail", "{}", p.report);
    let c = &p.report["cleanup"];
    let left = c["left"].as_array().unwrap();
    assert_eq!(left.len(), 1, "{c}");
    let why = left[0]["reason"].as_str().unwrap();
    assert!(
        why.contains("its layer blob sha256:") && why.contains("HTTP 401"),
        "{why}"
    );
    // (Newest first: blob-content's, left; manifest-annotation's, removed;
    // tag-name's, the last in the repository, kept with its account.)
    assert_eq!(c["deleted"], 1, "{c}");
    let kept = c["kept"].as_array().unwrap();
    assert_eq!(kept.len(), 1, "{c}");
    let why = kept[0]["reason"].as_str().unwrap();
    assert!(
        why.contains("the plant's manifest is deleted; left: the repository \"octo/runwarden-plants\" (shared by every probe's tag-name, manifest-annotation and blob-content plants; on GitHub, a package in the owner's list)"),
        "{why}"
    );
    // No version of the plants is left in the package.
    let (code, body) = crate::common::registries::curl(
        "GET",
        &format!(
            "{}/users/octo/packages/container/runwarden-plants/versions",
            svc.url()
        ),
        &["-H", &format!("authorization: Bearer {deleter}")],
        None,
    );
    assert_eq!((code, body.as_str()), (200, "[]"));
}
