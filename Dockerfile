# Comet in a container: the release binaries (comet-broker, comet-nameserver, comet-admin,
# comet-bench) built in the official Rust image, run on Debian slim. The default command runs
# a standalone broker (its name server embedded) with the store on the volume /var/lib/comet.
#
#   docker build -t comet .
#   docker run --rm --network host \
#       --security-opt seccomp=unconfined --ulimit memlock=-1 \
#       -v comet-data:/var/lib/comet comet
#
# io_uring: every read, write and socket of the broker goes through io_uring, and Docker's
# default seccomp profile (since Docker 25) refuses io_uring_setup, io_uring_enter and
# io_uring_register, so the broker cannot start under it. Run it with
# `--security-opt seccomp=unconfined`, or with a profile of your own: Docker's default
# profile with those three syscalls added to its allowed names
# (`--security-opt seccomp=/path/to/profile.json`). Each shard also registers I/O memory with
# io_uring, which counts against the locked-memory limit: give the container
# `--ulimit memlock=-1` (or a limit well above the shards' needs).
#
# Networking: the broker tells clients to reach it at `brokerIP1` (default: the container's
# own address) and the embedded name server listens on 127.0.0.1:9876. With `--network host`
# both work as on the host. With published ports instead, give the address clients use and
# let the name server listen on every interface:
#   docker run ... -p 9876:9876 -p 10911:10911 comet \
#       --standalone --store /var/lib/comet/store --namesrv 0.0.0.0:9876 --broker-ip HOST_IP
#
# The image sets no CPU pinning policy: with fewer CPUs than the host, give `--cores N` (one
# shard per CPU the container may use) and `--cpuset-cpus` to match.

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked \
        -p comet-broker -p comet-nameserver -p comet-tools -p comet-bench \
    && mkdir -p /out \
    && cp target/release/comet-broker target/release/comet-nameserver \
          target/release/comet-admin target/release/comet-bench /out/

FROM debian:bookworm-slim
RUN useradd --system --home-dir /var/lib/comet --create-home comet
COPY --from=build /out/ /usr/local/bin/
USER comet
WORKDIR /var/lib/comet
VOLUME /var/lib/comet
# Broker, embedded name server, HA port (master to slaves).
EXPOSE 10911 9876 10912
ENTRYPOINT ["comet-broker"]
CMD ["--standalone", "--store", "/var/lib/comet/store"]
