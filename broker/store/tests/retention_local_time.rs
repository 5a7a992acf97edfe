//! `deleteWhen` hours are local hours, as Java reads them from a `Calendar`. Alone in its
//! binary: the C library reads `TZ` once, at the first conversion of the process, so the
//! zone is set before anything converts a time.

// Proves the hour retention compares with `deleteWhen` is the local one: in a zone five
// hours east of UTC, 11:30 UTC is hour 16.
#[test]
fn delete_hours_are_local() {
    std::env::set_var("TZ", "XST-5");
    // 2026-01-01T11:30:00Z.
    let half_past_eleven_utc = 1_767_267_000_000;
    assert_eq!(comet_store::local_hour(half_past_eleven_utc), 16);
    assert_eq!(
        comet_store::local_hour(half_past_eleven_utc + 10 * 3_600_000),
        2
    );
}
