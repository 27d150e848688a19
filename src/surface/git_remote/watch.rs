//! Watch mode's reading of a change of the remote's refs: what a new
//! commit carries, and the carrier of a ref's name.

use super::Remote;

/// A new commit (an object id no ref named before) carries everything a
/// commit holds.
pub(super) const COMMIT_CARRIERS: &[Remote] = &[
    Remote::CommitMessage,
    Remote::AuthorName,
    Remote::AuthorEmail,
    Remote::FileContent,
    Remote::FilePath,
];

/// The carrier a ref's name is: a branch, a tag (its peeled `^{}` line
/// says it is annotated), a note, any other ref.
pub(super) fn name_carrier(name: &str) -> Remote {
    if name.starts_with("refs/heads/") {
        Remote::BranchName
    } else if name.starts_with("refs/tags/") && name.ends_with("^{}") {
        Remote::AnnotatedTagMessage
    } else if name.starts_with("refs/tags/") {
        Remote::TagName
    } else if name.starts_with("refs/notes/") {
        Remote::Notes
    } else {
        Remote::CustomRef
    }
}
