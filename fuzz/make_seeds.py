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
import zlib

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
                                            ("wrong_rank", 2, 3, job), ("other_job", 2, 0, b"other"),
                                            ("on_demand", 3, 0, job)]:
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
                       ("abort", '(abort = (lostRank = -1, reason = "stopped"))'),
                       ("failed", '(failed = "cannot create /nonexistent/dir/c.ckpt")'),
                       ("stall_warning", '(stallWarning = "silence: nothing heard from rank 2")'),
                       ("progress", '(progress = (issued = 3, oldestPending = (sequence = 2, signature = 7, '
                                    'description = "allreduce(sum, float32, 4096 bytes)"), lastIssued = (sequence = 2), '
                                    'lastCompleted = (sequence = 1, description = "barrier(0 bytes)")))')]:
        write("control_frame", name, b"\x02" + frame(capnp_encode(schema, "Control", text)))


def p2p_frames():
    """Point-to-point frames (collectives/src/p2p_wire.h) and channel answers, as p2p_frames_fuzz.cpp
    reads them: a selector byte, then the frame."""
    def envelope(tag, rendezvous, size, data=b""):
        return b"\x00" + struct.pack("<iB3xQ", tag, rendezvous, size) + data
    write("p2p_frames", "eager", envelope(7, 0, 5, b"hello"))
    write("p2p_frames", "eager_empty", envelope(0, 0, 0))
    write("p2p_frames", "rendezvous", envelope(12, 1, 1 << 20))
    write("p2p_frames", "eager_short", envelope(3, 0, 9, b"abc"))
    write("p2p_frames", "negative_tag", envelope(-1, 1, 64))
    write("p2p_frames", "clear_to_send", b"\x01" + struct.pack("<QQ", 4096, 65536))
    write("p2p_frames", "clear_to_send_too_much", b"\x01" + struct.pack("<QQ", 65537, 65536))
    write("p2p_frames", "credit", b"\x02" + struct.pack("<I", 262144) + bytes([0, 16, 16, 0, 255, 0]))
    write("p2p_frames", "take", b"\x03\x01")
    write("p2p_frames", "decline", b"\x03\x00")


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
    bound_seeds()


def bound_seeds():
    """Inputs at and just past the bounds of model files and hostfiles (Note [Model file bounds] in
    compute/src/model_toml.cpp, Note [Hostfile bounds] in launcher/src/hostfile.cpp), so that the
    fuzzers start beside each limit; scripts/fuzz.sh raises -max_len to reach the size bounds."""
    def nested(depth):
        lines, key = ["input = [1, 4, 4]"], "layers"
        for _ in range(depth):
            lines += [f"[[{key}]]", 'type = "residual"']
            key += ".main"
        return "\n".join(lines + [f"[[{key}]]", 'type = "flatten"']) + "\n"
    write("model_toml", "nested_64", nested(64))
    write("model_toml", "nested_65", nested(65))
    write("model_toml", "layers_10001", "input = [4]\n" + "[[layers]]\ntype='flatten'\n" * 10001)
    write("model_toml", "dots_257", "input = [4]\n" + ".".join(["a"] * 258) + " = 1\n")
    write("hostfile", "name_253", "h" * 253 + " slots=2\n")
    write("hostfile", "name_254", "node1\n" + "h" * 254 + "\n")
    write("hostfile", "user_33", "u" * 33 + "@node1\n")


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
    text = text[:-1] + (', callbackStates = [(name = "EarlyStopping", entries = [(key = "wait", integer = 2), '
                        '(key = "best", real = 0.5), (key = "best_weights.0", bytes = 0x"0000803f")])])')
    payload = capnp_encode("compute/src/checkpoint.capnp", "Checkpoint", text)
    header = b"TNTCKPT\x00" + struct.pack("<IIQQ", 1, 0, len(payload), fnv1a(payload))
    write("checkpoint", "callback_states", b"\x00" + header + payload)


def onnx_import():
    """The small ONNX test cases (tests/compute/onnx/make_onnx_cases.py made them)."""
    for f in sorted((ROOT / "tests" / "compute" / "onnx" / "data").glob("*.onnx")):
        if f.stat().st_size <= 64 * 1024:
            write("onnx_import", f.stem, f.read_bytes())


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


# An 8x6 RGB JPEG (4:2:0, quality 40) written once with libturbojpeg's tjCompress2: Python has no
# JPEG encoder of its own.
JPEG_8X6 = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb004300140e0f120f0d14121012171514181e32211e1c1c1e3d2c"
    "2e243249404c4b47404645505a736250556d5645466488656d777b8182814e608d978c7d96737e817cffdb0043011517"
    "171e1a1e3b21213b7c5346537c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c"
    "7c7c7c7c7c7c7c7c7c7c7c7c7c7cffc00011080006000803012200021101031101ffc4001f0000010501010101010100"
    "000000000000000102030405060708090a0bffc400b5100002010303020403050504040000017d010203000411051221"
    "31410613516107227114328191a1082342b1c11552d1f02433627282090a161718191a25262728292a3435363738393a"
    "434445464748494a535455565758595a636465666768696a737475767778797a838485868788898a9293949596979899"
    "9aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1"
    "f2f3f4f5f6f7f8f9faffc4001f0100030101010101010101010000000000000102030405060708090a0bffc400b51100"
    "020102040403040705040400010277000102031104052131061241510761711322328108144291a1b1c109233352f015"
    "6272d10a162434e125f11718191a262728292a35363738393a434445464748494a535455565758595a63646566676869"
    "6a737475767778797a82838485868788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4"
    "c5c6c7c8c9cad2d3d4d5d6d7d8d9dae2e3e4e5e6e7e8e9eaf2f3f4f5f6f7f8f9faffda000c03010002110311003f004b"
    "6b706e09b68e3f28f201545c7b636b7f3345145340f73fffd9")


def npy(descr, shape, data, version=1):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    prefix = 10 if version == 1 else 12
    header += " " * ((64 - (prefix + len(header) + 1) % 64) % 64) + "\n"
    size = struct.pack("<H" if version == 1 else "<I", len(header))
    return b"\x93NUMPY" + bytes([version, 0]) + size + header.encode() + data


def png(width, height, gray, rows):
    import zlib

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0 if gray else 2, 0, 0, 0)
    raw = b"".join(b"\x00" + row for row in rows)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def user_data():
    features = npy("<f4", "(2, 1, 2, 2)", struct.pack("<8f", *[i / 8 for i in range(8)]))
    labels = npy("<i8", "(2,)", struct.pack("<2q", 1, 3))
    write("npy", "float_nchw", features + labels + fdp_tail((4, 1), (1, 1), (len(features), 2)))
    features = npy("|u1", "(3, 3)", bytes(range(0, 90, 10)), version=2)
    labels = npy("|u1", "(3,)", bytes([0, 1, 0]))
    write("npy", "uint8_flat_v2", features + labels + fdp_tail((0, 1), (2, 1), (len(features), 2)))
    rgb = [bytes((x * 30 + y * 7 + c * 50) % 256 for x in range(5) for c in range(3)) for y in range(4)]
    # fdp_tail: channels (bool), height, width, crop (bool), read in that order from the end.
    write("image", "png_rgb", png(5, 4, False, rgb) + fdp_tail((1, 1), (15, 1), (7, 1), (1, 1)))
    gray = [bytes((x * 40 + y) % 256 for x in range(6)) for y in range(3)]
    write("image", "png_gray", png(6, 3, True, gray) + fdp_tail((0, 1), (3, 1), (3, 1), (0, 1)))
    write("image", "jpeg_rgb", JPEG_8X6 + fdp_tail((1, 1), (31, 1), (31, 1), (0, 1)))


def ib_protocol():
    rng = random.Random(7)
    for i in range(8):
        write("ib_protocol", f"random{i}", bytes(rng.randrange(256) for _ in range(64 + 32 * i)))


def dictzip(text, chunk_length, tail_block=True, extra_before=b"", flags=0x08):
    """`text` as dictzip writes it: deflate flushed (Z_FULL_FLUSH) every `chunk_length` bytes, the
    compressed size of each chunk in the header's 'RA' subfield, then the gzip trailer."""
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    data, sizes = b"", []
    chunks = [text[i:i + chunk_length] for i in range(0, len(text), chunk_length)]
    for k, chunk in enumerate(chunks):
        out = z.compress(chunk)
        out += z.flush(zlib.Z_FINISH if k + 1 == len(chunks) and not tail_block else zlib.Z_FULL_FLUSH)
        sizes.append(len(out))
        data += out
    if tail_block:
        data += z.flush(zlib.Z_FINISH)
    ra = struct.pack("<HHH", 1, chunk_length, len(sizes)) + b"".join(struct.pack("<H", s) for s in sizes)
    extra = extra_before + b"RA" + struct.pack("<H", len(ra)) + ra
    header = bytes([0x1F, 0x8B, 8, 0x04 | flags, 0, 0, 0, 0, 2, 3]) + struct.pack("<H", len(extra)) + extra
    if flags & 0x08:
        header += b"test.dict\0"
    if flags & 0x10:
        header += b"a comment\0"
    if flags & 0x02:
        header += struct.pack("<H", zlib.crc32(header) & 0xFFFF)
    return header + data + struct.pack("<II", zlib.crc32(text), len(text) & 0xFFFFFFFF)


DICTIONARY = [
    ("dog", "dog /dˈɒɡ/\nHund <masc>\n      \"The dog barks.\"  - Der Hund bellt.\n"),
    ("cat", "cat /kˈat/\nKatze <fem>, Kater <masc>\n"),
    ("dog", "dog /dˈɒɡ/\nRüde <masc> [zool.]\n"),
    ("acute", "acute /ɐkjˈuːt/ (´)\nAkut <masc>, Akut-Zeichen <neut> [print] ´\n"),
    ("kitten", "kitten /k/\nKätzchen (jung), Kätzchen <neut>\n   Synonym: {cat}\n"),
    ("study", "It takes time to study. /ɪt/\nMan braucht Zeit, um zu studieren., Es dauert.\n"),
    ("unusable", "un(usable) /x/\nunbrauchbar\n"),
    ("good morning", "good morning /ɡʊd/\nGuten Tag\n      \"Good morning, Sir.\"  - Guten Tag, mein Herr.\n"),
]


def dictd_base64(v):
    digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    s = ""
    while True:
        s = digits[v % 64] + s
        v //= 64
        if v == 0:
            return s


def dictionary(entries):
    """(index, text) of a dictd dictionary, as dictfmt writes it: a metadata entry first, the
    index sorted by headword."""
    text = "\n00-database-info\nThis is a test dictionary.\n".encode()
    lines = [("00databaseinfo", 0, len(text))]
    for head, body in entries:
        body = body.encode()
        lines.append((head, len(text), len(body)))
        text += body
    lines.sort(key=lambda line: line[0])
    index = "".join(f"{h}\t{dictd_base64(o)}\t{dictd_base64(n)}\n" for h, o, n in lines).encode()
    return index, text


def sequence_data():
    text = "".join(body for _, body in DICTIONARY).encode()
    write("dictzip", "one_chunk", dictzip(text, 4096))
    write("dictzip", "chunks", dictzip(text, 64))
    write("dictzip", "no_tail_block", dictzip(text, 100, tail_block=False))
    write("dictzip", "header_fields", dictzip(text[:200], 50, extra_before=b"XY\x02\x00ab", flags=0x08 | 0x10 | 0x02))
    index, text = dictionary(DICTIONARY)
    # freedict: flags, max_chars, chunk length, the index's length (FuzzedDataProvider, from the end)
    for name, flags, max_chars, chunk in [("one_sense", 0, 0, 64), ("all_senses_examples", 3, 0, 4096),
                                          ("max_chars", 2, 12, 100)]:
        write("freedict", name, index + text + fdp_tail((flags, 1), (max_chars, 1), (chunk - 1, 2), (len(index), 2)))
    # vocabulary: even mode byte + a file, or odd mode byte (bit 1 BPE) + merges + texts
    char_tokens = ["<pad>", "<s>", "</s>", "<unk>", "\\s", "a", "b", "d", "g", "o", "ä"]
    write("vocabulary", "char_file",
          b"\x00" + ("tnt-vocabulary 1\nkind char\ntokens %d\nmerges 0\n" % len(char_tokens) +
                     "".join(t + "\n" for t in char_tokens)).encode())
    bpe_tokens = char_tokens + ["do", "dog", "\\\\"]
    write("vocabulary", "bpe_file",
          b"\x00" + ("tnt-vocabulary 1\nkind bpe\ntokens %d\nmerges 2\n" % (len(bpe_tokens) - 1) +
                     "".join(t + "\n" for t in bpe_tokens[:-1]) + "7 9\n11 8\n").encode())
    texts = "\n".join(["the dog barks", "der Hund bellt", "a cat", "eine Katze", "Kätzchen"]).encode()
    write("vocabulary", "learn_char", b"\x01\x00" + texts)
    write("vocabulary", "learn_bpe", b"\x03\x20" + texts)
    write("vocabulary", "learn_bpe_min_count", b"\x07\x10" + texts)
    # sequence: flags, bucket batches, world size - 1, global batch, micro-batch, seed (from the end)
    pairs = "\n".join(["dog\tHund", "cat\tKatze", "good morning\tGuten Tag", "the dog barks\tder Hund bellt",
                       "kitten\tKätzchen", "acute\tAkut", "study\tstudieren"]).encode()
    for name, flags, bucket, world, batch, micro in [("char_two_ranks", 4, 0, 1, 4, 0), ("bpe_bucketed", 5 | 16, 2, 2, 6, 0),
                                                     ("drop_remainder", 8 | 4, 1, 0, 3, 0), ("micro_batch", 2, 0, 3, 0, 1)]:
        write("sequence", name, pairs + fdp_tail((flags, 1), (bucket, 1), (world, 1), (batch, 1), (micro, 1), (7, 1)))


def shm_chunks():
    """Step runs as shm_chunks_fuzz.cpp reads them: every choice is an integer that
    FuzzedDataProvider takes from the end of the input (fdp_tail), raw garbage comes from its front."""
    def tag(value, context=0):
        return [(value, 1), (context, 1)]

    def message(t, context, length, cut=1024):  # step 0: kShmData chunks of at most `cut`
        return [(0, 1)] + tag(t, context) + [(length, 2), (cut - 1, 2)]

    def receive(t, context, capacity):  # step 3
        return [(3, 1)] + tag(t, context) + [(capacity, 2)]

    def read_me(t, length):  # step 4: kShmReadMe
        return [(4, 1)] + tag(t) + [(length, 2)]

    publish = [(2, 1)]
    offered_read_done = [(5, 1), (1, 1)]

    def seed(name, steps, front=b""):
        write("shm_chunks", name, front + fdp_tail(*steps))

    seed("expected", receive(1, 0, 100) + message(1, 0, 100) + publish)
    seed("unexpected_chunks_wrap", message(2, 1, 5000) + publish + message(3, 0, 3000, 700) + publish +
         receive(2, 1, 5000) + receive(3, 0, 4000) + publish)
    seed("posted_while_arriving", message(4, 0, 3000, 1000) + publish + receive(4, 0, 3000) + message(5, 0, 10) +
         publish)
    seed("empty", message(6, 0, 0) + receive(6, 0, 0) + publish)
    seed("read_me", receive(4, 0, 3000) + read_me(4, 3000) + read_me(5, 10) + publish + receive(5, 0, 10))
    seed("read_done", offered_read_done + offered_read_done + publish + message(1, 1, 64) + publish)
    seed("read_done_never_offered", [(5, 1), (0, 1), (99, 8)] + publish)
    seed("larger_than_receive", receive(7, 0, 100) + message(7, 0, 200) + publish)
    # A header whose chunk is longer than the ring, and one of an unknown kind.
    long_chunk = struct.pack("<QQQII", 1, 1 << 20, 1 << 20, 0, 0)
    seed("chunk_past_ring", [(1, 1), (len(long_chunk), 1)] + publish, long_chunk)
    bad_kind = struct.pack("<QQQII", 1, 8, 8, 7, 0) + bytes(8)
    seed("bad_kind", [(1, 1), (len(bad_kind), 1)] + publish, bad_kind)
    # Two chunks of one message whose lengths add up past it (the second must not be copied).
    halves = b"".join(struct.pack("<QQQII", 1, 50, 30, 0, 0) + bytes(30) for _ in range(2))
    seed("chunk_past_message", receive(1, 0, 50) + [(1, 1), (62, 1), (1, 1), (62, 1)] + publish, halves)
    seed("partial_header", message(1, 0, 10) + publish + [(6, 1), (1, 1), (16, 2)])
    seed("head_behind_tail", message(1, 0, 10) + publish + [(6, 1), (0, 1), (3, 8)])


def shm_lane():
    """Step runs as shm_lane_fuzz.cpp reads them: plain bytes, front to back."""
    def frame(context, length):  # step 0
        return bytes([0, context, length >> 8, length & 0xff])

    take = bytes([2])

    def forged(frame_bytes, skip, context=0):  # step 1
        return bytes([1]) + frame_bytes.to_bytes(4, "big") + (bytes([1]) if skip else bytes([0, context]))

    write("shm_lane", "frames", frame(0, 8) + frame(1, 0) + frame(3, 900) + take)
    write("shm_lane", "wrap", (frame(2, 700) + take) * 8)
    write("shm_lane", "full", frame(0, 900) * 6 + take + frame(1, 900) * 3 + take)
    write("shm_lane", "skip_with_bytes", frame(0, 8) + take + forged(16, True) + take)
    write("shm_lane", "frame_past_lane", forged(5000, False, 1) + take)
    write("shm_lane", "frame_too_long", forged(1 << 31, False) + take)


if __name__ == "__main__":
    handshake()
    control_frame()
    p2p_frames()
    text_seeds()
    checkpoint()
    onnx_import()
    datasets()
    user_data()
    ib_protocol()
    sequence_data()
    shm_chunks()
    shm_lane()
    print("seeds written to", CORPUS)
