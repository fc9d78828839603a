#!/usr/bin/env python3
"""Writes the seed corpora in fuzz/corpus/ (see README.md). Run from anywhere; needs `capnp`
(Debian's capnproto) to encode the Cap'n Proto seeds. The seeds are committed: run this again
only when a format changes."""
import hashlib
import hmac
import os
import pathlib
import random
import struct
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"


def write(target, name, data):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def capnp_encode(schema, struct_name, text):
    schema = ROOT / schema
    return subprocess.run(["capnp", "encode", f"--import-path={schema.parent}", str(schema), struct_name],
                          input=text.encode(), capture_output=True, check=True).stdout


def fdp_tail(*values):
    """Bytes that FuzzedDataProvider's ConsumeIntegralInRange calls read from the end of the input,
    for (value, byte count) pairs in the order the target consumes them."""
    out = b""
    for value, count in values:
        out = value.to_bytes(count, "little") + out  # read last byte first, most significant first
    return out


def handshake():
    job, token = b"fuzz-job", b"fuzz-token"
    for name, kind, server_rank, job_id in [("data", 2, 0, job), ("rendezvous", 1, 0, job),
                                            ("wrong_rank", 2, 3, job), ("other_job", 2, 0, b"other")]:
        preamble = b"TNT\x01" + struct.pack("<III", kind, 1, server_rank) + hashlib.sha256(job_id).digest() + bytes(
            range(32))
        nonce = bytes(range(100, 132))
        proof = hmac.new(token, b"tnt-server" + preamble + nonce, hashlib.sha256).digest()
        challenge = b"TNT\x01" + struct.pack("<I", 0) + nonce + proof
        write("handshake", name, preamble + challenge + b"\x00")


def frame(payload):
    return struct.pack("<I", len(payload)) + payload


def control_frame():
    schema = "transport/src/wire.capnp"
    hello = capnp_encode(schema, "Hello", '(rank = 1, size = 3, jobId = "job", protocolVersion = 1, '
                         'hostname = "node1", dataAddress = "10.0.0.2:4711", transport = "tcp", '
                         'configHash = 0x"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")')
    write("control_frame", "hello", b"\x00" + frame(hello))
    book = capnp_encode(schema, "RendezvousReply", '(addressBook = [(rank = 0, hostname = "a", dataAddress = '
                        '"10.0.0.1:1"), (rank = 1, hostname = "b", dataAddress = "[::1]:2")])')
    write("control_frame", "address_book", b"\x01" + frame(book))
    refusal = capnp_encode(schema, "RendezvousReply", '(refusal = "different configuration")')
    write("control_frame", "refusal", b"\x01" + frame(refusal))
    for name, text in [("heartbeat", "(heartbeat = void)"), ("goodbye", "(goodbye = void)"),
                       ("peer_lost", '(peerLost = (rank = 2, reason = "reset"))'),
                       ("abort", '(abort = (lostRank = -1, reason = "stopped"))')]:
        write("control_frame", name, b"\x02" + frame(capnp_encode(schema, "Control", text)))


def text_seeds():
    for i, address in enumerate(["127.0.0.1:4711", "[::1]:80", "10.0.0.7:40123", "[fe80::1%eth0]:9", "host:1"]):
        write("data_address", f"seed{i}", address)
    write("agent_protocol", "check_request",
          b"\x00host node\\n1\nprogram tnt-train\ncwd /tmp\nn_ranks 2\npin 1\nnuma_topology 0-3@0\nwant_port 1\n"
          b"ssh_clients 0\nend\n")
    write("agent_protocol", "host_launch",
          b"\x01host node1\njob_id j1\ncwd /tmp\narg tnt-train\narg conf/a b.toml\nenv TNT_JOB_TOKEN=x\\\\y\n"
          b"export OMP_NUM_THREADS=4\nfirst_rank 2\nn_ranks 2\npin 0\npin_memory 0\nnuma_topology \n"
          b"log_level INFO\nstop_grace_ms 2000\nend\n")
    write("agent_protocol", "escape", b"\x02a\\b\nc\rd")
    write("agent_protocol", "cleanup_request", b"\x03program tnt-train\nforce 1\ngrace_ms 3000\ndry_run 0\nend\n")
    write("job_registry", "entry",
          "job j\\n1\nprogram tnt-train\nexecutable /usr/bin/tnt-train\nprocess -1 100 555\nprocess 0 101 556\nend\n")
    write("hostfile", "simple", "# hosts\nnode1 slots=2\nnode2\n\n[::1]\n")
    write("hostfile", "comments", "a.example.org slots=4 # big\nuser@b\n")
    for i, nodes in enumerate(["node[01-03,7],gpu1", "a[1-2]b,c", "n1", "x[0-0],y[10-12]"]):
        write("slurm_nodelist", f"seed{i}", nodes)
    for f in (ROOT / "conf").glob("*.toml"):
        write("run_config", f.stem, f.read_bytes())
    write("run_config", "with_settings", (ROOT / "conf/lenet5_fashion_mnist.toml").read_bytes() +
          b"\x00train.epochs=2\nmodel.name=\"mlp\"\noptimizer.momentum=0.5\n")
    for f in (ROOT / "conf/models").glob("*.toml"):
        write("model_toml", f.stem, f.read_bytes())


def fnv1a(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def checkpoint():
    model = (ROOT / "conf/models/mlp.toml").read_text().replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    values = "0x\"" + "0000803f" * 4 + "\""
    text = (f'(schemaVersion = 1, kind = full, modelToml = "{model}", '
            f'parameters = [(name = "dense0.weight", shape = [2, 2], values = {values})], '
            f'states = [], hasOptimizer = true, optimizerOptions = (kind = "sgd", momentum = 0.9), '
            f'optimizerSteps = 3, optimizerSlots = [(name = "dense0.weight", shape = [4], values = {values})], '
            f'epoch = 1, step = 10, trainingPasses = 10, '
            f'extra = [(key = "order", integer = 7), (key = "blob", bytes = 0x"0102")])')
    payload = capnp_encode("compute/src/checkpoint.capnp", "Checkpoint", text)
    header = b"TNTCKPT\x00" + struct.pack("<IIQQ", 1, 0, len(payload), fnv1a(payload))
    write("checkpoint", "full", b"\x00" + header + payload)
    write("checkpoint", "full_fixed_header", b"\x01" + header + payload)


def datasets():
    images = bytes([0, 0, 8, 3]) + struct.pack(">III", 2, 3, 3) + bytes(range(18))
    labels = bytes([0, 0, 8, 1]) + struct.pack(">I", 2) + bytes([1, 9])
    write("idx", "two_images", images + labels + fdp_tail((10, 2), (len(images), 2)))
    rgb = bytes([0, 0, 8, 4]) + struct.pack(">IIII", 1, 3, 2, 2) + bytes(range(12))
    write("idx", "rgb", rgb + bytes([0, 0, 8, 1, 0, 0, 0, 1, 0]) + fdp_tail((10, 2), (len(rgb), 2)))
    rng = random.Random(11)
    record = lambda label: bytes([label]) + bytes(rng.randrange(256) for _ in range(3072))
    write("cifar10", "one_file", record(3) + record(9) + fdp_tail((1, 1)))
    first = record(0)
    write("cifar10", "two_files", first + record(5) + fdp_tail((2, 1), (len(first), 2)))


def ib_protocol():
    rng = random.Random(7)
    for i in range(8):
        write("ib_protocol", f"random{i}", bytes(rng.randrange(256) for _ in range(64 + 32 * i)))


if __name__ == "__main__":
    handshake()
    control_frame()
    text_seeds()
    checkpoint()
    datasets()
    ib_protocol()
    print("seeds written to", CORPUS)
