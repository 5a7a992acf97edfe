//! Seeded kill moments for the SIGKILL tests: a failing run prints its seed, and
//! `COMET_CRASH_SEED` replays the same kill delays (the load at those moments still depends
//! on timing, so a seed narrows a run down rather than replaying it exactly).

/// A small deterministic PRNG (xorshift64).
pub struct XorShift(pub u64);

impl XorShift {
    /// The next pseudo-random word.
    pub fn next_word(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// `COMET_CRASH_SEED`, or one from the clock (odd, so never the PRNG's stuck zero).
pub fn crash_seed() -> u64 {
    std::env::var("COMET_CRASH_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(|| {
            let since_epoch = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            ((since_epoch.as_secs() << 30) ^ u64::from(since_epoch.subsec_nanos())) | 1
        })
}
