//! Why an operation did not do what it was asked, typed so that the caller
//! can decide on it: a config or input mistake is the user's (exit 2, or
//! an entry refused), an unreachable service and a broken exchange are
//! ERROR, and what a type cannot do here is SKIPPED with the reason.
//!
//! The reason is text for people. It may quote surface data, so it is
//! escaped where it is built (as every reason in a report is) and only a
//! renderer turns it into output.

use std::fmt;

/// What went wrong, and why (the reason is safe to print).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The input is not one runwarden accepts: a config value, a path that
    /// leaves its host, a name that cannot be one path segment, a file that
    /// is not what it must be. Never a surface's own answer.
    Invalid(String),
    /// No connection could be made (refused, no route, name not found, TLS
    /// failed): the service is unreachable.
    Unreachable(String),
    /// Something broke: I/O, a server's or a child's error, no answer in
    /// time.
    Broken(String),
    /// This cannot be done here or by this surface type.
    Unsupported(String),
}

impl Fault {
    pub fn invalid(reason: impl Into<String>) -> Fault {
        Fault::Invalid(reason.into())
    }

    pub fn broken(reason: impl Into<String>) -> Fault {
        Fault::Broken(reason.into())
    }

    pub fn unsupported(reason: impl Into<String>) -> Fault {
        Fault::Unsupported(reason.into())
    }

    /// The reason, for people.
    pub fn reason(&self) -> &str {
        match self {
            Fault::Invalid(r)
            | Fault::Unreachable(r)
            | Fault::Broken(r)
            | Fault::Unsupported(r) => r,
        }
    }

    /// The reason alone, for an outcome or a report.
    pub fn into_reason(self) -> String {
        match self {
            Fault::Invalid(r)
            | Fault::Unreachable(r)
            | Fault::Broken(r)
            | Fault::Unsupported(r) => r,
        }
    }

    /// The same fault, its reason prefixed with what was being done
    /// ("cannot read the receipt: …").
    pub fn context(self, what: impl fmt::Display) -> Fault {
        let with = |r: String| format!("{what}: {r}");
        match self {
            Fault::Invalid(r) => Fault::Invalid(with(r)),
            Fault::Unreachable(r) => Fault::Unreachable(with(r)),
            Fault::Broken(r) => Fault::Broken(with(r)),
            Fault::Unsupported(r) => Fault::Unsupported(with(r)),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

impl std::error::Error for Fault {}

/// Why: an outcome's `reason` and a printed error are text, and code that
/// only passes a reason on (`?` in a function that reports text) should
/// not have to unwrap the kind it does not decide on.
impl From<Fault> for String {
    fn from(f: Fault) -> String {
        f.into_reason()
    }
}
