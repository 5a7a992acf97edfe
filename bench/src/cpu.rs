//! CPU time of processes (this one, and brokers named with `--watch-pid`) over a run, from
//! `/proc/<pid>/stat` (utime + stime, in the kernel's fixed 100 Hz USER_HZ ticks).

use std::time::Instant;

use serde_json::{json, Value};

/// The kernel's unit for `/proc/<pid>/stat` times (USER_HZ), fixed at 100 on Linux.
const TICKS_PER_SECOND: f64 = 100.0;

/// User plus system CPU seconds used so far by `pid` ("self" for this process).
pub fn process_cpu_s(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_cpu_s(&stat)
}

/// utime + stime of one `/proc/<pid>/stat` line, in seconds. The command name may hold
/// spaces and parentheses, so fields are counted after its last `)`.
pub fn parse_stat_cpu_s(stat: &str) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // After the name: state is field 3; utime and stime are fields 14 and 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / TICKS_PER_SECOND)
}

/// CPU readings taken at the start of a measured window.
pub struct CpuWatch {
    started: Instant,
    readings: Vec<(String, Option<f64>)>,
}

impl CpuWatch {
    /// Reads this process and each of `pids` now.
    pub fn start(pids: &[u32]) -> CpuWatch {
        let mut names = vec![String::from("self")];
        names.extend(pids.iter().map(u32::to_string));
        let readings = names
            .into_iter()
            .map(|name| {
                let cpu = process_cpu_s(&name);
                (name, cpu)
            })
            .collect();
        CpuWatch {
            started: Instant::now(),
            readings,
        }
    }

    /// `{"bench_cpu_s", "bench_cpu_cores", "watched": [{"pid", "cpu_s", "cpu_cores"}]}`
    /// over the window since `start` (cores = CPU seconds per wall second).
    pub fn finish(&self) -> Value {
        let wall_s = self.started.elapsed().as_secs_f64().max(1e-9);
        let used = |name: &str, before: Option<f64>| -> Option<f64> {
            Some(process_cpu_s(name)? - before?)
        };
        let mut watched = Vec::new();
        let mut bench = json!({});
        for (name, before) in &self.readings {
            let cpu_s = used(name, *before);
            let cores = cpu_s.map(|cpu| cpu / wall_s);
            if name == "self" {
                bench = json!({ "bench_cpu_s": cpu_s, "bench_cpu_cores": cores });
            } else {
                watched.push(json!({ "pid": name, "cpu_s": cpu_s, "cpu_cores": cores }));
            }
        }
        bench["watched"] = Value::Array(watched);
        bench["cpu_window_s"] = wall_s.into();
        bench
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves utime and stime are found after a command name holding spaces and ')'.
    #[test]
    fn stat_line_with_an_awkward_name() {
        let line = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 \
                    3 0 100 1000 10 18446744073709551615";
        assert_eq!(parse_stat_cpu_s(line), Some(3.0));
        assert_eq!(parse_stat_cpu_s("garbage"), None);
        assert!(process_cpu_s("self").is_some());
    }
}
