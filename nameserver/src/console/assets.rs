//! The console's page: static HTML, CSS and JavaScript kept in `nameserver/console/` and
//! built into the binary (no CDN, no build step); the script draws everything from the JSON
//! API, setting text only (never markup from data).

/// One static file.
pub struct Asset {
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its text.
    pub body: &'static str,
}

const INDEX: Asset = Asset {
    content_type: "text/html; charset=utf-8",
    body: include_str!("../../console/index.html"),
};

const STYLE: Asset = Asset {
    content_type: "text/css; charset=utf-8",
    body: include_str!("../../console/console.css"),
};

const SCRIPT: Asset = Asset {
    content_type: "text/javascript; charset=utf-8",
    body: include_str!("../../console/console.js"),
};

/// The asset served at `path`, if any. Every page of the console is `/` (the page picks
/// its view from the URL's fragment).
pub fn find(path: &str) -> Option<&'static Asset> {
    match path {
        "/" | "/index.html" => Some(&INDEX),
        "/console.css" => Some(&STYLE),
        "/console.js" => Some(&SCRIPT),
        _ => None,
    }
}
