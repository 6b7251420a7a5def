//! The console page's files (`xy-daemon/console/`), embedded in `xyd` at
//! build time: no front-end toolchain, nothing read from disk at run time.

/// `(content type, bytes)` of the file at `path`, if it is one.
pub(super) fn file(path: &str) -> Option<(&'static str, &'static [u8])> {
    Some(match path {
        "/" | "/index.html" => (
            "text/html; charset=utf-8",
            include_bytes!("../../console/index.html"),
        ),
        "/app.js" => (
            "text/javascript; charset=utf-8",
            include_bytes!("../../console/app.js"),
        ),
        "/style.css" => (
            "text/css; charset=utf-8",
            include_bytes!("../../console/style.css"),
        ),
        _ => return None,
    })
}
