//! Which thread a line comes from: a shard, or another named thread (signals, controller
//! session, the name server's executor).

use std::cell::Cell;

thread_local! {
    static SHARD: Cell<Option<u16>> = const { Cell::new(None) };
}

/// Marks the calling thread as shard `index`: every line it logs from now on carries
/// `shard=index`. Called once by each shard thread as it starts.
pub fn set_thread_shard(index: u16) {
    SHARD.with(|shard| shard.set(Some(index)));
}

/// Who is logging, as a line names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ThreadTag {
    /// A shard thread (`shard=N`).
    Shard(u16),
    /// Another thread with a name (`thread=name`).
    Named(String),
    /// A thread without a name: the line says nothing.
    Unnamed,
}

/// The calling thread's tag.
pub fn thread_tag() -> ThreadTag {
    if let Some(index) = SHARD.with(Cell::get) {
        return ThreadTag::Shard(index);
    }
    match std::thread::current().name() {
        Some(name) => ThreadTag::Named(name.to_owned()),
        None => ThreadTag::Unnamed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a thread is tagged by its shard once it says so, and by its name before (or
    // on other threads), so shard lines and other threads' lines stay apart.
    #[test]
    fn shard_threads_and_named_threads_are_told_apart() {
        let tags = std::thread::Builder::new()
            .name("comet-test-thread".to_owned())
            .spawn(|| {
                let before = thread_tag();
                set_thread_shard(3);
                (before, thread_tag())
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(tags.0, ThreadTag::Named("comet-test-thread".to_owned()));
        assert_eq!(tags.1, ThreadTag::Shard(3));
        assert_ne!(thread_tag(), ThreadTag::Shard(3));
    }
}
