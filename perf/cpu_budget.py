#!/usr/bin/env python3
"""Attributes the broker's perf samples to the stages of a send and prints µs per message.

Input: the text of `perf script -F comm,tid,time,event,ip,sym,dso` (inlined frames included) of a
`perf record --call-graph dwarf` of the broker, the broker's CPU seconds over the recorded
run and the messages acknowledged in it (both printed by perf/cpu_per_msg.sh). Every sample
counts the same share of the CPU time, so a stage's µs per message is its share of the
samples times the CPU per message.

A sample's stage is decided by its call chain, read from the leaf toward the thread's start:
the first frame that names a stage decides ("strong" rules: a Comet function, a kernel
function of one kind of I/O). When no frame does, the first frame matching a "weak" rule
decides (the executor, io_uring's generic submit and complete paths, the scheduler). What
matches neither is "other". `--unmatched N` prints the N most frequent leaf frames of the
samples that landed in "other" and in the weak rows, to refine the rules.
"""

import argparse
import collections
import json
import re
import sys

STAGES = [
    ("read", "read and decode (recv, frame, header)"),
    ("route", "route and hand-off (request task, topic lookup, mesh)"),
    ("append", "append (build the record, copy into the log)"),
    ("commit", "group commit (flush write, device, completion, dispatch, wake appends)"),
    ("response", "encode and write the response"),
    ("park", "park and wake (scheduler, membarrier, eventfd)"),
    ("runtime", "executor and io_uring bookkeeping (no stage in the chain)"),
    ("other", "other (timers, background tasks, unknown frames)"),
]

# (stage, pattern), tried on each frame from the leaf; the first frame matching any decides.
STRONG = [
    # Kernel, one kind of I/O each.
    ("read", r"^(tcp_recvmsg|sock_recvmsg|__sys_recvfrom|io_recv|tcp_rcv_space_adjust)"),
    ("response", r"^(tcp_sendmsg|sock_sendmsg|__sys_sendto|io_send|io_sendmsg|__sys_sendmsg)"),
    ("commit", r"^(ext4_|iomap_|__iomap|blk_|__blk|virtblk|virtqueue|vring_|iowrite16|"
               r"io_write|io_wq_|io_worker|io_rw_|io_req_rw_complete|bio_|submit_bio|"
               r"dio_|__x64_sys_fdatasync|jbd2)"),
    ("park", r"^(membarrier|__x64_sys_membarrier|futex_|__x64_sys_futex|eventfd_|"
             r"io_eventfd_signal)"),
    # Comet: response first (it runs inside the request task), then the stages of a send.
    ("response", r"(comet_proto::frame::encode|comet_proto::header::encode|"
                 r"ConnectionHandle::send|comet_net::connection::write_loop|"
                 r"run_connection::\{async_fn#0\}::\{async_block_env#0\}|"
                 r"SendMessageResponseHeader|comet_broker::processor::reply)"),
    ("commit", r"(comet_store::flush|comet_store::flights|comet_store::queues::dispatch|"
               r"comet_store::index|comet_store::warm|comet_store::consume_queue|"
               r"comet_rt::io::|durable_waiters|wake_up_to|comet_store::queues::)"),
    ("append", r"(comet_broker::processor::send::process|comet_broker::processor::send::build|"
               r"encode_record|complete_properties|with_region_and_trace|"
               r"comet_store::append|comet_store::store::Store::append|"
               r"comet_store::commit_log::CommitLog::append|body_crc|crc32fast)"),
    ("read", r"(comet_proto::frame::FrameDecoder|comet_proto::frame::decode|"
             r"comet_proto::header::decode|decode_send_request|"
             r"SendMessageRequestHeader|comet_net::connection::read_loop|"
             r"comet_net::connection::drain_frames|comet_net::listener::\{impl#1\}::admit|"
             r"poll_read<glommio::net)"),
    ("route", r"(comet_broker::processor::handle::|comet_broker::processor::send::route|"
              r"comet_broker::routing|comet_rt::mesh|comet_broker::runtime::mesh_handler|"
              r"comet_net::connection::start_request|comet_net::dispatch|"
              r"comet_broker::topic::|comet_broker::traffic|comet_broker::stats|"
              r"glommio::channels::shared_channel|comet_broker::runtime::build_server)"),
]

WEAK = [
    ("park", r"^(schedule|__schedule|finish_task_switch|io_cqring_wait|"
             r"try_to_wake_up|pick_next_task|dequeue_task|enqueue_task|"
             r"glommio::sys::uring::Reactor::link_rings_and_sleep)"),
    ("runtime", r"^(io_submit_sqes|__io_submit_flush_completions|io_handle_tw_list|"
                r"io_uring_enter|__do_sys_io_uring_enter|__x64_sys_io_uring_enter|"
                r"io_run_task_work|tctx_task_work|io_issue_sqe|io_poll|io_arm_poll|"
                r"io_cqring|io_fill_cqe|io_req_|io_flush_timeouts|"
                r"glommio::|comet_rt::)"),
]

STRONG_RE = [(stage, re.compile(pattern)) for stage, pattern in STRONG]
WEAK_RE = [(stage, re.compile(pattern)) for stage, pattern in WEAK]


# What perf script appends to a frame: "(inlined)" or the object it is in.
DSO_SUFFIX = re.compile(r" \((inlined|/[^()]*|\[[^\]]*\]|unknown)\)$")


def frame_name(text):
    """The function of a frame: inlined frames keep their generic parameters, which name
    the task (e.g. `run<comet_net::connection::run_connection::...>`)."""
    return DSO_SUFFIX.sub("", text.strip())


def read_samples(stream):
    """Yields (thread name, [frames leaf first]) per sample of `perf script` text."""
    comm, frames = None, []
    for line in stream:
        line = line.rstrip("\n")
        if not line:
            if comm is not None:
                yield comm, frames
            comm, frames = None, []
            continue
        if not line[0].isspace():
            comm, frames = line.split()[0], []
            continue
        parts = line.strip().split(None, 1)
        frames.append(frame_name(parts[1]) if len(parts) > 1 else "[unknown]")
    if comm is not None:
        yield comm, frames


# Inlined generic frames whose type parameter names what runs in them (the future a task
# polls, the stream a read polls); any other frame is matched by its path alone, so that
# `drop<comet_broker::topic::TopicTable>` counts where the drop happens.
WRAPPERS = re.compile(r"^(run|\{async_block#0\}|\{async_fn#0\}|poll_read)<")


def matchable(frame):
    """The part of a frame the rules look at."""
    return frame if WRAPPERS.match(frame) else frame.split("<", 1)[0]


def classify(comm, frames):
    """The stage of one sample, and whether a strong rule decided it."""
    if comm.startswith("iou-wrk"):
        # io_uring's workers run the writes io_uring could not complete inline.
        return "commit", True
    frames = [matchable(frame) for frame in frames]
    for frame in frames:
        for stage, pattern in STRONG_RE:
            if pattern.search(frame):
                return stage, True
    for frame in frames:
        for stage, pattern in WEAK_RE:
            if pattern.search(frame):
                return stage, False
    return "other", False


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("script", help="perf script output (- for stdin)")
    parser.add_argument("--cpu-us-per-msg", type=float, required=True)
    parser.add_argument("--label", default="")
    parser.add_argument("--json", help="also write the table as JSON to this file")
    parser.add_argument("--unmatched", type=int, default=0)
    args = parser.parse_args()
    stream = sys.stdin if args.script == "-" else open(args.script, encoding="utf-8")
    counts = collections.Counter()
    kernel = collections.Counter()
    threads = collections.Counter()
    leaves = collections.defaultdict(collections.Counter)
    total = 0
    for comm, frames in read_samples(stream):
        stage, strong = classify(comm, frames)
        counts[stage] += 1
        total += 1
        threads[re.sub(r"-\d+$", "", comm)] += 1
        # Kernel frames are printed without a module path and sit below entry_SYSCALL or
        # an interrupt; a leaf without "::" that is not a libc or Rust symbol is kernel.
        if frames and is_kernel(frames[0]):
            kernel[stage] += 1
        if not strong:
            leaves[stage][frames[0] if frames else "[none]"] += 1
    if total == 0:
        sys.exit("no samples")
    rows = []
    for stage, title in STAGES:
        share = counts[stage] / total
        rows.append({
            "stage": stage,
            "title": title,
            "samples": counts[stage],
            "share": share,
            "kernel_share": kernel[stage] / max(counts[stage], 1),
            "us_per_msg": share * args.cpu_us_per_msg,
        })
    print(f"{args.label} {total} samples, {args.cpu_us_per_msg:.1f} µs CPU/msg; threads: "
          + ", ".join(f"{name} {100 * n / total:.0f}%" for name, n in threads.most_common()))
    print("| stage | share | of it kernel | µs/msg |")
    print("|---|---|---|---|")
    for row in rows:
        print(f"| {row['title']} | {100 * row['share']:.1f}% | "
              f"{100 * row['kernel_share']:.0f}% | {row['us_per_msg']:.1f} |")
    print(f"| total | 100% | {100 * sum(kernel.values()) / total:.0f}% | "
          f"{args.cpu_us_per_msg:.1f} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"label": args.label, "samples": total,
                       "cpu_us_per_msg": args.cpu_us_per_msg, "rows": rows}, out, indent=1)
    if args.unmatched:
        for stage in ("other", "runtime", "park"):
            print(f"-- leaves decided by no strong rule, {stage}:")
            for leaf, n in leaves[stage].most_common(args.unmatched):
                print(f"   {n:5d} {leaf[:140]}")


def is_kernel(frame):
    return "::" not in frame and not frame.startswith(("_int_", "__libc", "malloc", "cfree",
                                                      "__memmove", "__memcmp", "__memset",
                                                      "unlink_chunk", "tcache", "[unknown]",
                                                      "syscall", "__GI", "__vdso", "<", "{"))


if __name__ == "__main__":
    main()
